import Dispatcher
import Providers
import Testing

@Suite("Policy: rendering helpers")
struct PolicyRenderingTests {
    static let family = "👨‍👩‍👧‍👦"
    static let accented = "e\u{301}"

    @Test(
        "seed 000 req 2.2: previews keep the first 100 characters, cut on a grapheme boundary",
        arguments: [
            (String(repeating: "a", count: 100), String(repeating: "a", count: 100)),
            (String(repeating: "a", count: 101), String(repeating: "a", count: 100) + "…"),
            (String(repeating: family, count: 150), String(repeating: family, count: 100) + "…"),
            (String(repeating: accented, count: 120), String(repeating: accented, count: 100) + "…"),
            (String(repeating: "a", count: 99) + " b" + "c", String(repeating: "a", count: 99) + "…"),
            ("", ""),
        ])
    func preview(body: String, expected: String) {
        #expect(previewBody(body) == expected)
    }

    @Test(
        "previews honour a custom limit",
        arguments: [("Hello world", 5, "Hello…"), ("Hi", 5, "Hi"), ("Hello", 0, "…")])
    func previewLimit(body: String, limit: Int, expected: String) {
        #expect(previewBody(body, limit: limit) == expected)
    }

    struct UrgencyCase: CustomTestStringConvertible, Sendable {
        var priority: Priority
        var silent: Bool
        var apns: (level: String?, priority: Int)
        var fcm: String
        var expo: String
        var web: String
        var testDescription: String { "\(priority.name)\(silent ? " silent" : "")" }
    }

    @Test(
        "seed 000 req 6.2-6.4, seed 002 req 13, seed 003 req 11: priority per provider",
        arguments: [
            UrgencyCase(
                priority: .critical, silent: false, apns: ("critical", 10), fcm: "high", expo: "high", web: "high"),
            UrgencyCase(
                priority: .high, silent: false, apns: ("time-sensitive", 10), fcm: "high", expo: "high", web: "high"),
            UrgencyCase(
                priority: .normal, silent: false, apns: ("active", 10), fcm: "normal", expo: "default", web: "normal"),
            UrgencyCase(
                priority: .low, silent: false, apns: ("passive", 5), fcm: "normal", expo: "normal", web: "very-low"),
            UrgencyCase(priority: .normal, silent: true, apns: (nil, 5), fcm: "normal", expo: "normal", web: "low"),
            UrgencyCase(priority: .high, silent: true, apns: (nil, 5), fcm: "normal", expo: "normal", web: "low"),
            UrgencyCase(priority: .low, silent: true, apns: (nil, 5), fcm: "normal", expo: "normal", web: "very-low"),
        ])
    func urgency(_ c: UrgencyCase) {
        let urgency = ProviderUrgency(c.priority, silent: c.silent)
        #expect(urgency.apnsInterruptionLevel == c.apns.level)
        #expect(urgency.apnsPriority == c.apns.priority)
        #expect(urgency.fcmAndroidPriority == c.fcm)
        #expect(urgency.expoPriority == c.expo)
        #expect(urgency.webPushUrgency == c.web)
    }
}
