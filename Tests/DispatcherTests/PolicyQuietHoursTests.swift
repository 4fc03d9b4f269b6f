import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Policy: quiet hours")
struct PolicyQuietHoursTests {
    struct WindowCase: CustomTestStringConvertible, Sendable {
        var label: String
        var zone: String
        var window: (start: Int, end: Int)
        var now: Date
        /// The window's end, or nil when `now` is outside it.
        var expected: Date?
        var testDescription: String { label }
    }

    static func hm(_ hour: Int, _ minute: Int = 0) -> Int { hour * 60 + minute }

    static let windows: [WindowCase] = [
        WindowCase(
            label: "crosses midnight, before midnight (London summer)",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 6, 15, 21, 30),
            expected: Fixture.utc(2026, 6, 16, 6)
        ),
        WindowCase(
            label: "crosses midnight, after midnight",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 6, 15, 5, 30),
            expected: Fixture.utc(2026, 6, 15, 6)
        ),
        WindowCase(
            label: "crosses midnight, starts at exactly 22:00 local",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 6, 15, 21),
            expected: Fixture.utc(2026, 6, 16, 6)
        ),
        WindowCase(
            label: "crosses midnight, 07:00 local is outside",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 6, 15, 6),
            expected: nil
        ),
        WindowCase(
            label: "crosses midnight, midday is outside",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.now,
            expected: nil
        ),
        WindowCase(
            label: "DST London spring forward (29 Mar 2026): a 7-hour night",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 3, 28, 23),
            expected: Fixture.utc(2026, 3, 29, 6)
        ),
        WindowCase(
            label: "DST London fall back (25 Oct 2026): a 9-hour night",
            zone: "Europe/London",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 10, 24, 22),
            expected: Fixture.utc(2026, 10, 25, 7)
        ),
        WindowCase(
            label: "DST London: the end 01:30 does not exist, ends when clocks jump",
            zone: "Europe/London",
            window: (hm(0, 30), hm(1, 30)),
            now: Fixture.utc(2026, 3, 29, 0, 45),
            expected: Fixture.utc(2026, 3, 29, 1)
        ),
        WindowCase(
            label: "DST London: the end 01:30 happens twice, first pass",
            zone: "Europe/London",
            window: (hm(0), hm(1, 30)),
            now: Fixture.utc(2026, 10, 24, 23, 15),
            expected: Fixture.utc(2026, 10, 25, 0, 30)
        ),
        WindowCase(
            label: "DST London: the end 01:30 happens twice, second pass",
            zone: "Europe/London",
            window: (hm(0), hm(1, 30)),
            now: Fixture.utc(2026, 10, 25, 1, 10),
            expected: Fixture.utc(2026, 10, 25, 1, 30)
        ),
        WindowCase(
            label: "DST New York spring forward (8 Mar 2026)",
            zone: "America/New_York",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 3, 8, 4),
            expected: Fixture.utc(2026, 3, 8, 11)
        ),
        WindowCase(
            label: "DST New York fall back (1 Nov 2026)",
            zone: "America/New_York",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 11, 1, 3),
            expected: Fixture.utc(2026, 11, 1, 12)
        ),
        WindowCase(
            label: "same day window 13:00-14:00, inside (Stockholm, CEST)",
            zone: "Europe/Stockholm",
            window: (hm(13), hm(14)),
            now: Fixture.utc(2026, 6, 15, 11, 30),
            expected: Fixture.utc(2026, 6, 15, 12)
        ),
        WindowCase(
            label: "same day window 13:00-14:00, 14:00 is outside",
            zone: "Europe/Stockholm",
            window: (hm(13), hm(14)),
            now: Fixture.utc(2026, 6, 15, 12),
            expected: nil
        ),
        WindowCase(
            label: "same day window 13:00-14:00, 12:59 is outside",
            zone: "Europe/Stockholm",
            window: (hm(13), hm(14)),
            now: Fixture.utc(2026, 6, 15, 10, 59),
            expected: nil
        ),
        WindowCase(
            label: "half-hour offset zone (Kolkata, +05:30)",
            zone: "Asia/Kolkata",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 6, 15, 17),
            expected: Fixture.utc(2026, 6, 16, 1, 30)
        ),
        WindowCase(
            label: "UTC",
            zone: "UTC",
            window: (hm(22), hm(7)),
            now: Fixture.utc(2026, 1, 1, 23, 59),
            expected: Fixture.utc(2026, 1, 2, 7)
        ),
    ]

    @Test("seed 004 quiet hours 22:00-07:00: window end in the user's zone", arguments: windows)
    func windowEnd(_ c: WindowCase) throws {
        let quiet = try #require(QuietHours(start: c.window.start, end: c.window.end))
        let zone = try #require(TimeZone(identifier: c.zone))
        #expect(quiet.windowEnd(containing: c.now, in: zone) == c.expected)
    }

    struct PolicyCase: CustomTestStringConvertible, Sendable {
        var label: String
        var preferences =
            #"{"timeZone": "Europe/London", "quietHours": {"enabled": true, "start": "22:00", "end": "07:00"}}"#
        var policy: CategoryPolicy.QuietHoursPolicy
        var priority = Priority.normal
        var mandatory = false
        var expected: PolicyDecision
        var testDescription: String { label }
    }

    /// 23:30 BST, inside 22:00-07:00 London; the window ends at 07:00 BST = 06:00 UTC.
    static let night = Fixture.utc(2026, 6, 15, 22, 30)
    static let morning = Fixture.utc(2026, 6, 16, 6)

    static let policies: [PolicyCase] = [
        PolicyCase(
            label: "seed 000 req 4.5 / seed 004: defer non-urgent to the window's end",
            policy: .defer,
            expected: .deferred(until: morning, reason: .quietHours)
        ),
        PolicyCase(
            label: "seed 001 rule 3: startHour/endHour form defers the same",
            preferences:
                #"{"timeZone": "Europe/London", "quietHours": {"enabled": true, "startHour": 22, "endHour": 7}}"#,
            policy: .defer,
            expected: .deferred(until: morning, reason: .quietHours)
        ),
        PolicyCase(
            label: "seed 001 rule 3 (web): drop during the window",
            policy: .drop,
            expected: .suppress(.quietHoursDrop)
        ),
        PolicyCase(
            label: "a quiet_hours=bypass category sends during quiet hours",
            policy: .bypass,
            priority: .high,
            expected: Fixture.deliverToPhone
        ),
        PolicyCase(
            label: "seed 004: critical delay notifications still send",
            policy: .defer,
            priority: .critical,
            expected: Fixture.deliverToPhone
        ),
        PolicyCase(
            label: "seed 003 req 11.5: critical bypasses even a drop category",
            policy: .drop,
            priority: .critical,
            expected: Fixture.deliverToPhone
        ),
        PolicyCase(
            label: "seed 003 req 8.3–8.4, 11.5: a mandatory (SEP) category ignores quiet hours",
            policy: .defer,
            mandatory: true,
            expected: Fixture.deliverToPhone
        ),
        PolicyCase(
            label: "high priority follows the category's policy",
            policy: .defer,
            priority: .high,
            expected: .deferred(until: morning, reason: .quietHours)
        ),
        PolicyCase(
            label: "quiet hours disabled: delivered",
            preferences:
                #"{"timeZone": "Europe/London", "quietHours": {"enabled": false, "start": "22:00", "end": "07:00"}}"#,
            policy: .defer,
            expected: Fixture.deliverToPhone
        ),
        PolicyCase(
            label: "the same instant is daytime in New York",
            preferences:
                #"{"timeZone": "America/New_York", "quietHours": {"start": "22:00", "end": "07:00"}}"#,
            policy: .defer,
            expected: Fixture.deliverToPhone
        ),
    ]

    @Test("quiet-hours policy per category and priority", arguments: policies)
    func policy(_ c: PolicyCase) {
        let category = CategoryPolicy(name: "general", mandatory: c.mandatory, quietHours: c.policy)
        let decision = Fixture.decide(
            Fixture.job(priority: c.priority),
            category: category,
            recipient: Fixture.recipient(Preferences(json: c.preferences)),
            now: Self.night
        )
        #expect(decision == c.expected)
    }
}
