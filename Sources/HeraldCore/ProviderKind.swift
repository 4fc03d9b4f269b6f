/// The push channels a device can be registered on (`herald.devices.provider`).
package enum ProviderKind: String, Sendable, Hashable, CaseIterable, Codable {
    case apns, fcm, expo, webpush, local
}

/// Notification urgency, from the category or the job's `priority` option.
package enum Priority: Int, Sendable, Hashable, Comparable, CaseIterable {
    case critical = 0
    case high = 1
    case normal = 2
    case low = 3

    package init?(name: String) {
        switch name {
        case "critical": self = .critical
        case "high": self = .high
        case "normal": self = .normal
        case "low": self = .low
        default: return nil
        }
    }

    package var name: String {
        switch self {
        case .critical: "critical"
        case .high: "high"
        case .normal: "normal"
        case .low: "low"
        }
    }

    package static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}
