import Foundation
import HeraldCore

/// What happens to one job for its recipient.
package enum PolicyDecision: Sendable, Hashable {
    /// Send now to these devices.
    case deliver(Delivery)
    /// Hold the job until `until`, then decide again.
    case deferred(until: Date, reason: DeferReason)
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
