import Foundation
import HeraldCore
import Testing

@testable import Providers

/// Each adapter owns how a Herald priority reads in its provider's terms; this is the one table
/// that pins them all (seed 000 req 6, seed 002 req 13, seed 003 req 11).
@Suite struct PriorityMappingTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var priority: Priority
        var silent: Bool
        /// `apns-priority` (also in FCM's APNs override).
        var apns: Int
        /// FCM `android.priority`.
        var fcm: String
        /// Expo `priority`.
        var expo: String
        /// Web Push `Urgency` (also in FCM's Web Push override).
        var web: String
        var testDescription: String { "\(priority.name)\(silent ? " silent" : "")" }
    }

    @Test(arguments: [
        Row(priority: .critical, silent: false, apns: 10, fcm: "HIGH", expo: "high", web: "high"),
        Row(priority: .high, silent: false, apns: 10, fcm: "HIGH", expo: "high", web: "high"),
        Row(priority: .normal, silent: false, apns: 5, fcm: "NORMAL", expo: "default", web: "normal"),
        Row(priority: .low, silent: false, apns: 5, fcm: "NORMAL", expo: "normal", web: "low"),
        Row(priority: .critical, silent: true, apns: 5, fcm: "NORMAL", expo: "normal", web: "low"),
        Row(priority: .normal, silent: true, apns: 5, fcm: "NORMAL", expo: "normal", web: "low"),
        Row(priority: .low, silent: true, apns: 5, fcm: "NORMAL", expo: "normal", web: "low"),
    ])
    func priorityPerProvider(_ row: Row) {
        #expect(APNsRequest.priority(row.priority, silent: row.silent) == row.apns)
        #expect(FCMMessageEncoder.androidPriority(row.priority, silent: row.silent) == row.fcm)
        #expect(ExpoMessageEncoder.priority(row.priority, silent: row.silent) == row.expo)
        #expect(WebPushProvider.urgency(row.priority, silent: row.silent) == row.web)
    }
}
