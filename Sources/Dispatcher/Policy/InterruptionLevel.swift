import Foundation
import HeraldCore

/// The APNs `interruption-level` a priority implies when the category does not set one (seed 000:
/// high → time-sensitive, medium → active, low → passive; seed 003: critical), nil for a silent
/// push. The provider-level priorities (`apns-priority`, FCM Android priority, Expo `priority`,
/// Web Push `Urgency`) belong to each adapter: `APNsRequest.priority`,
/// `FCMMessageEncoder.androidPriority`, `ExpoMessageEncoder.priority`, `WebPushProvider.urgency`.
package enum InterruptionLevel {
    package static func `default`(for priority: Priority, silent: Bool) -> String? {
        guard !silent else { return nil }
        switch priority {
        case .critical: return "critical"
        case .high: return "time-sensitive"
        case .normal: return "active"
        case .low: return "passive"
        }
    }
}
