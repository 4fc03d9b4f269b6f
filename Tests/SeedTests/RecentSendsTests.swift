import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// The claim hands the policy a recipient's sends from `recipients.sends` (migration 0016), cut
/// to the longest window that user's own jobs in the batch look back over (`reach`): never
/// shorter than a window a limit uses. The row keeps the newest 100 of the day; a user sent more than that
/// within a window their jobs look back over has the window read from the inbox.
@Suite("Recent sends reach the policy over its whole window")
struct RecentSendsTests {
    /// Two users, `u1` whose history fills the rule and `u2` with room: one job of `category`
    /// each, decided and sent in one batch. Expects only `u2`'s to go out and returns `u1`'s
    /// decisions (`event, status, reason` rows).
    private func decide(
        _ db: TestDatabase,
        _ category: String,
        options: String = "{}"
    ) async throws -> [[String]] {
        let payload = #"{"title": "T", "body": "b"}"#
        let full = try #require(try await db.enqueueJSON("u1", category, payload: payload, options: options))
        let room = try #require(try await db.enqueueJSON("u2", category, payload: payload, options: options))
        let provider = ScriptedProvider()
        let clock = ManualClock()
        clock.advance(by: 1)
        let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
        #expect(try await consumer.runOnce() == 2)
        #expect(provider.sent.map(\.device.userID) == ["u2"])
        #expect(try await db.decisions(room) == [["attempt", "done", "ok"]])
        return try await db.decisions(full)
    }

    /// Inbox rows for `user`: `count` notifications of `category` (scope `scope`), the newest
    /// `minutesAgo` minutes ago, a second apart going back.
    private func sent(
        _ db: TestDatabase,
        _ user: String,
        _ category: String,
        count: Int,
        minutesAgo: Int,
        scope: String? = nil
    ) async throws {
        let scopeSQL = scope.map { "'\($0)'" } ?? "NULL"
        try await db.exec(
            """
            INSERT INTO herald.inbox (user_id, category, title, body, scope, created_at)
            SELECT '\(user)', '\(category)', 't', 'b', \(scopeSQL), now() - interval '\(minutesAgo) minutes' - g * interval '1 second'
            FROM generate_series(0, \(count - 1)) g
            """
        )
    }

    /// `chat` (no rules) and `rules`, and an Expo device for u1 and u2.
    private func setUp(
        _ db: TestDatabase,
        _ category: String,
        coalesce: String = "{}",
        rateLimit: String = "{}"
    ) async throws {
        try await db.addSeedCategory("chat")
        try await db.addSeedCategory(category, coalesce: coalesce, rateLimit: rateLimit)
        for user in ["u1", "u2"] { try await db.registerDevice(user, "expo", "ExponentPushToken[\(user)]") }
    }

    @Test(
        "a per-user limit of an hour counts other categories' sends from half an hour ago, not those of two hours ago"
    )
    func perUserLimitSeesItsWholeWindow() async throws {
        try await TestDatabase.withFresh { db in
            try await setUp(
                db,
                "digest",
                rateLimit: #"{"perUser": {"max": 2, "windowSeconds": 3600}, "over": "suppress"}"#
            )
            // u1: two chat notifications half an hour ago (the limit is full); u2: two from two
            // hours ago (outside the hour: room).
            try await sent(db, "u1", "chat", count: 2, minutesAgo: 30)
            try await sent(db, "u2", "chat", count: 2, minutesAgo: 120)
            #expect(try await db.int("SELECT sum(cardinality(sends))::int FROM herald.recipients") == 4)
            #expect(try await decide(db, "digest") == [["suppressed", "suppressed", "rate_limited"]])
        }
    }

    @Test(
        "a scope quota still counts its category's sends after another category's flood pushed them out of the row's newest 100"
    )
    func scopeQuotaSurvivesAnotherCategorysFlood() async throws {
        try await TestDatabase.withFresh { db in
            try await setUp(
                db,
                "announcement",
                rateLimit: #"{"perScope": {"max": 2, "windowSeconds": 86400}, "over": "suppress"}"#
            )
            // Both users: announcements in org-1 three hours ago (u1 two: the quota is full; u2
            // one: room), then 150 chat notifications in the last hour.
            try await sent(db, "u1", "announcement", count: 2, minutesAgo: 180, scope: "org-1")
            try await sent(db, "u2", "announcement", count: 1, minutesAgo: 180, scope: "org-1")
            for user in ["u1", "u2"] { try await sent(db, user, "chat", count: 150, minutesAgo: 10) }
            // The row keeps the newest 100 of the day: only chat.
            #expect(
                try await db.int(
                    "SELECT count(*)::int FROM herald.recipients r, unnest(r.sends) s WHERE s.category = 'announcement'"
                ) == 0
            )
            #expect(
                try await decide(db, "announcement", options: #"{"scope": "org-1"}"#)
                    == [["suppressed", "suppressed", "scope_quota"]]
            )
        }
    }

    @Test("a per-user limit above the row's 100 sends counts every send of its window")
    func perUserLimitAboveTheRowsHundred() async throws {
        try await TestDatabase.withFresh { db in
            try await setUp(
                db,
                "digest",
                rateLimit: #"{"perUser": {"max": 150, "windowSeconds": 3600}, "over": "suppress"}"#
            )
            // u1 was sent 150 in the last hour (the limit is full); u2 149 (room for one).
            try await sent(db, "u1", "chat", count: 150, minutesAgo: 5)
            try await sent(db, "u2", "chat", count: 149, minutesAgo: 5)
            #expect(try await decide(db, "digest") == [["suppressed", "suppressed", "rate_limited"]])
        }
    }

    @Test("leading coalescing over 5 minutes sees its 3 listings behind 150 chat messages of the last 2 minutes")
    func leadingCoalescingBehindAFlood() async throws {
        try await TestDatabase.withFresh { db in
            try await setUp(db, "listing", coalesce: #"{"mode": "leading", "count": 3, "windowSeconds": 300}"#)
            // u1: 3 listings 4 minutes ago (the window's count is reached); u2: 2 (room). Then
            // 150 chat messages each, the newest 1 minute ago: the row keeps only chat.
            try await sent(db, "u1", "listing", count: 3, minutesAgo: 4)
            try await sent(db, "u2", "listing", count: 2, minutesAgo: 4)
            for user in ["u1", "u2"] { try await sent(db, user, "chat", count: 150, minutesAgo: 1) }
            let folded = try await decide(db, "listing")
            #expect(folded.first?.last == "coalesced", "\(folded)")
        }
    }

    @Test("a batch hands over sends only for users whose own jobs read them, each as far back as those jobs look")
    func sendsOnlyWhereTheUsersJobsReadThem() async throws {
        try await TestDatabase.withFresh { db in
            try await setUp(db, "digest", rateLimit: #"{"perUser": {"max": 5, "windowSeconds": 3600}}"#)
            try await db.addSeedCategory("daily", rateLimit: #"{"perScope": {"max": 5, "windowSeconds": 86400}}"#)
            try await db.registerDevice("u3", "expo", "ExponentPushToken[u3]")
            // Each user: 2 chat messages half an hour ago, 3 five hours ago.
            for user in ["u1", "u2", "u3"] {
                try await sent(db, user, "chat", count: 2, minutesAgo: 30)
                try await sent(db, user, "chat", count: 3, minutesAgo: 300)
            }
            let payload = #"{"title": "T", "body": "b"}"#
            _ = try await db.enqueueJSON("u1", "chat", payload: payload)  // reads no history
            _ = try await db.enqueueJSON("u2", "digest", payload: payload)  // an hour
            _ = try await db.enqueueJSON("u3", "daily", payload: payload, options: #"{"scope": "org-1"}"#)  // a day
            let batch = try await db.outbox().claim(limit: 10, lease: .seconds(60), now: Date() + 1)
            #expect(batch.jobs.count == 3)
            #expect(batch.recipients["u1"]?.recentSends.count == 0)
            #expect(batch.recipients["u2"]?.recentSends.count == 2)
            #expect(batch.recipients["u3"]?.recentSends.count == 5)
        }
    }
}
