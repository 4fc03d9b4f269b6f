import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

@Suite("Delivery loop: retries, backoff, dead letters, alerts (manual clock, no sleeps)")
struct DeliveryLoopTests {
    @Test(
        "the inbox row keeps a notification's metadata, and an empty object when it has none (the ack gets no metadata as NULL)"
    )
    func inboxMetadata() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "apns", "phone")
            let plain = try #require(try await db.enqueueJSON("u", "chat", payload: #"{"title": "Hi", "body": "b"}"#))
            let tagged = try #require(
                try await db.enqueueJSON(
                    "u",
                    "chat",
                    payload: #"{"title": "Hi", "body": "b", "metadata": {"threadId": "t-1", "n": "2"}}"#
                )
            )
            let empty = try #require(
                try await db.enqueueJSON("u", "chat", payload: #"{"title": "Hi", "body": "b", "metadata": {}}"#)
            )
            let consumer = db.consumer(providers: ProviderRegistry([.apns: ScriptedProvider()]))
            #expect(try await consumer.runOnce() == 3)
            #expect(
                try await db.rows("SELECT job_id, metadata::text FROM herald.inbox ORDER BY job_id")
                    == [["\(plain)", "{}"], ["\(tagged)", #"{"n": "2", "threadId": "t-1"}"#], ["\(empty)", "{}"]]
            )
        }
    }

    @Test("retry with backoff until max attempts, then dead letter + inbox alert for critical; replay delivers")
    func backoffDeadLetterAlertReplay() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory(
                "sep_failure",
                priority: "critical",
                maxAttempts: 3,
                base: "10 seconds",
                cap: "25 seconds"
            )
            try await db.registerDevice("admin", "apns", "broken-phone")
            let provider = ScriptedProvider()
            provider.answer("broken-phone", with: DeliveryOutcome(.retry, reason: .unavailable))
            let id = try #require(try await db.enqueue("admin", "sep_failure", title: "SEP failed", body: "Driver Max"))
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)

            // Attempt 1 fails: back to pending, due within base (10 s) of now.
            #expect(try await consumer.runOnce() == 1)
            let due1 = try await db.instant("SELECT run_at FROM herald.outbox WHERE id = \(id) AND state = 'pending'")
            #expect(due1 >= clock.now() + 4.99 && due1 <= clock.now() + 10.01)
            // The jitter may pick any delay in the ceiling's upper half: advance past it.
            clock.advance(by: 10.01)
            #expect(try await consumer.runOnce() == 1)  // attempt 2; the next ceiling is 20 s
            clock.advance(by: 20.01)
            #expect(try await db.int("SELECT attempt FROM herald.outbox WHERE id = \(id)") == 2)
            #expect(try await consumer.runOnce() == 1)  // attempt 3 = max → dead

            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            let dead = try await db.rows("SELECT job_id, attempts, last_error FROM herald.dead_letters")
            #expect(dead == [["\(id)", "3", "attempts_exhausted: unavailable"]])
            #expect(
                try await db.rows("SELECT kind, title FROM herald.inbox WHERE user_id = 'admin'") == [
                    ["alert", "SEP failed"]
                ]
            )
            #expect(provider.sent.count == 3)
            #expect(Set(provider.sent.map(\.collapseID)) == ["herald-\(id)"])
            let attempts = try await db.rows(
                "SELECT attempt, outcome, status FROM herald.delivery_log WHERE job_id = \(id) AND event = 'attempt' ORDER BY id"
            )
            #expect(attempts == [["1", "retry", "pending"], ["2", "retry", "pending"], ["3", "retry", "dead"]])

            // The phone recovers; replaying brings the job back and it delivers with the same collapse id.
            provider.answer("broken-phone", with: nil)
            let dlq = try #require(Int64(try await db.scalar("SELECT id FROM herald.dead_letters") ?? ""))
            let replayed = try await db.outbox().replayDeadLetters(ids: [dlq])
            #expect(replayed.count == 1)
            clock.advance(by: 5)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.last?.collapseID == "herald-\(id)")
            let newJob = try #require(replayed.first?.1)
            #expect(
                try await db.rows("SELECT outcome, status FROM herald.delivery_log WHERE job_id = \(newJob)")
                    == [["accepted", "done"]]
            )
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters WHERE replayed_at IS NOT NULL") == 1)
            #expect(try await db.outbox().replayDeadLetters(ids: [dlq]).isEmpty)  // only once
        }
    }

    @Test("Retry-After is honoured and does not use up an attempt")
    func retryAfterSnooze() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", maxAttempts: 1)
            try await db.registerDevice("u", "fcm", "busy")
            let provider = ScriptedProvider()
            provider.answer("busy", with: DeliveryOutcome(.retry, reason: .rateLimited, retryAfter: .seconds(120)))
            let id = try #require(try await db.enqueue("u", "chat"))
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            let row = try await db.rows(
                "SELECT attempt, extract(epoch FROM run_at) - \(clock.now().timeIntervalSince1970) >= 119.99, last_error FROM herald.outbox WHERE id = \(id)"
            )
            #expect(row == [["0", "t", "rate_limited"]])
            clock.advance(by: 60)
            #expect(try await consumer.runOnce() == 0)
            provider.answer("busy", with: nil)
            clock.advance(by: 61)
            #expect(try await consumer.runOnce() == 1)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test("a retry never re-sends to a device that already accepted")
    func partialAcceptance() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            let good = try await db.registerDevice("u", "apns", "good")
            let flaky = try await db.registerDevice("u", "fcm", "flaky")
            let provider = ScriptedProvider()
            provider.answer("flaky", with: DeliveryOutcome(.retry, reason: .timeout))
            let id = try #require(try await db.enqueue("u", "chat"))
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider, .fcm: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            #expect(
                try await db.scalar("SELECT accepted_devices::text FROM herald.outbox WHERE id = \(id)") == "{\(good)}"
            )
            provider.answer("flaky", with: nil)
            clock.advance(by: 11)
            #expect(try await consumer.runOnce() == 1)
            let sentTo = provider.sent.map(\.device.id)
            #expect(sentTo.filter { $0 == good }.count == 1)
            #expect(sentTo.filter { $0 == flaky }.count == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test("dead tokens disable their device; payload rejections dead-letter at once; no device is recorded")
    func permanentOutcomes() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.addCategory("sos", priority: "critical")
            let dead = try await db.registerDevice("u1", "expo", "ExponentPushToken[old]")
            try await db.registerDevice("u2", "apns", "rejects")
            let provider = ScriptedProvider()
            provider.answer(
                "ExponentPushToken[old]",
                with: DeliveryOutcome(.tokenInvalid, reason: .deviceNotRegistered)
            )
            provider.answer("rejects", with: DeliveryOutcome(.payloadRejected, reason: .payloadTooLarge))
            let j1 = try #require(try await db.enqueue("u1", "chat"))
            let j2 = try #require(try await db.enqueue("u2", "chat"))
            let j3 = try #require(try await db.enqueue("nobody", "sos", title: "Alert"))
            let j4 = try #require(try await db.enqueue("nobody", "chat"))
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider, .apns: provider]))
            #expect(try await consumer.runOnce() == 4)

            #expect(
                try await db.rows("SELECT active, disabled_reason FROM herald.devices WHERE id = \(dead)")
                    == [["f", "device_not_registered"]]
            )
            #expect(
                try await db.rows(
                    "SELECT status, reason FROM herald.delivery_log WHERE job_id = \(j1) AND event = 'suppressed'"
                )
                    == [["suppressed", "no_active_device"]]
            )
            #expect(
                try await db.rows("SELECT last_error, attempts FROM herald.dead_letters WHERE job_id = \(j2)")
                    == [["payload_rejected: payload_too_large", "1"]]
            )
            #expect(
                try await db.rows("SELECT status, reason FROM herald.delivery_log WHERE job_id = \(j3)")
                    == [["suppressed", "no_active_device"]]
            )
            #expect(
                try await db.rows("SELECT kind, title FROM herald.inbox WHERE job_id = \(j3)") == [["alert", "Alert"]]
            )
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE job_id = \(j4)") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
        }
    }

    @Test("expired jobs are dropped before sending and recorded as expired")
    func expiry() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("departure")
            try await db.registerDevice("rider", "apns", "t")
            let id = try #require(
                try await db.enqueue(
                    "rider",
                    "departure",
                    options: #"{"expiresAt":"\#(Dispatcher.iso8601(SystemClock().now() + 60))"}"#
                )
            )
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 120)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            #expect(provider.sent.isEmpty)
            #expect(
                try await db.rows("SELECT event, status, reason FROM herald.delivery_log WHERE job_id = \(id)")
                    == [["expired", "expired", "expired_before_delivery"]]
            )
        }
    }

    @Test("claims take the most urgent due work first")
    func priorityOrder() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("announcement", priority: "low")
            try await db.addCategory("sep_failure", priority: "critical")
            for i in 0..<30 { try await db.enqueue("member-\(i)", "announcement") }
            let urgent = try #require(try await db.enqueue("admin", "sep_failure"))
            let batch = try await db.outbox().claim(limit: 1, lease: .seconds(30), now: SystemClock().now() + 1)
            #expect(batch.jobs.map(\.id) == [urgent])
        }
    }
}
