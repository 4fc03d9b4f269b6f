import Dispatcher
import Foundation
import HeraldCore
import Testing

@Suite("Policy: geo, devices, presence, schedule and expiry")
struct PolicyTargetingTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var label: String
        var job = Fixture.job()
        var inputs = PolicyInputs()
        var preferences = Preferences()
        var presence: Set<String> = []
        var devices = [Fixture.phone]
        var expected: PolicyDecision
        var testDescription: String { label }
    }

    static let london = GeoPoint(lat: 51.5074, lon: -0.1278)
    /// About 2.0 km due north of `london` (0.018° of latitude).
    static let twoKmNorth = GeoPoint(lat: 51.5254, lon: -0.1278)
    /// About 10 km due north.
    static let tenKmNorth = GeoPoint(lat: 51.5974, lon: -0.1278)
    static func near(_ radiusKm: Double) -> Preferences {
        Preferences(location: .init(center: london, radiusKm: radiusKm))
    }
    static let bluetooth = PolicyInputs(requires: ["bluetooth": .bool(true)])

    static let cases: [Case] = [
        Case(
            label: "seed 000 req 1.4: outside the user's radius is suppressed",
            inputs: PolicyInputs(geo: tenKmNorth),
            preferences: near(5),
            expected: .suppress(.outOfRadius)
        ),
        Case(
            label: "seed 000 req 1.4: a 500 km radius is clamped to 100 km",
            inputs: PolicyInputs(geo: GeoPoint(lat: 53, lon: -0.1278)),
            preferences: near(500),
            expected: .suppress(.outOfRadius)
        ),
        Case(
            label: "seed 000 req 1.4: without a location preference geo jobs are not filtered",
            inputs: PolicyInputs(geo: tenKmNorth),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 000 req 1.4: a job without geo reaches a user with a location",
            preferences: near(5),
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 002 req 4.5: only Bluetooth-capable devices get BLE sessions",
            inputs: bluetooth,
            devices: [Fixture.phone, Fixture.bluetoothPhone],
            expected: .deliver(Delivery(devices: [Fixture.bluetoothPhone]))
        ),
        Case(
            label: "seed 002 req 4.5: no Bluetooth-capable device",
            inputs: bluetooth,
            expected: .suppress(.noCapableDevice)
        ),
        Case(
            label: "seed 002 req 4.5: attributes compare by type (1 is not true)",
            inputs: bluetooth,
            devices: [Device(id: 3, userID: "u1", provider: .fcm, token: "t", attributesJSON: #"{"bluetooth": 1}"#)],
            expected: .suppress(.noCapableDevice)
        ),
        Case(
            label: "seed 002 req 4.5: malformed device attributes never match",
            inputs: bluetooth,
            devices: [Device(id: 4, userID: "u1", provider: .fcm, token: "t", attributesJSON: "{bluetooth")],
            expected: .suppress(.noCapableDevice)
        ),
        Case(
            label:
                "a user without an active device is suppressed (holding for an offline device is the provider's store-and-forward)",
            devices: [],
            expected: .suppress(.noActiveDevice)
        ),
        Case(
            label: "seed 000 req 2.5: the open conversation suppresses its messages",
            job: Fixture.job(context: "conversation:42"),
            presence: ["conversation:42"],
            expected: .suppress(.presence)
        ),
        Case(
            label: "seed 000 req 2.5: another conversation still notifies",
            job: Fixture.job(context: "conversation:7"),
            presence: ["conversation:42"],
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 000 req 2.5: a job without context ignores presence",
            presence: ["conversation:42"],
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 003 req 4.3: a critical alert is sent even while its screen is open",
            job: Fixture.job(priority: .critical, context: "alerts"),
            presence: ["alerts"],
            expected: Fixture.deliverToPhone
        ),
        Case(
            label: "seed 004 departure: a departure alert after departure expires",
            job: Fixture.job(expiresAt: Fixture.now - 1),
            expected: .expire
        ),
        Case(
            label: "seed 004 departure: expiresAt == now expires",
            job: Fixture.job(expiresAt: Fixture.now),
            expected: .expire
        ),
        Case(
            label: "expiry is decided before preferences",
            job: Fixture.job(expiresAt: Fixture.now),
            preferences: Preferences(enabled: false),
            expected: .expire
        ),
        Case(
            label: "seed 004 scheduled departures: deliverAt in the future holds the job",
            inputs: PolicyInputs(deliverAt: Fixture.now + 900),
            expected: .deferred(until: Fixture.now + 900, reason: .scheduled)
        ),
        Case(
            label: "seed 004 scheduled departures: deliverAt reached sends",
            inputs: PolicyInputs(deliverAt: Fixture.now),
            expected: Fixture.deliverToPhone
        ),
    ]

    @Test("targeting rules", arguments: cases)
    func rules(_ c: Case) {
        let recipient = Fixture.recipient(c.preferences, presence: c.presence, devices: c.devices)
        #expect(Fixture.decide(c.job, inputs: c.inputs, recipient: recipient) == c.expected)
    }

    @Test("seed 000 req 1.1/1.2: inside the radius, the delivery carries the distance")
    func distance() throws {
        let decision = Fixture.decide(
            inputs: PolicyInputs(geo: Self.twoKmNorth),
            recipient: Fixture.recipient(Self.near(5))
        )
        guard case .deliver(let delivery) = decision else {
            Issue.record("expected a delivery, got \(decision)")
            return
        }
        let km = try #require(delivery.distanceKm)
        #expect(abs(km - 2.0) < 0.01)
        #expect(delivery.extras == ["distanceKm": "2.0"])
    }

    @Test(
        "haversine distances",
        arguments: [
            (london, GeoPoint(lat: 48.8566, lon: 2.3522), 343.5),  // London – Paris
            (GeoPoint(lat: 0, lon: 179.5), GeoPoint(lat: 0, lon: -179.5), 111.2),  // across the antimeridian
            (london, london, 0),
        ] as [(GeoPoint, GeoPoint, Double)]
    )
    func haversine(from: GeoPoint, to: GeoPoint, km: Double) {
        #expect(abs(from.distanceKm(to: to) - km) < 0.5)
    }
}
