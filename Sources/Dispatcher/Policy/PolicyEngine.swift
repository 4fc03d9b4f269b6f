import Foundation
import HeraldCore

/// Decides, per job and recipient, whether, when and how to notify. Pure: values in, a decision out,
/// time from the caller; no I/O.
///
/// The first rule that applies decides, in this order: expiry; schedule (`deliverAt`); preferences
/// (`enabled`, `eventToggles`, `mutedUntil`, opt-in); presence; geo radius; device capabilities; quiet hours;
/// coalescing; throttling (an open summary, a backlog, the per-user and per-scope limits).
/// Mandatory jobs skip preferences, quiet hours and throttling. Critical jobs skip presence, quiet hours,
/// coalescing and throttling; high-priority jobs skip throttling.
/// ```swift
/// var context = RecipientContext(userID: job.userID, preferences: Preferences(json: text), devices: devices)
/// let decision = PolicyEngine().decide(job, inputs: inputs, category: policy, recipient: context, now: now)
/// context.record(decision, category: job.category, inputs: inputs, now: now)  // the next job sees it
/// ```
package struct PolicyEngine: Sendable {
    package init() {}

    /// Decides what happens to `job` for its recipient at `now`.
    package func decide(
        _ job: Job,
        inputs: PolicyInputs,
        category: CategoryPolicy,
        recipient: RecipientContext,
        now: Date
    ) -> PolicyDecision {
        if now >= job.expiresAt { return .expire }
        if let deliverAt = inputs.deliverAt, deliverAt > now { return .deferred(until: deliverAt, reason: .scheduled) }
        let mandatory = category.mandatory || job.options.mandatory == true
        let critical = job.priority == .critical
        if !mandatory, let reason = muted(job.category, category, recipient.preferences, now) {
            return .suppress(reason)
        }
        if !critical, let context = job.options.context, recipient.presence.contains(context) {
            return .suppress(.presence)
        }
        var distanceKm: Double?
        if let geo = inputs.geo, let location = recipient.preferences.location {
            let distance = location.center.distanceKm(to: geo)
            guard distance <= location.radiusKm else { return .suppress(.outOfRadius) }
            distanceKm = distance
        }
        if recipient.devices.isEmpty { return .suppress(.noActiveDevice) }
        let devices = recipient.devices.filter { capable($0, inputs.requires) }
        if devices.isEmpty { return .suppress(.noCapableDevice) }
        if !mandatory, !critical, category.quietHours != .bypass,
            let end = recipient.preferences.quietHours?.windowEnd(containing: now, in: recipient.timeZone)
        {
            return category.quietHours == .defer
                ? .deferred(until: end, reason: .quietHours) : .suppress(.quietHoursDrop)
        }
        if !critical, !inputs.isSummary,
            let decision = throttle(job, inputs, category, recipient, now, urgent: mandatory || job.priority == .high)
        {
            return decision
        }
        return .deliver(Delivery(devices: devices, distanceKm: distanceKm))
    }

    /// The preference that mutes a non-mandatory job, if any.
    private func muted(
        _ name: String,
        _ category: CategoryPolicy,
        _ preferences: Preferences,
        _ now: Date
    )
        -> SuppressionReason?
    {
        if !preferences.enabled { return .disabledByUser }
        if preferences.eventToggles[name] == false { return .categoryMuted }
        if let until = preferences.mutedUntil, until > now { return .mutedUntil }
        if category.optIn && !preferences.optIns.contains(name) { return .notOptedIn }
        return nil
    }

    /// Whether the device's attributes equal every attribute the job requires.
    private func capable(_ device: Device, _ requires: [String: JSONValue]) -> Bool {
        if requires.isEmpty { return true }
        let attributes = [String: JSONValue].parsing(device.attributesJSON)
        return requires.allSatisfy { attributes[$0.key] == $0.value }
    }

    /// Coalescing for every non-critical job, then the limits for non-urgent ones; nil lets the job through.
    private func throttle(
        _ job: Job,
        _ inputs: PolicyInputs,
        _ category: CategoryPolicy,
        _ recipient: RecipientContext,
        _ now: Date,
        urgent: Bool
    ) -> PolicyDecision? {
        let key = inputs.coalesceKey ?? job.category
        func fold(_ dueAt: Date, _ reason: FoldReason) -> PolicyDecision {
            .fold(Fold(key: key, dueAt: dueAt, reason: reason))
        }
        // Only the rules that read them filter the recipient's sends (most categories have none).
        func sameCategory(_ also: (RecentSend) -> Bool) -> [RecentSend] {
            recipient.recentSends.filter { $0.category == job.category && also($0) }
        }
        switch category.coalescing {
        case .none:
            break
        case .trailing(let window):
            return fold(now + window, .debounced)
        case .leading(let count, let window):
            let burst = sameCategory { ($0.coalesceKey ?? $0.category) == key }
            if let due = Self.fullUntil(burst, max: count, window: window, now: now) { return fold(due, .coalesced) }
        }
        if urgent { return nil }
        if !recipient.openSummaries.isEmpty,
            let due = recipient.openSummaries[SummaryKey(category: job.category, key: key)]
        {
            return fold(max(due, now), .summaryOpen)
        }
        if let above = category.summarizeAbove, recipient.pending[job.category, default: 0] > above {
            return fold(now, .backlog)
        }
        if let limit = category.perUser,
            let due = Self.fullUntil(recipient.recentSends, max: limit.max, window: limit.window, now: now)
        {
            return category.overLimit == .summarize ? fold(due, .rateLimited) : .suppress(.rateLimited)
        }
        if let limit = category.perScope, let scope = inputs.scope,
            let due = Self.fullUntil(sameCategory { $0.scope == scope }, max: limit.max, window: limit.window, now: now)
        {
            return category.overLimit == .summarize ? fold(due, .scopeQuota) : .suppress(.scopeQuota)
        }
        return nil
    }

    /// When a sliding window holding `max` sends has room again; nil when it has room now.
    ///
    /// A send counts while `now − window < at`; room returns when the `max`-th newest leaves the window.
    static func fullUntil(_ sends: [RecentSend], max: Int, window: Duration, now: Date) -> Date? {
        let max = Swift.max(1, max)
        let start = now - window
        // Counted before anything is gathered or sorted: most windows have room.
        guard sends.count >= max, sends.lazy.filter({ $0.at > start }).count >= max else { return nil }
        let inWindow = sends.compactMap { $0.at > start ? $0.at : nil }.sorted()
        return inWindow[inWindow.count - max] + window
    }
}
