import AsyncHTTPClient
import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import HeraldTestSupport
import ProviderSimulator
import Providers
import Queue
import Testing

/// One end-to-end run per app shape of the seeds: outbox → policy → live adapter → provider
/// simulator over loopback TLS (HTTP/2 where the provider speaks it) → acknowledgement.
@Suite("End to end through the provider simulator, one per seed app shape")
struct ProviderEndToEndTests {
    static func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    static func deliver(_ db: TestDatabase, _ live: LiveSimulator, clock: any WallClock = SystemClock()) async throws {
        let (registry, client) = try live.registry(pool: db.pool)
        let consumer = db.consumer(providers: registry, clock: clock)
        while try await consumer.runOnce() > 0 {}
        await client.shutdown()
    }

    @Test("Foodshare (seed 000) on APNs: a new-listing alert with its data payload, every header set")
    func foodshareOnAPNs() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory(
                    "new_listing",
                    priority: "high",
                    sound: "default",
                    apnsCategory: "LISTING",
                    defaultRoute: "/listings"
                )
                let token = LiveSimulator.apnsToken(0xF00D)
                try await db.registerDevice("sharer", "apns", token)
                let id = try #require(
                    try await db.outbox().enqueue(
                        user: "sharer",
                        category: "new_listing",
                        payloadJSON:
                            #"{"title":"Fresh bread nearby","body":"4 loaves at the corner bakery","route":"/listings/42","metadata":{"listingId":"42"}}"#,
                        optionsJSON: #"{"collapseId":"listing-42"}"#
                    )
                )
                try await Self.deliver(db, live)
                let record = try #require(live.records.records(provider: "apns").first)
                #expect(record.token == token)
                #expect(record.headers["apns-push-type"] == "alert")
                #expect(record.headers["apns-priority"] == "10")
                #expect(record.headers["apns-topic"] == live.manifest.apns.topic)
                #expect(record.headers["apns-collapse-id"] == "listing-42")
                #expect(record.headers["apns-expiration"].flatMap { Int($0) } ?? 0 > Int(Date().timeIntervalSince1970))
                let payload = Self.json(record.payload)
                let aps = try #require(payload["aps"] as? [String: Any])
                let alert = try #require(aps["alert"] as? [String: Any])
                #expect(alert["title"] as? String == "Fresh bread nearby")
                #expect(alert["body"] as? String == "4 loaves at the corner bakery")
                #expect(aps["category"] as? String == "LISTING")
                #expect(aps["sound"] as? String == "default")
                #expect(aps["badge"] as? Int == 1)
                #expect(payload["route"] as? String == "/listings/42")
                #expect(payload["eventType"] as? String == "new_listing")
                #expect(
                    try await db.rows("SELECT outcome, status FROM herald.delivery_log WHERE job_id = \(id)")
                        == [["accepted", "done"]]
                )
            }
        }
    }

    @Test("the NHS app (seed 002) on Expo: delivered; a token Expo reports DeviceNotRegistered is disabled")
    func nhsOnExpo() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("shift_reminder", priority: "high", androidChannel: "shifts")
                let good = "ExponentPushToken[nhs-volunteer-phone]"
                let gone = "ExponentPushToken[nhs-old-phone]"
                try await db.registerDevice("volunteer", "expo", good)
                try await db.registerDevice("volunteer-old", "expo", gone)
                _ = try live.simulator.faults.add(
                    FaultRule(provider: "expo", token: gone, status: 200, reason: "DeviceNotRegistered")
                )
                _ = try await db.outbox().enqueue(
                    user: "volunteer-old",
                    category: "shift_reminder",
                    payloadJSON: #"{"title":"Shift tomorrow","body":"Ward 3, 08:00"}"#
                )
                try await Self.deliver(db, live)
                let id = try #require(
                    try await db.outbox().enqueue(
                        user: "volunteer",
                        category: "shift_reminder",
                        payloadJSON: #"{"title":"Shift tomorrow","body":"Ward 3, 08:00"}"#
                    )
                )
                try await Self.deliver(db, live)
                let records = live.records.records(provider: "expo")
                #expect(records.map(\.token) == [good])
                let message = Self.json(try #require(records.first).payload)
                #expect(message["title"] as? String == "Shift tomorrow")
                #expect(message["channelId"] as? String == "shifts")
                #expect(message["priority"] as? String == "high")
                #expect(
                    try await db.rows(
                        "SELECT token, disabled_reason FROM herald.devices WHERE user_id LIKE 'volunteer%' ORDER BY id"
                    )
                        == [[good, nil], [gone, "device_not_registered"]]
                )
                #expect(
                    try await db.rows(
                        "SELECT status FROM herald.delivery_log WHERE job_id = \(id) AND event = 'attempt'"
                    )
                    .allSatisfy { $0 == ["done"] }
                )
            }
        }
    }

    @Test(
        "APNs says a token is Unregistered: the device gets no more requests in that batch, the user's other phone gets them all"
    )
    func refusedTokenIsNotSentToAgainInTheBatch() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("chat_message", priority: "normal")
                let gone = LiveSimulator.apnsToken(0x60)
                let good = LiveSimulator.apnsToken(0x61)
                let soloGone = LiveSimulator.apnsToken(0x62)
                let goneID = try await db.registerDevice("ann", "apns", gone)
                _ = try await db.registerDevice("ann", "apns", good)
                _ = try await db.registerDevice("solo", "apns", soloGone)
                for token in [gone, soloGone] {
                    _ = try live.simulator.faults.add(
                        FaultRule(provider: "apns", token: token, status: 410, reason: "Unregistered", remaining: 1_000)
                    )
                }
                for user in ["ann", "solo"] {
                    for i in 1...3 {
                        _ = try await db.outbox().enqueue(
                            user: user,
                            category: "chat_message",
                            payloadJSON: #"{"title":"Message \#(i)","body":"hi"}"#
                        )
                    }
                }
                let (registry, client) = try live.registry(pool: db.pool)
                #expect(try await db.consumer(providers: registry).runOnce() == 6)  // one batch: three waves
                await client.shutdown()

                // One request per refused token, on the wire.
                #expect(live.simulator.faults.entries.map { 1_000 - ($0.rule.remaining ?? 0) } == [1, 1])
                #expect(live.records.records(provider: "apns").map(\.token) == [good, good, good])
                #expect(
                    try await db.rows("SELECT active::text, disabled_reason FROM herald.devices WHERE id = \(goneID)")
                        == [["false", "unregistered"]]
                )
                // The log says what happened to each message: one attempt per refused token, then
                // no request at all; ann's jobs were delivered (her other phone), solo's had no device left.
                #expect(
                    try await db.rows(
                        """
                        SELECT l.event, coalesce(l.outcome, ''), l.reason FROM herald.delivery_log l
                        JOIN herald.devices d ON d.id = l.device_id WHERE d.token = '\(gone)' ORDER BY l.job_id
                        """
                    ) == [
                        ["attempt", "token_invalid", "unregistered"],
                        ["suppressed", "", "token_refused_in_batch"], ["suppressed", "", "token_refused_in_batch"],
                    ]
                )
                #expect(
                    try await db.rows(
                        """
                        SELECT user_id, event, reason FROM herald.delivery_log
                        WHERE event IN ('suppressed') AND device_id IS NULL ORDER BY user_id, job_id
                        """
                    ) == Array(repeating: ["solo", "suppressed", "no_active_device"], count: 3)
                )
                #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE user_id = 'ann'") == 3)
            }
        }
    }

    @Test("DSober (seed 003) on FCM and APNs: an emergency reaches both phones; a 503 on one is retried")
    func dsoberOnFCMAndAPNs() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory(
                    "emergency",
                    priority: "critical",
                    mandatory: true,
                    quietHours: "bypass",
                    maxAttempts: 3,
                    backoffBase: "1 second",
                    backoffCap: "1 second",
                    interruptionLevel: "critical",
                    androidChannel: "emergency"
                )
                let iphone = LiveSimulator.apnsToken(0xD50)
                let android = "fcm-dsober-android-token"
                try await db.registerDevice("buddy", "apns", iphone)
                try await db.registerDevice("buddy", "fcm", android)
                _ = try live.simulator.faults.add(
                    FaultRule(provider: "fcm", status: 503, reason: "UNAVAILABLE", remaining: 1)
                )
                let id = try #require(
                    try await db.outbox().enqueue(
                        user: "buddy",
                        category: "emergency",
                        payloadJSON: #"{"title":"Alex needs help","body":"Tap to see where","route":"/emergency/7"}"#
                    )
                )
                // The worker's clock stands still between passes, so the retry is due only after it moves.
                let clock = ManualClock()
                clock.advance(by: 1)
                try await Self.deliver(db, live, clock: clock)
                // The APNs device took it on attempt 1; FCM answered 503 and is retried alone.
                #expect(live.records.records(provider: "apns").count == 1)
                #expect(live.records.records(provider: "fcm").isEmpty)
                clock.advance(by: 2)
                try await Self.deliver(db, live, clock: clock)
                #expect(
                    live.records.records(provider: "apns").count == 1,
                    "a retry never re-sends to a device that accepted"
                )
                let fcm = Self.json(try #require(live.records.records(provider: "fcm").first).payload)
                let message = fcm["message"] as? [String: Any] ?? fcm
                let android_ = try #require(message["android"] as? [String: Any])
                #expect(android_["priority"] as? String == "HIGH")
                #expect((android_["notification"] as? [String: Any])?["channel_id"] as? String == "emergency")
                #expect((message["data"] as? [String: String])?["route"] == "/emergency/7")
                let aps = try #require(
                    Self.json(live.records.records(provider: "apns")[0].payload)["aps"] as? [String: Any]
                )
                #expect(aps["interruption-level"] as? String == "critical")
                #expect(
                    try await db.rows(
                        "SELECT provider, outcome, status FROM herald.delivery_log WHERE job_id = \(id) AND event = 'attempt' ORDER BY id"
                    )
                        == [
                            ["apns", "accepted", "pending"], ["fcm", "retry", "pending"], ["fcm", "accepted", "done"],
                        ]
                )
            }
        }
    }

    @Test("the sports club's web client (seed 001) on Web Push: encrypted, decrypted by the simulator intact")
    func sportsClubOnWebPush() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("match_update", priority: "normal", defaultRoute: "/matches")
                let subscription = WebPushService.createSubscription(context: live.simulator.context)
                try await db.exec(
                    """
                    SELECT herald.register_device('fan', 'webpush', '\(subscription.endpoint)',
                        '{"p256dh": "\(subscription.p256dh)", "auth": "\(subscription.auth)"}')
                    """
                )
                _ = try #require(
                    try await db.outbox().enqueue(
                        user: "fan",
                        category: "match_update",
                        payloadJSON:
                            #"{"title":"Kick-off moved","body":"Saturday's match starts at 15:30 ⚽","route":"/matches/12"}"#
                    )
                )
                try await Self.deliver(db, live)
                let record = try #require(live.records.records(provider: "webpush").first)
                let shown = Self.json(record.payload)
                #expect(shown["title"] as? String == "Kick-off moved")
                #expect(shown["body"] as? String == "Saturday's match starts at 15:30 ⚽")
                #expect(record.headers["urgency"] == "normal")
                #expect(Int(record.headers["ttl"] ?? "") ?? 0 > 0)
            }
        }
    }

    @Test("a poison job (the provider refuses it as too large) is dead-lettered with its reason; the rest go out")
    func poisonJobDoesNotBlockOthers() async throws {
        try await TestDatabase.withFresh { db in
            try await LiveSimulator.with { live in
                try await db.addSeedCategory("chat")
                for i in 0..<5 { try await db.registerDevice("u\(i)", "apns", LiveSimulator.apnsToken(i)) }
                // Fields that would not fit a provider once escaped into its data payload are refused
                // at enqueue, in the caller's transaction, never dead-lettered later.
                let quotes = String(repeating: #"\""#, count: 1_400)
                await #expect {
                    try await db.outbox().enqueue(
                        user: "u0",
                        category: "chat",
                        payloadJSON: #"{"title":"t","body":"b","metadata":{"q":"\#(quotes)"}}"#
                    )
                } throws: { PostgresError.sqlState(of: $0) == "22001" }
                // A provider that still refuses one message: only that job is dead-lettered.
                _ = try live.simulator.faults.add(
                    FaultRule(
                        provider: "apns",
                        token: LiveSimulator.apnsToken(0),
                        status: 413,
                        reason: "PayloadTooLarge"
                    )
                )
                let poison = try #require(
                    try await db.outbox().enqueue(
                        user: "u0",
                        category: "chat",
                        payloadJSON: #"{"title":"t","body":"b"}"#
                    )
                )
                _ = try await db.outbox().enqueueMany(
                    users: (1..<5).map { "u\($0)" },
                    category: "chat",
                    payloadJSON: #"{"title":"hi","body":"there"}"#
                )
                try await Self.deliver(db, live)
                #expect(
                    Set(live.records.records(provider: "apns").map(\.token))
                        == Set((1..<5).map(LiveSimulator.apnsToken))
                )
                #expect(
                    try await db.rows("SELECT job_id, last_error FROM herald.dead_letters")
                        == [["\(poison)", "payload_rejected: payload_too_large"]]
                )
                #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            }
        }
    }
}
