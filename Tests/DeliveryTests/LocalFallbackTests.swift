import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

@Suite("Local fallback: a job no push device took is recorded for in-app display (seed 004)")
struct LocalFallbackTests {
    @Test("dead token then no device left: recorded locally, the delivery method is logged")
    func deadTokenFallsBackToLocal() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("departure", priority: "high", maxAttempts: 2)
            try await db.registerDevice("rider", "fcm", "gone")
            let provider = ScriptedProvider()
            provider.answer("gone", with: DeliveryOutcome(.tokenInvalid, reason: .unregistered))
            let id = try #require(try await db.enqueue("rider", "departure", title: "Bus 42", body: "Leaves in 5 min"))
            let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let consumer = db.consumer(providers: ProviderRegistry([.fcm: provider, .local: local]))
            #expect(try await consumer.runOnce() == 1)
            #expect(
                try await db.rows(
                    "SELECT device_id, user_id, title, body FROM herald.local_notifications WHERE job_id = \(id)"
                )
                    == [["0", "rider", "Bus 42", "Leaves in 5 min"]]
            )
            #expect(
                try await db.rows(
                    "SELECT event, provider, outcome, status FROM herald.delivery_log WHERE job_id = \(id) ORDER BY id"
                )
                    == [
                        ["attempt", "fcm", "token_invalid", "suppressed"], ["suppressed", nil, nil, "suppressed"],
                        ["fallback", "local", "accepted", "suppressed"],
                    ]
            )
        }
    }

    @Test("retries exhausted: dead-lettered and recorded locally; a user with no device at all too")
    func deadLetterAndNoDeviceFallBack() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("departure", maxAttempts: 1)
            try await db.registerDevice("rider", "apns", "flaky")
            let provider = ScriptedProvider()
            provider.answer("flaky", with: DeliveryOutcome(.retry, reason: .unavailable))
            let dead = try #require(try await db.enqueue("rider", "departure", title: "A"))
            let nobody = try #require(try await db.enqueue("walker", "departure", title: "B"))
            let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider, .local: local]))
            #expect(try await consumer.runOnce() == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters WHERE job_id = \(dead)") == 1)
            #expect(
                try await db.rows("SELECT job_id, user_id, title FROM herald.local_notifications ORDER BY job_id")
                    == [["\(dead)", "rider", "A"], ["\(nobody)", "walker", "B"]]
            )
        }
    }

    @Test("a rule's decision (quiet hours, opt-out) and a delivered job get no fallback")
    func noFallbackForRulesOrSuccess() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("promo")
            try await db.registerDevice("a", "apns", "ok")
            try await db.registerDevice("b", "apns", "ok-b")
            try await db.setPreferences("b", #"{"eventToggles": {"promo": false}}"#)
            let provider = ScriptedProvider()
            _ = try await db.enqueue("a", "promo")
            _ = try await db.enqueue("b", "promo")
            let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider, .local: local]))
            #expect(try await consumer.runOnce() == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.local_notifications") == 0)
        }
    }

    @Test(
        "seed 004: the fallback shows in the user's notification center, one row per job; a critical job's alert is that row"
    )
    func fallbackShowsInTheInbox() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("departure", maxAttempts: 1)
            try await db.addCategory("sep", priority: "critical", maxAttempts: 1)
            let plain = try #require(
                try await db.enqueue("walker", "departure", title: "Bus 42", body: "Leaves in 5 min")
            )
            let critical = try #require(try await db.enqueue("admin", "sep", title: "SEP failed"))
            let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let consumer = db.consumer(providers: ProviderRegistry([.local: local]))
            #expect(try await consumer.runOnce() == 2)
            #expect(
                try await db.rows("SELECT job_id, kind, title, body FROM herald.inbox ORDER BY job_id")
                    == [
                        ["\(plain)", "notification", "Bus 42", "Leaves in 5 min"],
                        ["\(critical)", "alert", "SEP failed", "World"],
                    ]
            )
            #expect(
                try await db.rows(
                    "SELECT job_id, reason FROM herald.delivery_log WHERE event = 'fallback' ORDER BY job_id"
                )
                    == [["\(plain)", "inbox"], ["\(critical)", "alert"]]
            )
            // It is unread like any notification: the badge counts it.
            #expect(
                try await db.int("SELECT count(*) FROM herald.inbox WHERE user_id = 'walker' AND read_at IS NULL") == 1
            )
        }
    }
}
