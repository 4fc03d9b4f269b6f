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
    /// `drained`: the outbox held such a burst before, drained (deleted) before the ANALYZE, so
    /// its statistics say its pages hold no rows at all, as after a real drain (the planner then
    /// reckons the outbox one row long however many pages it has grown to since).
    static func staleQueue(_ db: TestDatabase, drained: Bool = false) async throws {
        try await db.exec("ALTER TABLE herald.outbox SET (autovacuum_enabled = false)")
        try await db.addCategory("burst")
        try await db.exec(
            "SELECT herald.register_device('s' || g, 'expo', 'ExponentPushToken[s' || g || ']') FROM generate_series(1, \(users)) g"
        )
        let burst = """
            SELECT herald.enqueue_many(ARRAY(SELECT 's' || g FROM generate_series(1, \(users)) g), 'burst',
                                       '{"title": "Burst", "body": "b"}')
            FROM generate_series(1, \(jobsPerUser))
            """
        if drained {
            try await db.exec(burst)
            try await db.exec("DELETE FROM herald.outbox")
        }
        try await db.exec("ANALYZE herald.outbox")
        #expect(try await db.scalar("SELECT reltuples FROM pg_class WHERE oid = 'herald.outbox'::regclass") == "0")
        if drained {
            #expect(try await db.int("SELECT relpages FROM pg_class WHERE oid = 'herald.outbox'::regclass") > 0)
        }
        try await db.exec(burst)
    }

    /// The claim's plan for a batch of 100, five seconds ahead, run for real and rolled back.
    static func claimPlan(_ db: TestDatabase, options: String) async throws -> JSONValue {
        let claim = try #require(OutboxStatements.hotPath.first { $0.name.hasPrefix("herald_claim_v") })
        let now = Date().timeIntervalSince1970 + 5
        return try await db.explain(
            claim,
            binds: ["w", "\(now)", "60", "100", "3", "0", "0"],
            options: options,
            around: ("BEGIN", "ROLLBACK")
        )
    }

    @Test(
        "the claim's gap check reads each claimed user's queue once, not the whole queue, while the statistics say the outbox is empty"
    )
    func gapCheckStaysAProbePerUser() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.staleQueue(db)
            let json = try await Self.claimPlan(db, options: "ANALYZE, FORMAT JSON, VERBOSE")
            let probes = json.planScans.filter { $0["Relation Name"]?.string == "outbox" && $0["Alias"]?.string == "e" }
            #expect(!probes.isEmpty, "no gap probe in the plan")
            // The probe for an earlier due job of the user (claim v39: the scan's, before the
            // lock, one per user met). Rows the probe node produced over all its loops: one per
            // user with a gap at most (none here), against the whole queue per user when it ran
            // as a join's inner walk.
            let produced = probes.reduce(0) {
                $0 + Int(($1["Actual Rows"]?.number ?? 0) * ($1["Actual Loops"]?.number ?? 0))
            }
            let loops = probes.reduce(0) { $0 + Int($1["Actual Loops"]?.number ?? 0) }
            #expect(produced <= 100, "gap probe produced \(produced) rows in \(loops) loops")
            #expect(loops <= 100, "gap probe ran \(loops) times for a claim of 100")
            // The user runs' range (claim v38) is one probe per user met, each producing that
            // user's run, not a walk of the queue.
            let runs = json.planScans.filter { $0["Relation Name"]?.string == "outbox" && $0["Alias"]?.string == "ur" }
            #expect(!runs.isEmpty, "no user-run probe in the plan")
            let runRows = runs.reduce(0) {
                $0 + Int(($1["Actual Rows"]?.number ?? 0) * ($1["Actual Loops"]?.number ?? 0))
            }
            let runLoops = runs.reduce(0) { $0 + Int($1["Actual Loops"]?.number ?? 0) }
            #expect(
                runLoops <= 100 && runRows <= 100 + Self.jobsPerUser,
                "user runs: \(runRows) rows in \(runLoops) loops"
            )

            // And the claim itself takes its batch: the first users' runs (all three jobs of each,
            // the last user's cut by the batch), in order.
            let batch = try await db.outbox().claim(limit: 100, lease: .seconds(60), now: Date() + 5)
            #expect(batch.jobs.count == 100)
            #expect(Set(batch.jobs.map(\.userID)).count == (100 + Self.jobsPerUser - 1) / Self.jobsPerUser)
        }
    }

    @Test(
        "the claim locks its candidates' job rows one ctid each, not by walking the queue, while the statistics say the outbox is empty"
    )
    func jobLocksStayOnTheCandidates() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.staleQueue(db, drained: true)
            let json = try await Self.claimPlan(db, options: "ANALYZE, FORMAT JSON")
            let locks = json.planScans.filter { $0["Relation Name"]?.string == "outbox" && $0["Alias"]?.string == "x" }
            #expect(!locks.isEmpty, "no job-row lock in the plan")
            for scan in locks {
                // Rows the lock's scan read over all its loops: one per candidate (100), against
                // the whole queue (900 here) when it walked an index with the ctids as a filter.
                #expect(scan["Node Type"]?.string == "Tid Scan")
                #expect(
                    scan.rowsRead <= 100,
                    "\(scan["Node Type"]?.string ?? "scan") of the job rows read \(scan.rowsRead) rows for a claim of 100"
                )
            }
        }
    }

    @Test(
        "the ack reaches its batch's rows by their ids, not by walking the queue, while the statistics say the outbox is empty"
    )
    func ackStaysOnItsBatch() async throws {
        try await TestDatabase.withFresh { db in
            try await Self.staleQueue(db, drained: true)
            let outbox = db.outbox("w")
            let batch = try await outbox.claim(limit: 100, lease: .seconds(60), now: Date() + 5)
            #expect(batch.jobs.count == 100)
            // A third delivered, a third retried (one device accepted), a third dead-lettered.
            let ids = batch.jobs.map(\.id).sorted()
            let done = Array(ids[0..<34])
            let retried = Array(ids[34..<67])
            let dead = Array(ids[67...])
            let devices = Dictionary(
                uniqueKeysWithValues: try await db.rows("SELECT user_id, id FROM herald.devices").map {
                    ($0[0]!, Int64($0[1]!)!)
                }
            )
            let users = Dictionary(uniqueKeysWithValues: batch.jobs.map { ($0.id, $0.userID) })
            func device(_ id: Int64) -> Int64 { devices[users[id]!]! }
            let again = Date() + 600
            let settlements =
                done.map {
                    Settlement(
                        jobID: $0,
                        state: .done,
                        logs: [LogEntry(jobID: $0, event: .attempt, status: .done, attempt: 1)],
                        inbox: InboxEntry(title: "Burst", body: "b")
                    )
                }
                + retried.map {
                    Settlement(
                        jobID: $0,
                        state: .pending,
                        runAt: again,
                        error: .outcome(.timeout),
                        accepted: [device($0)],
                        logs: [LogEntry(jobID: $0, event: .attempt, status: .pending, attempt: 1)]
                    )
                }
                + dead.map {
                    Settlement(
                        jobID: $0,
                        state: .dead,
                        error: .attemptsExhausted(.unavailable),
                        logs: [LogEntry(jobID: $0, event: .dead, status: .dead, attempt: 1)]
                    )
                }

            // The ack's own plan, run for real and rolled back, with the same settlements as text.
            let list = { (ids: [Int64]) in "ARRAY[\(ids.map(String.init).joined(separator: ","))]::bigint[]" }
            let settled = try #require(
                try await db.scalar(
                    """
                    SELECT ARRAY(SELECT ROW(i, CASE WHEN i = ANY (\(list(retried))) THEN 'pending'
                                                    WHEN i = ANY (\(list(dead))) THEN 'dead' ELSE 'done' END,
                                            \(again.timeIntervalSince1970), 'timeout', false, false, false, NULL, NULL
                                           )::herald.settled_job FROM unnest(\(list(ids))) i)::text
                    """
                )
            )
            let accepted = try #require(
                try await db.scalar(
                    """
                    SELECT ARRAY(SELECT ROW(o.id, d.id)::herald.accepted_device FROM herald.outbox o
                                 JOIN herald.devices d ON d.user_id = o.user_id WHERE o.id = ANY (\(list(retried))))::text
                    """
                )
            )
            let ack = try #require(OutboxStatements.hotPath.first { $0.name.hasPrefix("herald_ack_v") })
            let json = try await db.explain(
                ack,
                binds: ["w", settled, accepted, "{}", "{}", "{}", "\(batch.bucket)"],
                options: "ANALYZE, FORMAT JSON",
                around: ("BEGIN", "ROLLBACK")
            )
            let scans = json.planScans.filter { $0["Relation Name"]?.string == "outbox" }
            #expect(!scans.isEmpty, "no outbox scan in the ack's plan")
            for scan in scans {
                // Rows each outbox scan read, kept or filtered out, over all its loops: the batch's
                // at most, against the whole queue (900 rows here) when the ack walked the primary key.
                #expect(
                    scan.rowsRead <= 100,
                    "\(scan["Node Type"]?.string ?? "scan") of outbox read \(scan.rowsRead) rows for an ack of 100"
                )
            }

            // And the ack itself, through the worker's own call, settles each job as told.
            #expect(try await outbox.acknowledge(settlements, jobs: batch.jobs, bucket: batch.bucket) == 100)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE id = ANY (\(list(done + dead)))") == 0)
            #expect(
                try await db.int("SELECT count(*) FROM herald.dead_letters WHERE job_id = ANY (\(list(dead)))")
                    == dead.count
            )
            let requeued = try await db.rows(
                """
                SELECT count(*), min(attempt), bool_and(cardinality(accepted_devices) = 1), min(last_error)
                FROM herald.outbox WHERE id = ANY (\(list(retried))) AND state = 'pending' AND lease_owner IS NULL
                  AND run_at > now() + interval '5 minutes'
                """
            )
            #expect(requeued == [["\(retried.count)", "1", "t", "timeout"]])
            #expect(
                try await db.int("SELECT count(*) FROM herald.inbox WHERE job_id = ANY (\(list(done)))") == done.count
            )
            #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 0)
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
                try await db.int("SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'herald.outbox'::regclass")
                    >= total
            }
            #expect(counted)
            let outbox = db.outbox()
            // Under the floor: not analyzed, whatever the statistics say.
            #expect(try await outbox.refreshQueueStatistics(floor: 10 * total) == false)
            #expect(try await db.scalar("SELECT reltuples FROM pg_class WHERE oid = 'herald.outbox'::regclass") == "0")
            #expect(try await outbox.refreshQueueStatistics(floor: 100) == true)
            #expect(
                try await db.int("SELECT reltuples::bigint FROM pg_class WHERE oid = 'herald.outbox'::regclass")
                    == total
            )
            // Now the statistics match: nothing to do.
            #expect(try await outbox.refreshQueueStatistics(floor: 100) == false)
        }
    }
}
