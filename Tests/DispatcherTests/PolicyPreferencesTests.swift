import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Policy: preferences")
struct PolicyPreferencesTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var label: String
        var preferences: String
        var category = CategoryPolicy(name: "general")
        var jobMandatory: Bool?
        var expected: PolicyDecision
        var testDescription: String { label }
    }

    static let safety = CategoryPolicy(name: "general", mandatory: true)
    static let marketing = CategoryPolicy(name: "general", optIn: true)
    static let future = Fixture.now + 3_600

    static let cases: [Case] = [
        Case(
            label: "seed 001 rule 1: enabled=false mutes all",
            preferences: #"{"enabled": false}"#,
            expected: .suppress(.disabledByUser)
        ),
        Case(
            label: "seed 001 rule 2: eventToggles[category]=false mutes it",
            preferences: #"{"eventToggles": {"general": false, "other": true}}"#,
            expected: .suppress(.categoryMuted)
        ),
        Case(
            label: "seed 001 rule 2: another category's toggle does not",
            preferences: #"{"eventToggles": {"other": false}}"#,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 002 req 12.4: mutedUntil in the future (ISO-8601)",
            preferences: #"{"mutedUntil": "2026-06-15T13:00:00Z"}"#,
            expected: .suppress(.mutedUntil)
        ),
        Case(
            label: "seed 002 req 12.4: mutedUntil in the future (epoch seconds)",
            preferences: "{\"mutedUntil\": \(Int(future.timeIntervalSince1970))}",
            expected: .suppress(.mutedUntil)
        ),
        Case(
            label: "seed 002 req 12.4: mutedUntil in the past",
            preferences: #"{"mutedUntil": "2026-06-15T11:00:00+00:00"}"#,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 channels: opt-in category without opt-in",
            preferences: "{}",
            category: marketing,
            expected: .suppress(.notOptedIn)
        ),
        Case(
            label: "seed 004 channels: opted in through optIns",
            preferences: #"{"optIns": ["general"]}"#,
            category: marketing,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 channels: opted in through eventToggles",
            preferences: #"{"eventToggles": {"general": true}}"#,
            category: marketing,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 003 req 8.3: mandatory category ignores enabled=false",
            preferences: #"{"enabled": false}"#,
            category: safety,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 003 req 8.4: mandatory category ignores its toggle and mute",
            preferences: #"{"eventToggles": {"general": false}, "mutedUntil": "2026-06-16T00:00:00Z"}"#,
            category: safety,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 003 req 8.2: a job marked mandatory ignores enabled=false",
            preferences: #"{"enabled": false}"#,
            jobMandatory: true,
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 003 req 8.2: mandatory=false on the job changes nothing",
            preferences: #"{"enabled": false}"#,
            jobMandatory: false,
            expected: .suppress(.disabledByUser)
        ),
    ]

    @Test("preference rules", arguments: cases)
    func preferenceRules(_ c: Case) {
        let recipient = Fixture.recipient(Preferences(json: c.preferences))
        let decision = Fixture.decide(
            Fixture.job(mandatory: c.jobMandatory),
            category: c.category,
            recipient: recipient
        )
        #expect(decision == c.expected)
    }

    struct ParseCase: CustomTestStringConvertible, Sendable {
        var json: String
        var expected: Preferences
        var testDescription: String { json }
    }

    static let london = GeoPoint(lat: 51.5074, lon: -0.1278)

    static let parseCases: [ParseCase] = [
        ParseCase(json: "", expected: Preferences()),
        ParseCase(json: "not json", expected: Preferences()),
        ParseCase(json: "[1, 2]", expected: Preferences()),
        ParseCase(json: #"{"enabled": "no", "timeZone": 5, "unknown": {"x": 1}}"#, expected: Preferences()),
        ParseCase(
            json: #"{"eventToggles": {"a": 1, "b": false, "c": true}}"#,
            expected: Preferences(eventToggles: ["b": false, "c": true], optIns: ["c"])
        ),
        ParseCase(json: #"{"optIns": ["marketing", 3]}"#, expected: Preferences(optIns: ["marketing"])),
        // The seed 001 default model: quiet hours present but disabled.
        ParseCase(
            json: #"{"enabled": true, "quietHours": {"enabled": false, "startHour": 22, "endHour": 7}}"#,
            expected: Preferences()
        ),
        ParseCase(
            json: #"{"quietHours": {"enabled": true, "startHour": 22, "endHour": 7}}"#,
            expected: Preferences(quietHours: QuietHours(start: 22 * 60, end: 7 * 60))
        ),
        ParseCase(
            json: #"{"quietHours": {"start": "22:30", "end": "06:45"}}"#,
            expected: Preferences(quietHours: QuietHours(start: 22 * 60 + 30, end: 6 * 60 + 45))
        ),
        ParseCase(
            json: #"{"quietHours": {"start": "13:00:00", "end": "14:00:00"}}"#,
            expected: Preferences(quietHours: QuietHours(start: 13 * 60, end: 14 * 60))
        ),
        ParseCase(json: #"{"quietHours": {"start": "25:00", "end": "07:00"}}"#, expected: Preferences()),
        ParseCase(json: #"{"quietHours": {"startHour": 22.5, "endHour": 7}}"#, expected: Preferences()),
        ParseCase(json: #"{"quietHours": {"start": "07:00", "end": "07:00"}}"#, expected: Preferences()),
        ParseCase(json: #"{"mutedUntil": "tomorrow"}"#, expected: Preferences()),
        ParseCase(
            json: #"{"mutedUntil": "2026-06-15T14:00:00.250+02:00"}"#,
            expected: Preferences(mutedUntil: Fixture.now + 0.25)
        ),
        ParseCase(json: #"{"timeZone": "Europe/London"}"#, expected: Preferences(timeZone: "Europe/London")),
        ParseCase(
            json: #"{"location": {"lat": 51.5074, "lon": -0.1278, "radiusKm": 5}}"#,
            expected: Preferences(location: .init(center: london, radiusKm: 5))
        ),
        ParseCase(
            json: #"{"location": {"lat": 51.5074, "lon": -0.1278}}"#,
            expected: Preferences(location: .init(center: london, radiusKm: 10))
        ),
        ParseCase(
            json: #"{"location": {"lat": 51.5074, "lon": -0.1278, "radiusKm": 500}}"#,
            expected: Preferences(location: .init(center: london, radiusKm: 100))
        ),
        ParseCase(
            json: #"{"location": {"lat": 51.5074, "lon": -0.1278, "radiusKm": 0.2}}"#,
            expected: Preferences(location: .init(center: london, radiusKm: 1))
        ),
        ParseCase(json: #"{"location": {"lat": 91, "lon": 0, "radiusKm": 5}}"#, expected: Preferences()),
        ParseCase(json: #"{"location": {"lat": "51.5", "lon": 0}}"#, expected: Preferences()),
    ]

    @Test("seed 001 preference model: the parser falls back to defaults", arguments: parseCases)
    func parsing(_ c: ParseCase) {
        #expect(Preferences(json: c.json) == c.expected)
    }

    @Test(
        "quiet-hours zone: preference, else a device's zone, else UTC",
        arguments: [
            (#"{"timeZone": "America/New_York"}"#, "Europe/London", "America/New_York"),
            (#"{"timeZone": "Mars/Olympus_Mons"}"#, "Europe/London", "Europe/London"),
            ("{}", "Europe/London", "Europe/London"),
            ("{}", "Not/AZone", "GMT"),
        ]
    )
    func zoneResolution(preferences: String, deviceZone: String, expected: String) {
        let device = Device(id: 9, userID: "u1", provider: .fcm, token: "t", timeZone: deviceZone)
        let context = RecipientContext(userID: "u1", preferences: Preferences(json: preferences), devices: [device])
        #expect(context.timeZone.identifier == expected)
    }
}
