import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Queue
import Testing

/// Apps take turns in claims within a priority (migration 0011, `OutboxStatements.claim`), and
/// scopes within an app (migration 0014): one app's or one organisation's flood does not hold back
/// another's jobs.
@Suite("Fair claims: apps and scopes take turns within a priority", .serialized)
struct FairnessTests {
    static func seed(_ db: TestDatabase) async throws {
        try await db.exec(
            """
            INSERT INTO herald.categories (name, app_id, priority, max_attempts) VALUES
                ('a_bulk', 'app-a', 'normal', 3), ('a_sos', 'app-a', 'critical', 3), ('b_msg', 'app-b', 'normal', 3);
            """
        )
    }

    /// A broadcast of app A (`a_bulk`): one job to each of `prefix`0…`prefix`(count − 1), in one
    /// statement, in organisation `scope` if given.
    static func broadcast(_ db: TestDatabase, _ prefix: String, _ count: Int, scope: String? = nil) async throws {
        let options = scope.map { #"{"scope": "\#($0)"}"# } ?? "{}"
        try await db.exec(
            """
            SELECT herald.enqueue_many(ARRAY(SELECT '\(prefix)' || g FROM generate_series(0, \(count - 1)) g), 'a_bulk',
                                       '{"title": "Sale", "body": "Everything must go"}', '\(options)')
            """
        )
    }

    @Test(
        "a claim interleaves the apps: the other app's 30 jobs in the first batch, the flood's in order, critical first"
    )
    func claimInterleaves() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            for _ in 0..<2 {
                try await Self.broadcast(db, "a", 1_000)
            }
            for i in 0..<30 {
                _ = try await db.enqueueJSON("b\(i)", "b_msg", payload: #"{"title": "Hi", "body": "From app B"}"#)
            }
            let sos = try #require(
                try await db.enqueueJSON("a5", "a_sos", payload: #"{"title": "SOS", "body": "Now"}"#)
            )
            #expect(
                try await db.rows("SELECT DISTINCT app_id FROM herald.outbox ORDER BY 1") == [["app-a"], ["app-b"]]
            )

            let batch = try await db.outbox().claim(limit: 100, lease: .seconds(60), now: Date() + 1)
            let ids = batch.jobs.map(\.id)
            #expect(ids.count == 100)
            // The critical job first (priority before turns), then every one of B's 30 jobs.
            #expect(batch.jobs.first?.id == sos)
            let categories = Dictionary(grouping: batch.jobs, by: \.category).mapValues(\.count)
            #expect(categories["b_msg"] == 30)
            #expect(categories["a_bulk"] == 69)
            // A's jobs are its users' runs in order (a user's jobs never jump ahead; claim v38
            // takes each user's due jobs together, up to the batch): a5's with its critical job
            // first, then each user's two broadcast jobs, users in the order of their first.
            let firstA = try await db.rows(
                """
                SELECT id FROM herald.outbox o WHERE category = 'a_bulk'
                ORDER BY o.user_id <> 'a5',
                         (SELECT min(x.id) FROM herald.outbox x WHERE x.user_id = o.user_id AND x.category = 'a_bulk'), o.id
                LIMIT 69
                """
            ).compactMap { $0[0].flatMap(Int64.init) }
            #expect(Set(batch.jobs.filter { $0.category == "a_bulk" }.map(\.id)) == Set(firstA))
        }
    }

    @Test("within an app, scopes take turns: another organisation's jobs in the first batch, the broadcast's in order")
    func claimInterleavesScopes() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            // Organisation X's broadcast, then organisation Y's 30 jobs and 5 without a scope.
            try await Self.broadcast(db, "x", 2_000, scope: "org-x")
            for i in 0..<30 {
                _ = try await db.enqueueJSON(
                    "y\(i)",
                    "a_bulk",
                    payload: #"{"title": "Hi", "body": "From Y"}"#,
                    options: #"{"scope": "org-y"}"#
                )
            }
            for i in 0..<5 {
                _ = try await db.enqueueJSON("n\(i)", "a_bulk", payload: #"{"title": "Hi", "body": "No scope"}"#)
            }
            let outbox = db.outbox()
            let batch = try await outbox.claim(limit: 100, lease: .seconds(60), now: Date() + 1)
            #expect(batch.jobs.count == 100)
            let byUser = Dictionary(grouping: batch.jobs) { String($0.userID.prefix(1)) }.mapValues(\.count)
            // Each walked scope's first 16 at most (`scopeTurnJobs`), the broadcast the rest.
            #expect(byUser["y"] == 16)
            #expect(byUser["n"] == 5)
            #expect(byUser["x"] == 79)
            // Each scope's jobs are its first due, in order.
            for (prefix, count) in [("x", 79), ("y", 16)] {
                let first = try await db.rows(
                    "SELECT id FROM herald.outbox WHERE user_id LIKE '\(prefix)%' ORDER BY id LIMIT \(count)"
                ).compactMap { $0[0].flatMap(Int64.init) }
                #expect(Set(batch.jobs.filter { $0.userID.hasPrefix(prefix) }.map(\.id)) == Set(first))
            }
            // The next claim of the same worker takes Y's remaining 14 at once.
            let next = try await outbox.claim(limit: 100, lease: .seconds(60), now: Date() + 1)
            #expect(next.jobs.filter { $0.userID.hasPrefix("y") }.count == 14)
        }
    }

    @Test("a trickle beside a flood: once its scope ran dry, the next job of it is still in the very next claim")
    func scopeTrickleKeepsItsTurn() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            try await Self.broadcast(db, "x", 2_000, scope: "org-x")
            func trickle(_ i: Int) async throws -> Int64 {
                try #require(
                    try await db.enqueueJSON(
                        "y\(i)",
                        "a_bulk",
                        payload: #"{"title": "Hi", "body": "From Y"}"#,
                        options: #"{"scope": "org-y"}"#
                    )
                )
            }
            let outbox = db.outbox()
            let first = try await trickle(0)
            #expect(
                try await outbox.claim(limit: 50, lease: .seconds(60), now: Date() + 1).jobs.contains { $0.id == first }
            )
            // This claim's walk finds organisation Y with nothing pending: the worker walks on.
            #expect(
                try await outbox.claim(limit: 50, lease: .seconds(60), now: Date() + 1).jobs.allSatisfy {
                    $0.userID.hasPrefix("x")
                }
            )
            for i in 1...3 {
                let next = try await trickle(i)
                let batch = try await outbox.claim(limit: 50, lease: .seconds(60), now: Date() + 1)
                #expect(batch.jobs.contains { $0.id == next }, "Y's job \(i) is not left behind X's broadcast")
            }
        }
    }

    @Test("a scope's turn never sends a user's later job before an earlier one queued in another scope")
    func scopeTurnsKeepUserOrder() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            try await Self.broadcast(db, "x", 500, scope: "org-x")
            // u's first job sits behind X's broadcast; its second is Y's; v has only Y's.
            let first = try #require(
                try await db.enqueueJSON(
                    "u",
                    "a_bulk",
                    payload: #"{"title": "1", "body": "first"}"#,
                    options: #"{"scope": "org-x"}"#
                )
            )
            let second = try #require(
                try await db.enqueueJSON(
                    "u",
                    "a_bulk",
                    payload: #"{"title": "2", "body": "second"}"#,
                    options: #"{"scope": "org-y"}"#
                )
            )
            let other = try #require(
                try await db.enqueueJSON(
                    "v",
                    "a_bulk",
                    payload: #"{"title": "v", "body": "v"}"#,
                    options: #"{"scope": "org-y"}"#
                )
            )
            let outbox = db.outbox()
            let batch = try await outbox.claim(limit: 50, lease: .seconds(60), now: Date() + 1)
            let ids = Set(batch.jobs.map(\.id))
            #expect(ids.contains(other))
            #expect(!ids.contains(second) && !ids.contains(first))
            // Claimed until u's first job comes round: then both, in order.
            var order: [Int64] = []
            for _ in 0..<20 {
                let b = try await outbox.claim(limit: 50, lease: .seconds(60), now: Date() + 1)
                order += b.jobs.filter { $0.userID == "u" }.map(\.id)
                if b.jobs.isEmpty { break }
            }
            #expect(order == [first, second])
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

    @Test(
        "2 herald run × defaults: while one organisation's 20,000-job flood drains, app B's jobs and another organisation's of app A are sent at once"
    )
    func floodDoesNotHoldBackAnotherApp() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.seed(db)
            // Local-fallback devices: what is measured is the claims, not a provider.
            try await db.exec(
                """
                SELECT herald.register_device('a' || g, 'local', 'a-tok-' || g) FROM generate_series(0, 1999) g;
                SELECT herald.register_device('b' || g, 'local', 'b-tok-' || g) FROM generate_series(0, 19) g;
                SELECT herald.register_device('y' || g, 'local', 'y-tok-' || g) FROM generate_series(0, 19) g;
                """
            )
            for _ in 0..<10 {
                try await Self.broadcast(db, "a", 2_000, scope: "org-x")
            }
            let env = ["HERALD_DATABASE_URL": db.url, "HERALD_HTTP_PORT": "0", "HERALD_LOG_LEVEL": "warning"]
            let workers = (0..<2).map {
                WorkerProcess(name: "fair-\($0)-\(db.name)", environment: env, directory: ChaosTests.logDirectory())
            }
            for w in workers { try w.start() }
            defer { for w in workers { w.signal(SIGKILL) } }
            // The flood is under way; then app B's jobs, one statement each.
            #expect(
                try await waitUntil(.seconds(60)) {
                    try await db.int("SELECT count(*) FROM herald.delivery_log WHERE category = 'a_bulk'") > 0
                }
            )
            for i in 0..<20 {
                _ = try await db.enqueueJSON("b\(i)", "b_msg", payload: #"{"title": "Hi", "body": "From app B"}"#)
                _ = try await db.enqueueJSON(
                    "y\(i)",
                    "a_bulk",
                    payload: #"{"title": "Hi", "body": "From org Y"}"#,
                    options: #"{"scope": "org-y"}"#
                )
            }
            let sent = try await waitUntil(.seconds(60)) {
                try await db.int(
                    """
                    SELECT count(*) FROM herald.delivery_log
                    WHERE (category = 'b_msg' OR user_id LIKE 'y%') AND outcome = 'accepted'
                    """
                ) == 40
            }
            let floodLeft = try await db.int("SELECT count(*) FROM herald.outbox WHERE user_id LIKE 'a%'")
            #expect(sent)
            // Without turns, B's and Y's jobs waited behind the whole flood (none of it left by then).
            #expect(floodLeft > 5_000, "org X still had \(floodLeft) jobs queued when B's and Y's last one was sent")
            #expect(
                try await waitUntil(.seconds(300)) {
                    try await db.int("SELECT count(*) FROM herald.outbox") == 0
                }
            )
            for w in workers { await w.stop() }
            let outcomes = try await db.rows(
                """
                SELECT event || ' ' || coalesce(outcome, '') || ' ' || coalesce(reason, '') || ': ' || count(DISTINCT job_id)
                FROM herald.delivery_log GROUP BY event, outcome, reason ORDER BY 1
                """
            ).compactMap { $0[0] }
            #expect(try await db.int("SELECT count(*) FROM herald.local_notifications") == 20_040, "\(outcomes)")
            #expect(try await db.int("SELECT count(DISTINCT job_id) FROM herald.local_notifications") == 20_040)
        }
    }
}
