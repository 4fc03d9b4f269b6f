import DatabaseTestSupport
import Foundation
import Queue
import Testing

/// `herald.recipients.unread` is the badge the claim reads: it must equal the user's unread
/// inbox rows after every kind of change, whoever makes it.
@Suite("Unread counter")
struct UnreadCounterTests {
    /// Users whose counter differs from their unread rows, as "user: counter ≠ rows".
    static func drift(_ db: TestDatabase) async throws -> [String] {
        try await db.rows(
            """
            SELECT coalesce(r.user_id, i.user_id) || ': ' || coalesce(r.unread, 0) || ' ≠ ' || coalesce(i.n, 0)
            FROM herald.recipients r
            FULL JOIN (SELECT user_id, count(*) AS n FROM herald.inbox
                       WHERE read_at IS NULL AND deleted_at IS NULL GROUP BY user_id) i ON i.user_id = r.user_id
            WHERE coalesce(r.unread, 0) <> coalesce(i.n, 0)
            ORDER BY 1
            """
        ).compactMap { $0[0] }
    }

    /// Users whose recent sends (`recipients.sends`, migration 0016) differ from their
    /// `notification` inbox rows of the last day, newest 100, as "user: row ≠ inbox". Compared
    /// as sets: the row keeps them in the order they were written (transactions that overlap
    /// may commit out of time order), and the claim sorts them by time.
    static func sendsDrift(_ db: TestDatabase) async throws -> [String] {
        try await db.rows(
            """
            WITH s AS (
                SELECT u.user_id,
                       (SELECT array_agg(x ORDER BY x.at, x.category, x.coalesce_key, x.scope)
                        FROM unnest(r.sends) x) AS kept,
                       (SELECT array_agg(x ORDER BY x.at, x.category, x.coalesce_key, x.scope)
                        FROM unnest(herald.sends_from_inbox(u.user_id)) x) AS inbox
                FROM (SELECT user_id FROM herald.recipients UNION SELECT user_id FROM herald.inbox) u
                LEFT JOIN herald.recipients r ON r.user_id = u.user_id)
            SELECT user_id || ': ' || coalesce(kept::text, '{}') || ' ≠ ' || coalesce(inbox::text, '{}')
            FROM s WHERE kept IS DISTINCT FROM inbox
            ORDER BY 1
            """
        ).compactMap { $0[0] }
    }

    /// Neither the unread counter nor the recent sends drifted from the inbox.
    static func expectNoDrift(_ db: TestDatabase, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(try await drift(db) == [], sourceLocation: sourceLocation)
        #expect(try await sendsDrift(db) == [], sourceLocation: sourceLocation)
    }

    @Test(
        "several inserting statements in one transaction, one rolled back to a savepoint, one with the ack's setting: each kept row counted once, the setting's rows left to their writer"
    )
    func insertsInOneTransaction() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            // One string, several statements (each fires the insert trigger once), one connection.
            try await db.exec(
                """
                BEGIN;
                INSERT INTO herald.inbox (user_id, category, title, body) VALUES ('u1', 'chat', 'a', 'b'), ('u2', 'chat', 'a', 'b');
                SAVEPOINT s;
                INSERT INTO herald.inbox (user_id, category, title, body) VALUES ('u1', 'chat', 'gone', 'b');
                ROLLBACK TO SAVEPOINT s;
                INSERT INTO herald.inbox (user_id, category, title, body, read_at)
                VALUES ('u1', 'chat', 'c', 'b', NULL), ('u1', 'chat', 'r', 'b', now());
                COMMIT
                """
            )
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'u1'") == 2)
            #expect(try await db.int("SELECT cardinality(sends) FROM herald.recipients WHERE user_id = 'u1'") == 3)
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'u2'") == 1)
            try await Self.expectNoDrift(db)
            // A transaction that says it counts its own rows (as the worker's ack does) is left
            // alone by the insert trigger.
            try await db.exec(
                """
                BEGIN;
                SELECT set_config('herald.inbox_counted', 'on', true);
                INSERT INTO herald.inbox (user_id, category, title, body) VALUES ('u3', 'chat', 'a', 'b');
                COMMIT
                """
            )
            #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE user_id = 'u3'") == 0)
        }
    }

    @Test("every way the inbox changes keeps the counter equal to the unread rows")
    func everyPath() async throws {
        try await withRoleAndDatabase("unread_app") { app, db in
            let ids = try await db.seedTwoUsers(appRole: app)
            try await Self.expectNoDrift(db)
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'alice'") == 2)

            // Rows inserted read, unread and dismissed in one statement; a user new to Herald.
            try await db.exec(
                """
                INSERT INTO herald.inbox (user_id, category, title, body, read_at, deleted_at)
                VALUES ('alice', 'chat', 'r', 'b', now(), NULL), ('alice', 'chat', 'u', 'b', NULL, NULL),
                       ('carol', 'chat', 'u', 'b', NULL, NULL), ('carol', 'chat', 'd', 'b', NULL, now())
                """
            )
            try await Self.expectNoDrift(db)
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'carol'") == 1)

            // The inbox functions.
            _ = try await db.scalar("SELECT herald.mark_read('alice', ARRAY[\(ids.alice[0])]::bigint[])")
            try await Self.expectNoDrift(db)
            _ = try await db.scalar("SELECT herald.dismiss('bob', ARRAY[\(ids.bob[0])]::bigint[])")
            try await Self.expectNoDrift(db)
            _ = try await db.scalar("SELECT herald.mark_all_read('carol')")
            try await Self.expectNoDrift(db)
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'carol'") == 0)

            // An app's own UPDATE under row-level security: alice marks one row unread again.
            _ = try await db.asRole(
                app,
                user: "alice",
                "UPDATE herald.inbox SET read_at = NULL WHERE id = \(ids.alice[0])"
            )
            try await Self.expectNoDrift(db)
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'alice'") == 3)

            // Deletes (retention, erasure) and a user moved by hand.
            try await db.exec("DELETE FROM herald.inbox WHERE user_id = 'bob'")
            try await Self.expectNoDrift(db)
            try await db.exec("UPDATE herald.inbox SET user_id = 'dave' WHERE id = \(ids.alice[1])")
            try await Self.expectNoDrift(db)
            _ = try await db.scalar("SELECT herald.dismiss_all('alice')")
            try await Self.expectNoDrift(db)

            try await db.exec("TRUNCATE herald.inbox")
            try await Self.expectNoDrift(db)
            #expect(try await db.int("SELECT count(*) FROM herald.recipients WHERE unread <> 0") == 0)
        }
    }

    @Test("recent sends keep the newest 100 notifications of the last day, oldest first; alerts are not sends")
    func recentSendsWindow() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            // Three statements of 50 (the third pushes the first 50 out), an alert, and two
            // notifications from two days ago.
            for batch in 0..<3 {
                try await db.exec(
                    """
                    INSERT INTO herald.inbox (user_id, category, title, body, coalesce_key, scope)
                    SELECT 'u1', 'chat', 't' || g, 'b', 'k' || g, 'org-\(batch)' FROM generate_series(1, 50) g
                    """
                )
            }
            try await db.exec(
                "INSERT INTO herald.inbox (user_id, kind, category, title, body) VALUES ('u1', 'alert', 'chat', 'a', 'b')"
            )
            try await db.exec(
                "INSERT INTO herald.inbox (user_id, category, title, body, created_at) VALUES ('u2', 'chat', 'old', 'b', now() - interval '2 days'), ('u2', 'chat', 'new', 'b', now())"
            )
            #expect(try await db.int("SELECT cardinality(sends) FROM herald.recipients WHERE user_id = 'u1'") == 100)
            #expect(
                try await db.scalar("SELECT (sends[1]).scope FROM herald.recipients WHERE user_id = 'u1'") == "org-1"
            )
            #expect(
                try await db.scalar(
                    "SELECT (sends[100]).scope || '/' || (sends[100]).coalesce_key FROM herald.recipients WHERE user_id = 'u1'"
                ) == "org-2/k50"
            )
            #expect(try await db.int("SELECT cardinality(sends) FROM herald.recipients WHERE user_id = 'u2'") == 1)
            // A full list, then a send older than all of it (a transaction that committed late):
            // it is not among the newest 100, so the list keeps its 100 and stays sorted.
            try await db.exec(
                "INSERT INTO herald.inbox (user_id, category, title, body) SELECT 'u3', 'chat', 't' || g, 'b' FROM generate_series(1, 100) g"
            )
            try await db.exec(
                "INSERT INTO herald.inbox (user_id, category, title, body, created_at) VALUES ('u3', 'chat', 'late', 'b', now() - interval '1 hour')"
            )
            #expect(try await db.int("SELECT cardinality(sends) FROM herald.recipients WHERE user_id = 'u3'") == 100)
            #expect(
                try await db.int(
                    "SELECT count(*) FROM herald.recipients r, unnest(r.sends) x WHERE r.user_id = 'u3' AND x.at < now() - interval '30 minutes'"
                ) == 0
            )
            #expect(try await Self.sendsDrift(db) == [])
        }
    }

    @Test(
        "an inbox function for a user whose first inbox rows are still committing waits for them on the recipient row (a function that locked nothing then met, at its trigger, the row another locked first: 40P01)"
    )
    func lockWaitsForAFirstRow() async throws {
        try await TestDatabase.withFresh(poolSize: 3) { db in
            try await db.addCategory("chat")
            try await db.pool.withConnection { writer in
                // The user's first inbox rows and, by the inbox trigger, their recipient row: not committed.
                try await writer.execute("BEGIN", name: "test")
                try await writer.execute(
                    "INSERT INTO herald.inbox (user_id, category, title, body) VALUES ('fresh', 'chat', 't', 'b'), ('fresh', 'chat', 't', 'b')",
                    name: "test"
                )
                let reader = Task { try await db.scalar("SELECT herald.mark_all_read('fresh')") }
                // mark_all_read waits on the recipient row the writer is creating (before, it
                // found no row, locked nothing, and returned 0 at once).
                let waits = try await waitUntil(.seconds(10)) {
                    try await db.int(
                        """
                        SELECT count(*) FROM pg_stat_activity
                        WHERE query LIKE '%mark_all_read(''fresh'')%' AND wait_event_type = 'Lock'
                        """
                    ) == 1
                }
                try await writer.execute("COMMIT", name: "test")
                #expect(waits, "mark_all_read waits for the rows being committed")
                #expect(try await reader.value == "2", "both rows read, once committed")
            }
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'fresh'") == 0)
            try await Self.expectNoDrift(db)
            // A user with no inbox at all gets an empty row to lock, with the right counts.
            #expect(try await db.scalar("SELECT herald.dismiss_all('nobody')") == "0")
            #expect(
                try await db.int("SELECT unread + cardinality(sends) FROM herald.recipients WHERE user_id = 'nobody'")
                    == 0
            )
            try await Self.expectNoDrift(db)
        }
    }

    @Test("eight sessions inserting, reading, opening and dismissing the same users at once: no drift, no deadlock")
    func concurrentSessions() async throws {
        try await TestDatabase.withFresh(poolSize: 8) { db in
            try await db.addCategory("chat")
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for session in 0..<8 {
                    tasks.addTask {
                        for round in 0..<40 {
                            let user = "u\((session + round) % 5)"
                            switch (session + round) % 5 {
                            case 0, 1:
                                try await db.exec(
                                    """
                                    INSERT INTO herald.inbox (user_id, category, title, body)
                                    SELECT 'u' || (g % 5), 'chat', 't', 'b' FROM generate_series(\(round), \(round + 6)) g
                                    """
                                )
                            case 2:
                                _ = try await db.scalar("SELECT herald.mark_all_read('\(user)')")
                            case 3:
                                _ = try await db.scalar(
                                    """
                                    SELECT herald.record_action('\(user)', (SELECT min(id) FROM herald.inbox
                                        WHERE user_id = '\(user)' AND read_at IS NULL AND deleted_at IS NULL), 'opened')
                                    """
                                )
                            default:
                                _ = try await db.scalar(
                                    """
                                    SELECT herald.dismiss('\(user)', ARRAY(SELECT id FROM herald.inbox
                                        WHERE user_id = '\(user)' AND deleted_at IS NULL ORDER BY id DESC LIMIT 2))
                                    """
                                )
                            }
                        }
                    }
                }
                try await tasks.waitForAll()
            }
            #expect(
                try await db.int("SELECT count(*) FROM herald.inbox WHERE read_at IS NULL AND deleted_at IS NULL") > 0
            )
            try await Self.expectNoDrift(db)
        }
    }
}
