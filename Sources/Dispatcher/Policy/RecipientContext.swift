import Foundation
import HeraldCore
import Synchronization

/// Everything the policy engine knows about one recipient at decision time, loaded once per batch.
package struct RecipientContext: Sendable {
    package var userID: String
    package var preferences: Preferences
    /// The zone quiet hours are read in: the preference's IANA zone, else the first device's, else UTC.
    package var timeZone: TimeZone
    /// Live presence contexts (`herald.presence`, not expired), e.g. `conversation:42`.
    package var presence: Set<String>
    /// The user's active devices.
    package var devices: [Device]
    /// Notifications sent to the user lately, in any order: the rate-limit and coalescing history.
    ///
    /// Only the newest `max` (or leading `count`) entries per limit are needed, within the longest window in use.
    package var recentSends: [RecentSend]
    /// Per category, the user's jobs that are due and not yet settled, this batch's included (backlog summaries).
    package var pending: [String: Int]
    /// Summaries already open for the user (not yet sent), with their due time.
    package var openSummaries: [SummaryKey: Date]

    package init(
        userID: String,
        preferences: Preferences = Preferences(),
        presence: Set<String> = [],
        devices: [Device] = [],
        recentSends: [RecentSend] = [],
        pending: [String: Int] = [:],
        openSummaries: [SummaryKey: Date] = [:]
    ) {
        self.userID = userID
        self.preferences = preferences
        self.timeZone =
            (preferences.timeZone.flatMap(Self.zone)
                ?? devices.lazy.compactMap { $0.timeZone.flatMap(Self.zone) }.first)
            ?? .gmt
        self.presence = presence
        self.devices = devices
        self.recentSends = recentSends
        self.pending = pending
        self.openSummaries = openSummaries
    }

    private static let zones = Mutex<[String: TimeZone?]>([:])

    /// `TimeZone(identifier:)`, cached: it reads the zone database, and every batch asks again.
    static func zone(_ identifier: String) -> TimeZone? {
        if let cached = zones.withLock({ $0[identifier] }) { return cached }
        let zone = TimeZone(identifier: identifier)
        zones.withLock { $0[identifier] = zone }
        return zone
    }

    /// Applies a decision to this context, so later jobs of the same batch see it.
    ///
    /// A delivery becomes a recent send; a fold opens (or extends) its summary.
    package mutating func record(_ decision: PolicyDecision, category: String, inputs: PolicyInputs, now: Date) {
        switch decision {
        case .deliver:
            recentSends.append(
                RecentSend(at: now, category: category, scope: inputs.scope, coalesceKey: inputs.coalesceKey)
            )
        case .fold(let fold):
            let key = SummaryKey(category: category, key: fold.key)
            openSummaries[key] = max(openSummaries[key] ?? fold.dueAt, fold.dueAt)
        case .deferred, .suppress, .expire:
            break
        }
    }
}
