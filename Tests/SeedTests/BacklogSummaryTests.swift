import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// `coalesce.summarizeAbove` through the claim: the claim counts each user's due backlog per
/// category that summarizes (only as far as one past the threshold) and the policy folds a
/// backlog above it into one summary.
@Suite("A long due backlog becomes one summary")
struct BacklogSummaryTests {
    @Test("summarizeAbove 3: a user with 5 due, or 60, gets one summary; a user with 3 gets all 3")
    func backlogAboveTheThresholdIsSummarized() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("alerts", coalesce: #"{"summarizeAbove": 3}"#)
            for user in ["five", "sixty", "three"] {
                try await db.registerDevice(user, "expo", "ExponentPushToken[\(user)]")
            }
            for (user, count) in [("five", 5), ("sixty", 60), ("three", 3)] {
                try await Self.enqueue(db, user, "alerts", count)
            }
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 68)
            #expect(provider.sent.map(\.device.userID) == ["three", "three", "three"])
            // The first job folded for the backlog opens the summary; the rest join it.
            #expect(
                try await Self.folded(db) == [
                    ["five", "backlog", "1"], ["five", "summary_open", "4"],
                    ["sixty", "backlog", "1"], ["sixty", "summary_open", "59"],
                ]
            )
            let summaries = try await db.rows(
                "SELECT user_id, summary_count::text FROM herald.outbox WHERE summary_key IS NOT NULL ORDER BY user_id"
            )
            #expect(summaries.map { $0.compactMap { $0 } } == [["five", "5"], ["sixty", "60"]])
        }
    }

    @Test(
        "summarizeAbove 5 with batches of 3: a backlog counts the jobs after the batch (not another category's, not a scheduled one), so 8 due become one summary of 8 and 5 due go out as 5"
    )
    func backlogPastTheBatchIsCounted() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addSeedCategory("alerts", coalesce: #"{"summarizeAbove": 5}"#)
            try await db.addSeedCategory("chat")
            for user in ["eight", "five"] { try await db.registerDevice(user, "expo", "ExponentPushToken[\(user)]") }
            // eight: 3 alerts, a chat message (same app, no summaries), 5 alerts. The first batch
            // holds 3 of them; the other 5 lie past the chat message.
            try await Self.enqueue(db, "eight", "alerts", 3)
            try await Self.enqueue(db, "eight", "chat", 1)
            try await Self.enqueue(db, "eight", "alerts", 5)
            // five: 5 due and one scheduled for tomorrow (not due: not part of the backlog).
            try await Self.enqueue(db, "five", "alerts", 5)
            try await Self.enqueue(db, "five", "alerts", 1, options: #"{"deliverAt": "\#(iso(Date() + 86_400))"}"#)
            let provider = ScriptedProvider()
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.expo: provider]), clock: clock, batchSize: 3)
            var rounds = 0
            while try await consumer.runOnce() > 0 { rounds += 1 }
            #expect(rounds >= 5)
            #expect(try await Self.folded(db) == [["eight", "backlog", "1"], ["eight", "summary_open", "7"]])
            // five's five alerts one by one; eight's chat message and one summary of its 8 alerts.
            #expect(provider.sent.filter { $0.device.userID == "five" }.count == 5)
            #expect(provider.sent.filter { $0.device.userID == "eight" }.count == 2)
            let summaries = try await db.rows(
                "SELECT summary_count::text FROM herald.inbox WHERE user_id = 'eight' AND summary_count > 0"
            )
            #expect(summaries.map { $0.compactMap { $0 } } == [["8"]])
        }
    }

    /// `count` jobs of `category` for `user`, titled "Alert 1", "Alert 2", … (one statement).
    static func enqueue(
        _ db: TestDatabase,
        _ user: String,
        _ category: String,
        _ count: Int,
        options: String = "{}"
    )
        async throws
    {
        try await db.exec(
            """
            SELECT herald.enqueue('\(user)', '\(category)', jsonb_build_object('title', 'Alert ' || g, 'body', 'b'), '\(options)')
            FROM generate_series(1, \(count)) g
            """
        )
    }

    /// The jobs folded into a summary, per user and reason: `[user, reason, count]`.
    static func folded(_ db: TestDatabase) async throws -> [[String]] {
        try await db.rows(
            """
            SELECT user_id, reason, count(*)::text FROM herald.delivery_log
            WHERE event = 'summarized' GROUP BY 1, 2 ORDER BY 1, 2
            """
        ).map { $0.compactMap { $0 } }
    }
}
