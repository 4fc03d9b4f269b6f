import DatabaseTestSupport
import Foundation
import HeraldCore
import Queue
import Testing

/// After the queue drains, VACUUM and ANALYZE record the outbox as empty, and a burst enqueued
/// then is planned from that until autovacuum's next ANALYZE (a minute by default). The claim's
/// gap check was then planned as a join that walked the whole queue once per claimed user (a
/// claim of 500 on 50,000 due jobs: 24 s, cancelled by the statement timeout again and again);
/// now it stays one probe per user, and the maintenance leader analyzes the outbox once a burst
/// has outgrown its statistics (`herald.refresh_queue_statistics`). Measured on the claim's own
/// plan, run for real (`EXPLAIN ANALYZE`, rolled back), in a database whose outbox autovacuum
/// leaves alone, so its statistics stay as stale as the test makes them.
@Suite("Stale statistics: a burst onto an outbox last analyzed empty")
struct StaleStatisticsTests {
    static let users = 300
    static let jobsPerUser = 3

    /// A fresh database whose outbox was analyzed empty, then given `users × jobsPerUser` due jobs.
    static func staleQueue(_ db: TestDatabase) async throws {
        try await db.exec("ALTER TABLE herald.outbox SET (autovacuum_enabled = false)")
        try await db.addCategory("burst")
        try await db.exec(
            "SELECT herald.register_device('s' || g, 'expo', 'ExponentPushToken[s' || g || ']') FROM generate_series(1, \(users)) g")
        try await db.exec("ANALYZE herald.outbox")
        #expect(try await db.scalar("SELECT reltuples FROM pg_class WHERE oid = 'herald.outbox'::regclass") == "0")
        try await db.exec(
            """
            SELECT herald.enqueue_many(ARRAY(SELECT 's' || g FROM generate_series(1, \(users)) g), 'burst',
                                       '{"title": "Burst", "body": "b"}')
            FROM generate_series(1, \(jobsPerUser))
            """)
    }

    @Test("the claim's gap check reads each claimed user's queue once, not the whole queue, while the statistics say the outbox is empty")
    func gapCheckStaysAProbePerUser() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.staleQueue(db)
            let claim = try #require(OutboxStatements.hotPath.first { $0.name.hasPrefix("herald_claim_v") })
            let now = Date().timeIntervalSince1970 + 5
            let json = try await db.explain(
                claim, binds: ["w", "\(now)", "60", "100", "3", "0", "0"],
                options: "ANALYZE, FORMAT JSON, VERBOSE", around: ("BEGIN", "ROLLBACK"))
            let probes = json.planScans.filter { $0["Relation Name"]?.string == "outbox" && $0["Alias"]?.string == "e" }
            #expect(!probes.isEmpty, "no gap probe in the plan")
            // Rows the probe node produced over all its loops: one per user with a gap at most
            // (none here), against the whole queue per user when it ran as a join's inner walk.
            let produced = probes.reduce(0) { $0 + Int(($1["Actual Rows"]?.number ?? 0) * ($1["Actual Loops"]?.number ?? 0)) }
            let loops = probes.reduce(0) { $0 + Int($1["Actual Loops"]?.number ?? 0) }
            #expect(produced <= 100, "gap probe produced \(produced) rows in \(loops) loops")
            #expect(loops <= 100, "gap probe ran \(loops) times for a claim of 100")

            // And the claim itself takes its batch: every user's first job, in order.
            let batch = try await db.outbox().claim(limit: 100, lease: .seconds(60), now: Date() + 5)
            #expect(batch.jobs.count == 100)
            #expect(Set(batch.jobs.map(\.userID)).count == 100)
        }
    }

    @Test("refresh_queue_statistics analyzes the outbox once a burst outgrows its statistics, and only then")
    func refreshFollowsTheBurst() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.staleQueue(db)
            let total = Self.users * Self.jobsPerUser
            // The cumulative statistics count the burst once its backend has reported them.
            try await db.exec("SELECT pg_stat_force_next_flush()")
            let counted = try await waitUntil(.seconds(20)) {
                try await db.int("SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'herald.outbox'::regclass") >= total
            }
            #expect(counted)
            let outbox = db.outbox()
            // Under the floor: not analyzed, whatever the statistics say.
            #expect(try await outbox.refreshQueueStatistics(floor: 10 * total) == false)
            #expect(try await db.scalar("SELECT reltuples FROM pg_class WHERE oid = 'herald.outbox'::regclass") == "0")
            #expect(try await outbox.refreshQueueStatistics(floor: 100) == true)
            #expect(try await db.int("SELECT reltuples::bigint FROM pg_class WHERE oid = 'herald.outbox'::regclass") == total)
            // Now the statistics match: nothing to do.
            #expect(try await outbox.refreshQueueStatistics(floor: 100) == false)
        }
    }
}
