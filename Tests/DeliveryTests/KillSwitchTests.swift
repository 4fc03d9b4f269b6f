import DatabaseTestSupport
import Delivery
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

/// The kill switch (sql/functions/08_control.sql): pause, resume and cancel what is pending, in
/// SQL, through the CLI, and while several `herald run` processes are sending.
@Suite("Kill switch: pause, resume, cancel_pending")
struct KillSwitchTests {
    static let payload = #"{"title":"Hello","body":"World"}"#

    /// Ids and held state of the pending jobs of `category`.
    static func held(_ db: TestDatabase, _ category: String) async throws -> (pending: Int, held: Int) {
        let row = try await db.rows(
            """
            SELECT count(*), count(*) FILTER (WHERE run_at = 'infinity' AND paused_run_at IS NOT NULL)
            FROM herald.outbox WHERE category = '\(category)' AND state = 'pending'
            """
        )[0]
        return (Int(row[0] ?? "") ?? -1, Int(row[1] ?? "") ?? -1)
    }

    @Test(
        "pause holds a category's pending and new jobs, claims skip it (a retry too), resume puts their due times back"
    )
    func pauseHoldsAndResumeReleases() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.addCategory("alarm", priority: "critical")
            for user in ["a", "b", "c"] { try await db.registerDevice(user, "local", "dev-\(user)") }
            for user in ["a", "b", "c"] { _ = try await db.enqueue(user, "chat") }
            _ = try await db.enqueue("a", "alarm")
            let dueTimes =
                "SELECT string_agg(run_at::text, ',' ORDER BY id) FROM herald.outbox WHERE category = 'chat' AND user_id <> 'a'"
            let due = try await db.scalar(dueTimes)

            #expect(try await db.int("SELECT herald.pause('chat')") == 3, "the pending jobs it covers")
            #expect(try await Self.held(db, "chat") == (3, 0), "claims skip them at once; holding comes next")
            #expect(try await db.outbox().holdPaused(chunk: 2) == 3, "in chunks, one transaction each")
            _ = try await db.enqueue("a", "chat")  // enqueued while paused: held from the start
            #expect(try await Self.held(db, "chat") == (4, 4))
            let consumer = db.consumer(
                providers: ProviderRegistry([
                    .local: LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
                ])
            )
            #expect(try await consumer.runOnce() == 1, "only the alarm goes out")
            #expect(try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'alarm'") == 0)

            // A retry that turned pending between two sweeps: the claim skips it all the same.
            try await db.exec(
                "UPDATE herald.outbox SET run_at = now() - interval '1 second', paused_run_at = NULL WHERE id = (SELECT min(id) FROM herald.outbox WHERE category = 'chat')"
            )
            #expect(try await consumer.runOnce() == 0)
            #expect(try await db.int("SELECT herald.hold_paused()") == 1, "the leader's sweep holds it")

            #expect(try await db.int("SELECT herald.resume('chat')") == 4)
            #expect(try await db.int("SELECT herald.release_unpaused()") == 4)
            #expect(try await Self.held(db, "chat") == (4, 0))
            #expect(try await db.scalar(dueTimes) == due, "b's and c's due times are back")
            #expect(try await consumer.runOnce() == 4)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 0)
            let audit = try await db.rows(
                "SELECT action, actor, target->>'category', jobs FROM herald.audit_log ORDER BY id"
            )
            #expect(audit.map { $0[0] ?? "" } == ["pause", "resume"])
            #expect(audit.allSatisfy { $0[1] == "postgres" && $0[2] == "chat" })
            #expect(audit.map { $0[3] ?? "" } == ["3", "4"])
        }
    }

    @Test("bad targets get a clear error and change nothing")
    func badTargets() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            let cases: [(String, String)] = [
                ("SELECT herald.pause('nope')", "23503"),
                ("SELECT herald.pause(app_id => 'nope')", "23503"),
                ("SELECT herald.pause('chat', 'default')", "22023"),
                ("SELECT herald.pause('chat', until => now() - interval '1 minute')", "22008"),
                ("SELECT herald.cancel_pending()", "22023"),
                ("SELECT herald.cancel_pending('nope')", "23503"),
            ]
            for (sql, state) in cases {
                let error = await #expect(throws: PostgresError.self) { try await db.exec(sql) }
                #expect(error?.sqlState == state, "\(sql)")
            }
            #expect(try await db.int("SELECT count(*) FROM herald.pauses") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.audit_log") == 0)
        }
    }

    @Test(
        "the pause gate: a pause waits for a claim that read the pauses without it; a claim asking meanwhile waits for the pause's commit and skips the category; a pause left uncommitted makes claims take nothing, without an error"
    )
    func pauseGate() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            try await db.addCategory("chat")
            try await db.registerDevice("a", "local", "dev-a")
            try await db.registerDevice("b", "local", "dev-b")
            let bulk = try #require(try await db.enqueue("a", "bulk"))
            let chat = try #require(try await db.enqueue("b", "chat"))
            let waitingOnGate = """
                SELECT count(*) FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND pid <> pg_backend_pid()
                  AND datname = current_database()
                """
            let unlockedRecipients = "SELECT count(*) FROM (SELECT FROM herald.recipients FOR UPDATE SKIP LOCKED) r"
            try await db.pool.withConnection { c in
                // A claim in flight that read the pauses before this pause: it holds the gate shared.
                try await c.execute("BEGIN; SELECT herald.paused_for_claim()", name: "test")
                let pause = Task { try await db.int("SELECT herald.pause('bulk')") }
                #expect(
                    try await waitUntil(.seconds(30), poll: .milliseconds(10)) { try await db.int(waitingOnGate) == 1 },
                    "the pause waits for the claim that did not see it"
                )
                // A claim asking now waits for the pause's commit, then sees it.
                let during = Task {
                    try await db.outbox().claim(limit: 10, lease: .seconds(60), now: Date() + 1).jobs.map(\.id)
                }
                #expect(
                    try await waitUntil(.seconds(30), poll: .milliseconds(10)) { try await db.int(waitingOnGate) == 2 },
                    "the claim waits behind the pause"
                )
                #expect(try await db.int(unlockedRecipients) == 2, "it waits before its scan locks any recipient")
                try await c.execute("COMMIT", name: "test")
                #expect(try await pause.value == 1, "returns once the claim in flight committed")
                #expect(try await during.value == [chat], "bulk is paused, chat flows")
            }
            #expect(try await db.int("SELECT herald.resume('bulk')") == 0, "nothing was held yet")
            // A pause inside a transaction left open: claims wait for it 2 s at most, then take nothing.
            try await db.pool.withConnection { c in
                try await c.execute("BEGIN; SELECT herald.pause('bulk')", name: "test")
                let claim = Task { try await db.outbox().claim(limit: 10, lease: .seconds(60), now: Date() + 1).jobs }
                #expect(
                    try await waitUntil(.seconds(30), poll: .milliseconds(10)) { try await db.int(waitingOnGate) == 1 }
                )
                #expect(try await db.int(unlockedRecipients) == 2, "no recipient locked while it waits")
                #expect(try await claim.value.isEmpty)
                #expect(
                    try await db.int("SELECT count(*) FROM herald.recipients WHERE lease_owner IS NOT NULL") == 1,
                    "b's, from the first claim"
                )
                try await c.execute("ROLLBACK", name: "test")
            }
            try await PerRecipientTests.expectNextClaim(db, takes: [bulk])  // the pause rolled back: bulk flows
        }
    }

    @Test("an app's pause and a pause of everything; each resume lifts only its own; `until` ends a pause by itself")
    func appAndGlobalPausesAndExpiry() async throws {
        try await TestDatabase.withFresh { db in
            try await db.exec(
                """
                INSERT INTO herald.categories (name, app_id) VALUES ('a_news', 'app-a'), ('a_chat', 'app-a'), ('b_news', 'app-b')
                """
            )
            for category in ["a_news", "a_chat", "b_news"] { _ = try await db.enqueue("u", category) }
            #expect(try await db.int("SELECT herald.pause(app_id => 'app-a')") == 2)
            #expect(try await db.int("SELECT herald.hold_paused()") == 2)
            #expect(try await db.int("SELECT herald.pause()") == 3, "everything: b_news too")
            #expect(try await db.int("SELECT herald.hold_paused()") == 1)
            #expect(try await db.int("SELECT herald.resume()") == 1, "b_news; app-a stays paused")
            #expect(try await db.int("SELECT herald.release_unpaused()") == 1)
            #expect(try await Self.held(db, "a_news").held == 1)
            #expect(try await Self.held(db, "b_news").held == 0)
            #expect(try await db.int("SELECT herald.pause('b_news', until => now() + interval '1 hour')") == 1)
            #expect(try await db.int("SELECT herald.hold_paused()") == 1)

            // `until` passes: the maintenance leader's sweep releases the jobs and drops the pause.
            try await db.exec("UPDATE herald.pauses SET until = now() - interval '1 second' WHERE category = 'b_news'")
            let maintenance = MaintenanceService(
                outbox: db.outbox("leader"),
                configuration: MaintenanceService.Configuration(),
                logger: TestDatabase.logger
            )
            await maintenance.sweepPauses()
            #expect(try await Self.held(db, "b_news") == (1, 0))
            #expect(try await db.int("SELECT count(*) FROM herald.pauses") == 1, "only app-a's")
            #expect(try await db.int("SELECT herald.resume(app_id => 'app-a')") == 2)
            await maintenance.sweepPauses()
            #expect(
                try await db.int(
                    "SELECT count(*) FROM herald.outbox WHERE paused_run_at IS NOT NULL OR run_at = 'infinity'"
                ) == 0
            )
        }
    }

    @Test(
        "cancel_pending cancels a 100,000-job broadcast in one statement: each logged, dedup keys freed, the rest untouched"
    )
    func cancelABroadcast() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("broadcast", ttl: "1 day")
            try await db.addCategory("chat")
            let n = 100_000
            try await db.exec(
                """
                SELECT herald.enqueue_many(ARRAY(SELECT 'u' || g FROM generate_series(1, \(n)) g), 'broadcast',
                                           '\(Self.payload)', '{"dedupKey": "promo-1", "scope": "org-1"}')
                """
            )
            _ = try await db.enqueue("u1", "broadcast", options: #"{"scope":"org-2"}"#)
            _ = try await db.enqueue("u1", "chat", options: #"{"scope":"org-1"}"#)
            #expect(try await db.int("SELECT herald.cancel_pending('broadcast', 'org-1')") == n)
            #expect(
                try await db.int(
                    "SELECT count(*) FROM herald.delivery_log WHERE event = 'cancelled' AND reason = 'cancelled'"
                ) == n
            )
            #expect(try await db.int("SELECT count(*) FROM herald.dedup_keys WHERE dedup_key = 'promo-1'") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.outbox") == 2, "org-2's broadcast and the chat stay")
            #expect(
                try await db.scalar("SELECT jobs::text FROM herald.audit_log WHERE action = 'cancel_pending'") == "\(n)"
            )
            // The key is free again: the same broadcast can be sent anew.
            #expect(try await db.enqueue("u7", "broadcast", options: #"{"dedupKey":"promo-1"}"#) != nil)
        }
    }

    @Test(
        "two herald run processes: a pause stops the category within one claim interval, others flow, resume finishes it, none lost or doubled"
    )
    func pauseWhileReplicasSend() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("bulk")
            try await db.addCategory("chat")
            let users = 2_000
            let perUser = 10
            try await db.exec(
                "SELECT herald.register_device('u' || g, 'local', 'tok-' || g) FROM generate_series(1, \(users)) g"
            )
            for round in 1...perUser {
                try await db.exec(
                    """
                    SELECT herald.enqueue_many(ARRAY(SELECT 'u' || g FROM generate_series(1, \(users)) g), 'bulk',
                                               '{"title": "Bulk \(round)", "body": "b"}')
                    """
                )
            }
            let total = users * perUser
            let env = ["HERALD_DATABASE_URL": db.url, "HERALD_HTTP_PORT": "0", "HERALD_LOG_LEVEL": "warning"]
            let workers = (0..<2).map {
                WorkerProcess(name: "pause-\($0)-\(db.name)", environment: env, directory: ChaosTests.logDirectory())
            }
            for w in workers { try w.start() }
            defer { for w in workers { w.signal(SIGKILL) } }
            let started = try await waitUntil(.seconds(60)) {
                try await db.int("SELECT count(*) FROM herald.local_notifications") >= 500
            }
            #expect(started)

            let (status, output) = try await HeraldBinary.run(
                ["pause", "--category", "bulk", "--actor", "oncall@example.com", "--json"],
                environment: ["HERALD_DATABASE_URL": db.url]
            )
            #expect(status == 0, "\(output)")
            // Batches already claimed finish; after that, nothing more of the category is claimed.
            let settled = try await waitUntil(.seconds(30)) {
                try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'bulk' AND state = 'running'")
                    == 0
            }
            #expect(settled)
            let sentAtPause = try await db.int("SELECT count(*) FROM herald.local_notifications")
            #expect(sentAtPause < total, "the pause came mid-drain")
            _ = try await db.enqueue("u1", "chat")  // other categories keep flowing
            let chatSent = try await waitUntil(.seconds(30)) {
                try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'chat'") == 0
            }
            #expect(chatSent)
            try await Task.sleep(for: .seconds(2))  // several claim intervals with work waiting
            #expect(
                try await db.int("SELECT count(*) FROM herald.local_notifications WHERE title LIKE 'Bulk%'")
                    == sentAtPause
            )
            #expect(
                try await db.int("SELECT count(*) FROM herald.outbox WHERE category = 'bulk' AND run_at <> 'infinity'")
                    == 0
            )

            let (_, statusJSON) = try await HeraldBinary.run(
                ["status", "--json"],
                environment: ["HERALD_DATABASE_URL": db.url]
            )
            let object = try #require(try JSONSerialization.jsonObject(with: Data(statusJSON.utf8)) as? [String: Any])
            let paused = try #require(object["paused"] as? [[String: Any]])
            #expect(
                paused.first?["category"] as? String == "bulk"
                    && paused.first?["paused_by"] as? String == "oncall@example.com"
            )
            #expect(object["paused_jobs"] as? Int == total - sentAtPause)

            let (resumed, resumeOutput) = try await HeraldBinary.run(
                ["resume", "--category", "bulk", "--json"],
                environment: ["HERALD_DATABASE_URL": db.url]
            )
            #expect(resumed == 0, "\(resumeOutput)")
            let drained = try await waitUntil(.seconds(120)) {
                try await db.int("SELECT count(*) FROM herald.outbox") == 0
            }
            #expect(drained)
            for w in workers { await w.stop() }
            #expect(
                try await db.int("SELECT count(*) FROM herald.local_notifications WHERE title LIKE 'Bulk%'") == total
            )
            #expect(
                try await db.int(
                    "SELECT count(DISTINCT job_id) FROM herald.local_notifications WHERE title LIKE 'Bulk%'"
                ) == total
            )
        }
    }
}
