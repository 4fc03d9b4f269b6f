import Providers

/// How a priority reads in each provider's own terms (DESIGN "Priority maps to each provider").
package struct ProviderUrgency: Sendable, Hashable {
    /// APNs `interruption-level`: passive, active, time-sensitive, critical; nil for a silent push.
    package var apnsInterruptionLevel: String?
    /// APNs `apns-priority`: 10 sends at once, 5 lets the device batch (low priority and background pushes).
    package var apnsPriority: Int
    /// FCM `android.priority`: `high` wakes the device, `normal` may wait for Doze.
    package var fcmAndroidPriority: String
    /// Expo `priority`: `high`, `default` (Android normal, iOS 10) or `normal` (iOS 5).
    package var expoPriority: String
    /// Web Push `Urgency` (RFC 8030): very-low, low, normal, high.
    package var webPushUrgency: String

    /// Maps `priority`; a `silent` (background, data-only) message never asks for more than low urgency.
    package init(_ priority: Priority, silent: Bool = false) {
        switch priority {
        case .critical, .high:
            (fcmAndroidPriority, expoPriority, webPushUrgency) = ("high", "high", "high")
        case .normal:
            (fcmAndroidPriority, expoPriority, webPushUrgency) = ("normal", "default", "normal")
        case .low:
            (fcmAndroidPriority, expoPriority, webPushUrgency) = ("normal", "normal", "very-low")
        }
        apnsInterruptionLevel =
            switch priority {
            case .critical: "critical"
            case .high: "time-sensitive"
            case .normal: "active"
            case .low: "passive"
            }
        apnsPriority = priority == .low ? 5 : 10
        if silent {
            apnsInterruptionLevel = nil
            apnsPriority = 5
            fcmAndroidPriority = "normal"
            expoPriority = "normal"
            if priority != .low { webPushUrgency = "low" }
        }
    }
}
