import HeraldCore

/// What happens to one job for its recipient.
package enum PolicyDecision: Sendable, Hashable {
    /// Send now to these devices.
    case deliver(Delivery)
    /// Hold the job until `until` (seconds since 1970), then decide again.
    case deferred(until: Double, reason: DeferReason)
    /// Do not send it alone: it joins the recipient's summary for `fold.key`.
    case fold(Fold)
    /// Do not send it; the reason goes to `herald.delivery_log`.
    case suppress(SuppressionReason)
    /// Its `expiresAt` passed (reason `expired_before_delivery`).
    case expire

    /// The stable reason string for `herald.delivery_log` and metric labels; nil for a delivery.
    package var reason: String? {
        switch self {
        case .deliver: nil
        case .deferred(_, let reason): reason.rawValue
        case .fold(let fold): fold.reason.rawValue
        case .suppress(let reason): reason.rawValue
        case .expire: "expired_before_delivery"
        }
    }
}

/// A decision to send now.
package struct Delivery: Sendable, Hashable {
    /// The recipient's devices that qualify (capabilities matched), in the context's order.
    package var devices: [Device]
    /// Kilometres from the user's location to the job's `geo`, when both are known.
    package var distanceKm: Double?

    package init(devices: [Device], distanceKm: Double? = nil) {
        self.devices = devices
        self.distanceKm = distanceKm
    }

    /// Values for the rendered data payload and `{placeholders}`: `distanceKm` with one decimal, when known.
    package var extras: [String: String] {
        guard let distanceKm else { return [:] }
        return ["distanceKm": String((distanceKm * 10).rounded() / 10)]
    }
}

/// Why a job was held. Stable raw values (delivery log, metric labels).
package enum DeferReason: String, Sendable, Hashable, CaseIterable {
    case quietHours = "quiet_hours"
    case scheduled
}


/// Why a job was not sent. A closed list with stable raw values (delivery log, metric labels).
package enum SuppressionReason: String, Sendable, Hashable, CaseIterable {
    /// Preferences `enabled = false`.
    case disabledByUser = "disabled_by_user"
    /// `eventToggles[category] = false`.
    case categoryMuted = "category_muted"
    /// `mutedUntil` is in the future.
    case mutedUntil = "muted_until"
    /// An opt-in category the user has not opted into.
    case notOptedIn = "not_opted_in"
    /// The job's `context` is live in the user's presence.
    case presence
    /// The job's `geo` lies outside the user's location radius.
    case outOfRadius = "out_of_radius"
    /// The user has no active device.
    case noActiveDevice = "no_active_device"
    /// No device has the attributes the job `requires`.
    case noCapableDevice = "no_capable_device"
    /// Quiet hours with the category's `drop` policy.
    case quietHoursDrop = "quiet_hours_drop"
    /// Over the per-user rate limit with `over: suppress`.
    case rateLimited = "rate_limited"
    /// Over the per-scope quota with `over: suppress`.
    case scopeQuota = "scope_quota"
}
