import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// The claim hands the policy a recipient's sends from `recipients.sends` (migration 0016), cut
/// to the longest window the batch's categories look back over (`reach`): never shorter than a
/// window a limit uses.
@Suite("Recent sends reach the policy over its whole window")
struct RecentSendsTests {
    @Test("a per-user limit of an hour counts other categories' sends from half an hour ago, not those of two hours ago")
    func perUserLimitSeesItsWholeWindow() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("chat")
            try await db.addSeedCategory(
                "digest", rateLimit: #"{"perUser": {"max": 2, "windowSeconds": 3600}, "over": "suppress"}"#)
            try await db.registerDevice("u1", "expo", "ExponentPushToken[u1]")
            try await db.registerDevice("u2", "expo", "ExponentPushToken[u2]")
            // u1: two chat notifications half an hour ago (the limit is full); u2: two from two
            // hours ago (outside the hour: room).
            try await db.exec(
                """
                INSERT INTO herald.inbox (user_id, category, title, body, created_at) VALUES
                    ('u1', 'chat', 'a', 'b', now() - interval '30 minutes'),
                    ('u1', 'chat', 'a', 'b', now() - interval '31 minutes'),
                    ('u2', 'chat', 'a', 'b', now() - interval '2 hours'),
                    ('u2', 'chat', 'a', 'b', now() - interval '2 hours 1 minute')
                """)
            #expect(try await db.int("SELECT sum(cardinality(sends))::int FROM herald.recipients") == 4)
            let full = try #require(try await db.enqueueJSON("u1", "digest", payload: #"{"title": "D", "body": "d"}"#))
            let room = try #require(try await db.enqueueJSON("u2", "digest", payload: #"{"title": "D", "body": "d"}"#))
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 2)
            #expect(provider.sent.map(\.device.userID) == ["u2"])
            #expect(try await db.decisions(full) == [["suppressed", "suppressed", "rate_limited"]])
            #expect(try await db.decisions(room) == [["attempt", "done", "ok"]])
        }
    }
}
