import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import ProviderSimulator
import Providers
import Queue
import Testing

/// What each device receives, checked against what the simulator recorded (platform rules from
/// each provider's documentation, not from the simulator).
@Suite("Platform fidelity: collapsing, Expo fields, Expo receipts at staging settings")
struct PlatformFidelityTests {
    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    @Test("FCM: a collapse_key only when the job asks for collapsing; tag always, for on-screen replacement")
    func fcmCollapseKeyOnlyWhenAsked() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("departure", priority: "high")
                try await db.registerDevice("rider", "fcm", "fcm-rider")
                try await db.registerDevice("commuter", "fcm", "fcm-commuter")
                let plain = try #require(
                    try await db.outbox().enqueue(
                        user: "rider",
                        category: "departure",
                        payloadJSON: #"{"title":"Bus 42","body":"Leaves in 5 min"}"#
                    )
                )
                _ = try await db.outbox().enqueue(
                    user: "commuter",
                    category: "departure",
                    payloadJSON: #"{"title":"Bus 42","body":"Delayed"}"#,
                    optionsJSON: #"{"collapseId":"journey-81"}"#
                )
                try await ProviderEndToEndTests.deliver(db, live)
                let byToken = Dictionary(live.records.records(provider: "fcm").map { ($0.token, $0.payload) }) { a, _ in
                    a
                }
                func android(_ token: String) throws -> [String: Any] {
                    let body = Self.json(try #require(byToken[token]))
                    let message = (body["message"] as? [String: Any]) ?? body
                    return try #require(message["android"] as? [String: Any])
                }
                let rider = try android("fcm-rider")
                #expect(rider["collapse_key"] == nil, "a job that did not ask for collapsing got a collapse_key")
                #expect((rider["notification"] as? [String: Any])?["tag"] as? String == "herald-\(plain)")
                let commuter = try android("fcm-commuter")
                #expect(commuter["collapse_key"] as? String == "journey-81")
                #expect((commuter["notification"] as? [String: Any])?["tag"] as? String == "journey-81")
            }
        }
    }

    @Test(
        "Expo: every documented field the job or category provides (interruption level, thread, tag, collapseId when asked)"
    )
    func expoCarriesEveryField() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory(
                    "ble_session",
                    priority: "high",
                    sound: "default",
                    apnsCategory: "CHECK_IN",
                    androidChannel: "sessions"
                )
                let first = "ExponentPushToken[fidelity-1]"
                let second = "ExponentPushToken[fidelity-2]"
                try await db.registerDevice("member", "expo", first)
                try await db.registerDevice("member-2", "expo", second)
                let id = try #require(
                    try await db.outbox().enqueue(
                        user: "member",
                        category: "ble_session",
                        payloadJSON: #"{"title":"Session open","body":"Open now to check in","threadId":"sessions"}"#
                    )
                )
                _ = try await db.outbox().enqueue(
                    user: "member-2",
                    category: "ble_session",
                    payloadJSON: #"{"title":"Session open","body":"Check in"}"#,
                    optionsJSON: #"{"collapseId":"session-9"}"#
                )
                try await ProviderEndToEndTests.deliver(db, live)
                let byToken = Dictionary(
                    live.records.records(provider: "expo").map { ($0.token, Self.json($0.payload)) }
                ) { a, _ in a }
                let m = try #require(byToken[first])
                #expect(m["interruptionLevel"] as? String == "time-sensitive")
                #expect(m["threadId"] as? String == "sessions")
                #expect(m["categoryId"] as? String == "CHECK_IN")
                #expect(m["channelId"] as? String == "sessions")
                #expect(m["sound"] as? String == "default")
                #expect(m["tag"] as? String == "herald-\(id)")
                #expect(m["collapseId"] == nil)
                let asked = try #require(byToken[second])
                #expect(asked["collapseId"] as? String == "session-9")
                #expect(asked["tag"] as? String == "session-9")
            }
        }
    }

    @Test(
        "seed 002: Expo receipt delay and poll are settings; at staging values a DeviceNotRegistered receipt disables the device in seconds"
    )
    func expoReceiptsAtStagingSettings() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("announcement")
                let token = "ExponentPushToken[staging-phone]"
                try await db.registerDevice("volunteer", "expo", token)
                var env = FaultHonestyTests.workerEnvironment(db, live)
                env["HERALD_EXPO_RECEIPT_DELAY_SECONDS"] = "1"
                env["HERALD_EXPO_RECEIPT_POLL_SECONDS"] = "1"
                env["HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS"] = "1"
                let (status, shown) = try await HeraldBinary.run(["check-config", "--json"], environment: env)
                #expect(status == 0)
                let settings = Self.json(shown)
                #expect(settings["expo.receipt_delay_seconds"] as? String == "1")
                #expect(settings["expo.receipt_poll_seconds"] as? String == "1")

                let worker = WorkerProcess(
                    name: "expo-receipts",
                    environment: env,
                    directory: ChaosTests.logDirectory()
                )
                try worker.start()
                _ = try await db.outbox().enqueue(
                    user: "volunteer",
                    category: "announcement",
                    payloadJSON: #"{"title":"Rota","body":"New shifts posted"}"#
                )
                let sent = try await waitUntil(.seconds(30)) { live.records.acceptedCount(provider: "expo") == 1 }
                // The phone was uninstalled after the ticket: Expo's receipt says so.
                _ = try live.simulator.faults.add(
                    FaultRule(provider: "expo", status: 200, reason: "DeviceNotRegistered")
                )
                // 1 s delay and poll; the budget is for a machine running every other suite at once.
                let disabled = try await waitUntil(.seconds(40)) {
                    try await db.scalar("SELECT disabled_reason FROM herald.devices WHERE token = '\(token)'") != nil
                }
                await worker.stop()
                #expect(sent)
                #expect(disabled, "the receipt's DeviceNotRegistered did not disable the device within 40 s")
            }
        }
    }

    @Test("seed 001: metadata arrives as an object on APNs, Web Push and Expo, one string entry per key in FCM data")
    func metadataIsAnObject() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("match_update")
                for kind in ["apns", "fcm", "expo", "webpush"] {
                    _ = try await ProviderFleet.register(kind, count: 1, db: db, live: live)
                }
                let users = ["apns-0", "fcm-0", "expo-0", "webpush-0"]
                _ = try await db.outbox().enqueueMany(
                    users: users,
                    category: "match_update",
                    payloadJSON:
                        #"{"title":"Match moved","body":"Now 15:30","route":"/m/81","metadata":{"matchId":"m-81","team":"U12"}}"#
                )
                try await ProviderEndToEndTests.deliver(db, live)
                let expected = ["matchId": "m-81", "team": "U12"]
                let apns = Self.json(try #require(live.records.records(provider: "apns").first).payload)
                #expect(apns["metadata"] as? [String: String] == expected)
                #expect(apns["route"] as? String == "/m/81")
                let web = Self.json(try #require(live.records.records(provider: "webpush").first).payload)
                #expect((web["data"] as? [String: Any])?["metadata"] as? [String: String] == expected)
                let expo = Self.json(try #require(live.records.records(provider: "expo").first).payload)
                #expect((expo["data"] as? [String: Any])?["metadata"] as? [String: String] == expected)
                let fcmBody = Self.json(try #require(live.records.records(provider: "fcm").first).payload)
                let fcm = (fcmBody["message"] as? [String: Any]) ?? fcmBody
                let data = try #require(fcm["data"] as? [String: String])
                #expect(data["matchId"] == "m-81" && data["team"] == "U12" && data["metadata"] == nil)
                #expect(data["route"] == "/m/81" && data["eventType"] == "match_update")
            }
        }
    }
}
