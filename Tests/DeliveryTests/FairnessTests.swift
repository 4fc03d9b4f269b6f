import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Queue
import Testing

/// Apps take turns in claims within a priority (migration 0011, `OutboxStatements.claim`): one
/// app's flood does not hold back another app's jobs.
@Suite("Fair claims: apps take turns within a priority", .serialized)
struct FairnessTests {
    static func seed(_ db: TestDatabase) async throws {
        try await db.exec(
            """
            INSERT INTO herald.categories (name, app_id, priority, max_attempts) VALUES
                ('a_bulk', 'app-a', 'normal', 3), ('a_sos', 'app-a', 'critical', 3), ('b_msg', 'app-b', 'normal', 3);
            """)
    }

    @Test("a claim interleaves the apps: the other app's 30 jobs in the first batch, the flood's in order, critical first")
    func claimInterleaves() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            for _ in 0..<2 {
                try await db.exec(
                    """
                    SELECT herald.enqueue_many(ARRAY(SELECT 'a' || g FROM generate_series(0, 999) g), 'a_bulk',
                                               '{"title": "Sale", "body": "Everything must go"}')
                    """)
            }
            for i in 0..<30 {
                _ = try await db.enqueueJSON("b\(i)", "b_msg", payload: #"{"title": "Hi", "body": "From app B"}"#)
            }
            let sos = try #require(try await db.enqueueJSON("a5", "a_sos", payload: #"{"title": "SOS", "body": "Now"}"#))
            #expect(try await db.rows("SELECT DISTINCT app_id FROM herald.outbox ORDER BY 1") == [["app-a"], ["app-b"]])

            let batch = try await db.outbox().claim(limit: 100, lease: .seconds(60), now: Date() + 1)
            let ids = batch.jobs.map(\.id)
            #expect(ids.count == 100)
            // The critical job first (priority before turns), then every one of B's 30 jobs.
            #expect(batch.jobs.first?.id == sos)
            let categories = Dictionary(grouping: batch.jobs, by: \.category).mapValues(\.count)
            #expect(categories["b_msg"] == 30)
            #expect(categories["a_bulk"] == 69)
            // A's jobs are A's first 69 due, in order (a user's jobs never jump ahead).
            let firstA = try await db.rows(
                "SELECT id FROM herald.outbox WHERE category = 'a_bulk' ORDER BY id LIMIT 69").compactMap { $0[0].flatMap(Int64.init) }
            #expect(Set(batch.jobs.filter { $0.category == "a_bulk" }.map(\.id)) == Set(firstA))
        }
    }

    @Test("a category moved to another app takes its queued jobs along")
    func categoryMoves() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            _ = try await db.enqueueJSON("u1", "b_msg", payload: #"{"title": "Hi", "body": "B"}"#)
            try await db.exec("UPDATE herald.categories SET app_id = 'app-c' WHERE name = 'b_msg'")
            #expect(try await db.scalar("SELECT app_id FROM herald.outbox") == "app-c")
            let batch = try await db.outbox().claim(limit: 10, lease: .seconds(60), now: Date() + 1)
            #expect(batch.jobs.count == 1)
        }
    }

    @Test("2 herald run × defaults: while app A's 20,000-job flood drains, app B's jobs are sent at once")
    func floodDoesNotHoldBackAnotherApp() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            // Local-fallback devices: what is measured is the claims, not a provider.
            try await db.exec(
                """
                SELECT herald.register_device('a' || g, 'local', 'a-tok-' || g) FROM generate_series(0, 1999) g;
                SELECT herald.register_device('b' || g, 'local', 'b-tok-' || g) FROM generate_series(0, 19) g;
                """)
            for _ in 0..<10 {
                try await db.exec(
                    """
                    SELECT herald.enqueue_many(ARRAY(SELECT 'a' || g FROM generate_series(0, 1999) g), 'a_bulk',
                                               '{"title": "Sale", "body": "Everything must go"}')
                    """)
            }
            let env = ["HERALD_DATABASE_URL": db.url, "HERALD_HTTP_PORT": "0", "HERALD_LOG_LEVEL": "warning"]
            let workers = (0..<2).map {
                WorkerProcess(name: "fair-\($0)-\(db.name)", environment: env, directory: ChaosTests.logDirectory())
            }
            for w in workers { try w.start() }
            defer { for w in workers { w.signal(SIGKILL) } }
            // The flood is under way; then app B's jobs, one statement each.
            #expect(try await waitUntil(.seconds(60)) {
                try await db.int("SELECT count(*) FROM herald.delivery_log WHERE category = 'a_bulk'") > 0
            })
            for i in 0..<20 {
                _ = try await db.enqueueJSON("b\(i)", "b_msg", payload: #"{"title": "Hi", "body": "From app B"}"#)
            }
            let sent = try await waitUntil(.seconds(60)) {
                try await db.int(
                    "SELECT count(*) FROM herald.delivery_log WHERE category = 'b_msg' AND outcome = 'accepted'") == 20
            }
            let floodLeft = try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'a_bulk'")
            #expect(sent)
            // Without turns, B's jobs waited behind the whole flood (none of it left by then).
            #expect(floodLeft > 5_000, "app A still had \(floodLeft) jobs queued when B's last one was sent")
            #expect(try await waitUntil(.seconds(300)) {
                try await db.int("SELECT count(*) FROM herald.outbox") == 0
            })
            for w in workers { await w.stop() }
            let outcomes = try await db.rows(
                """
                SELECT event || ' ' || coalesce(outcome, '') || ' ' || coalesce(reason, '') || ': ' || count(DISTINCT job_id)
                FROM herald.delivery_log GROUP BY event, outcome, reason ORDER BY 1
                """).compactMap { $0[0] }
            #expect(try await db.int("SELECT count(*) FROM herald.local_notifications") == 20_020, "\(outcomes)")
            #expect(try await db.int("SELECT count(DISTINCT job_id) FROM herald.local_notifications") == 20_020)
        }
    }
}
