import DatabaseTestSupport
import Delivery
import Dispatcher
import Foundation
import HeraldCore
import Providers
import Queue
import Testing

@Suite("Retention and explain")
struct MaintenanceTests {
    @Test("retention deletes history past 30 days and keeps the rest")
    func retention() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat", maxAttempts: 1)
            try await db.registerDevice("u", "local", "tablet")
            try await db.registerDevice("v", "apns", "broken")
            for _ in 0..<4 { try await db.enqueue("u", "chat") }
            try await db.enqueue("v", "chat")
            let provider = ScriptedProvider()
            provider.answer("broken", with: DeliveryOutcome(.payloadRejected, reason: .badPayload))
            let local = LocalFallbackProvider(store: PostgresLocalNotificationStore(pool: db.pool))
            let consumer = db.consumer(providers: ProviderRegistry([.local: local, .apns: provider]))
            #expect(try await consumer.runOnce() == 5)
            // The dead-lettered job (5) was also recorded locally as a fallback; age half of
            // everything past the 30-day retention.
            try await db.exec(
                """
                UPDATE herald.delivery_log SET created_at = now() - interval '31 days' WHERE job_id IN (1, 2);
                UPDATE herald.inbox SET created_at = now() - interval '31 days' WHERE job_id IN (1, 2);
                UPDATE herald.local_notifications SET created_at = now() - interval '31 days' WHERE job_id IN (1, 2);
                UPDATE herald.dead_letters SET failed_at = now() - interval '31 days';
                INSERT INTO herald.presence VALUES ('u', 'conversation:1', now() - interval '1 second');
                """
            )
            let maintenance = MaintenanceService(
                outbox: db.outbox("maint"),
                configuration: .init(),
                logger: TestDatabase.logger
            )
            await maintenance.prune()
            #expect(try await db.int("SELECT count(*) FROM herald.delivery_log WHERE job_id IN (1, 2)") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.delivery_log WHERE job_id IN (3, 4, 5)") >= 3)
            // Jobs 3 and 4 (delivered) and 5 (the fallback also shows in the inbox) remain.
            #expect(try await db.rows("SELECT job_id FROM herald.inbox ORDER BY job_id") == [["3"], ["4"], ["5"]])
            #expect(
                try await db.rows("SELECT job_id FROM herald.local_notifications ORDER BY id") == [["3"], ["4"], ["5"]]
            )
            #expect(try await db.int("SELECT count(*) FROM herald.dead_letters") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.presence") == 0)
        }
    }

    @Test("retention drops whole days past retention, creates the coming days, and keeps the badges right")
    func retentionByPartition() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            // Migrate created today's and the next 3 days' partitions of every history table.
            let days = """
                SELECT count(*) FROM herald.history_partitions()
                WHERE parent = 'inbox' AND lower_bound >= date_trunc('day', now(), 'UTC')
                """
            #expect(try await db.int(days) == 4)
            // Two old days, as a database running for months has them: one unread row each for u.
            for daysAgo in [40, 35] {
                try await db.exec(
                    """
                    DO $$
                    DECLARE d timestamptz := date_trunc('day', now(), 'UTC') - interval '\(daysAgo) days';
                    BEGIN
                        EXECUTE format('CREATE TABLE herald.%I PARTITION OF herald.inbox FOR VALUES FROM (%L) TO (%L)',
                                       'inbox_p' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + interval '1 day');
                        EXECUTE format('CREATE TABLE herald.%I PARTITION OF herald.delivery_log FOR VALUES FROM (%L) TO (%L)',
                                       'delivery_log_p' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + interval '1 day');
                    END $$;
                    INSERT INTO herald.inbox (user_id, category, title, body, created_at)
                    VALUES ('u', 'chat', 'old', 'b', now() - interval '\(daysAgo) days');
                    INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, created_at)
                    VALUES (1, 'u', 'chat', 'attempt', 'done', now() - interval '\(daysAgo) days');
                    """
                )
            }
            // Today: two unread rows, one read; and a row 31 days old in the default partition.
            try await db.exec(
                """
                INSERT INTO herald.inbox (user_id, category, title, body, read_at)
                VALUES ('u', 'chat', 'new', 'b', NULL), ('u', 'chat', 'new', 'b', NULL), ('u', 'chat', 'seen', 'b', now());
                INSERT INTO herald.inbox (user_id, category, title, body, created_at)
                VALUES ('u', 'chat', 'stray', 'b', now() - interval '31 days');
                """
            )
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'u'") == 5)
            #expect(try await db.int("SELECT count(*) FROM herald.inbox_default") == 1)

            let result = try await db.outbox("maint").pruneHistory(
                deliveryLog: .seconds(30 * 86_400),
                inbox: .seconds(30 * 86_400),
                localNotifications: .seconds(30 * 86_400),
                deadLetters: .seconds(30 * 86_400),
                limit: 100
            )
            #expect(result.partitionsDropped == 4)
            #expect(result.inbox == 1, "the default partition's stray row, deleted as a row")
            #expect(try await db.rows("SELECT title FROM herald.inbox ORDER BY id") == [["new"], ["new"], ["seen"]])
            #expect(try await db.int("SELECT count(*) FROM herald.delivery_log") == 0)
            #expect(try await db.int("SELECT count(*) FROM herald.history_partitions() WHERE upper_bound < now()") == 0)
            #expect(try await db.int("SELECT unread FROM herald.recipients WHERE user_id = 'u'") == 2)
            // Nothing left to do: the next pass drops, deletes and creates nothing.
            let again = try await db.outbox("maint").pruneHistory(
                deliveryLog: .seconds(30 * 86_400),
                inbox: .seconds(30 * 86_400),
                localNotifications: .seconds(30 * 86_400),
                deadLetters: .seconds(30 * 86_400),
                limit: 100
            )
            #expect(again.total + again.partitionsDropped + again.partitionsCreated == 0)
            #expect(try await db.int(days) == 4)
        }
    }

    @Test("ANALYZE leaves out the columns no plan reads, in every history partition made later too")
    func statisticsTargets() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.registerDevice("u", "local", "tablet")
            for _ in 0..<3 { try await db.enqueue("u", "chat") }
            let consumer = db.consumer(providers: ProviderRegistry([.local: ScriptedProvider()]))
            #expect(try await consumer.runOnce() == 3)
            for _ in 0..<2 { try await db.enqueue("u", "chat") }  // pending: the outbox has rows to sample
            // The recipient's recent sends and the inbox's text are not sampled; the keys are.
            try await db.exec("ANALYZE herald.recipients; ANALYZE herald.inbox; ANALYZE herald.outbox")
            let sampled = """
                SELECT string_agg(tablename || '.' || attname, ',' ORDER BY tablename, attname) FROM pg_stats
                WHERE schemaname = 'herald' AND (tablename, attname) IN
                    (('recipients', 'sends'), ('recipients', 'user_id'), ('inbox', 'body'), ('inbox', 'user_id'),
                     ('outbox', 'payload'), ('outbox', 'user_id'))
                """
            let found = try await db.scalar(sampled)
            #expect(found == "inbox.user_id,outbox.user_id,recipients.user_id")
            // A day partition the retention pass creates takes its parent's zero targets.
            let zeros = { (table: String) in
                """
                SELECT coalesce(string_agg(attname, ',' ORDER BY attname), '') FROM pg_attribute
                WHERE attrelid = '\(table)'::regclass AND attnum > 0 AND attstattarget = 0
                """
            }
            let last = try #require(
                try await db.scalar(
                    "SELECT partition FROM herald.history_partitions() WHERE parent = 'inbox' ORDER BY lower_bound DESC NULLS LAST LIMIT 1"
                )
            )
            try await db.exec("DROP TABLE herald.\(last)")
            #expect(try await db.int("SELECT herald.add_history_partitions('inbox')") == 1)
            let copied = try await db.rows(zeros("herald.\(last)"))
            #expect(copied == [["body,metadata,route,title"]])
            #expect(copied == (try await db.rows(zeros("herald.inbox"))))
        }
    }

    @Test(
        "the outbox is analyzed from a small sample (target 10, migration 0025): a burst's ANALYZE reads 3,000 rows, not 30,000, and still sees the queue's size"
    )
    func outboxSampledSmall() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            try await db.exec(
                """
                SELECT herald.enqueue_many(ARRAY(SELECT 'u' || g FROM generate_series(1, 40000) g), 'chat',
                                           '{"title": "t", "body": "b"}', '{}')
                """
            )
            try await db.exec("ANALYZE herald.outbox")
            // A histogram has one bound more than its target (the default target, 100, gives 101),
            // and the sampled columns a plan reads are still there.
            let bounds = try await db.rows(
                """
                SELECT attname, cardinality(histogram_bounds::text::text[])::text FROM pg_stats
                WHERE schemaname = 'herald' AND tablename = 'outbox' AND attname IN ('id', 'user_id')
                ORDER BY attname
                """
            )
            #expect(bounds == [["id", "11"], ["user_id", "11"]])
            // The size comes from the pages, not the sample: the planner knows the burst.
            let estimate = try await db.int(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = 'herald.outbox'::regclass"
            )
            #expect(abs(estimate - 40_000) < 2_000)
        }
    }

    @Test("explain tells a job's whole story and a user's latest decisions")
    func explain() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("sos", priority: "critical", maxAttempts: 2, base: "1 second", cap: "1 second")
            try await db.registerDevice("admin", "apns", "flaky")
            let provider = ScriptedProvider()
            provider.answer("flaky", with: DeliveryOutcome(.retry, reason: .unavailable))
            let id = try #require(try await db.enqueue("admin", "sos"))
            let clock = ManualClock()
            clock.advance(by: 1)
            let consumer = db.consumer(providers: ProviderRegistry([.apns: provider]), clock: clock)
            #expect(try await consumer.runOnce() == 1)
            let pending = try await db.outbox().explain(job: id)
            #expect(pending.map { $0[3] } == ["attempt", "now"])  // event column; "now" is where it stands
            #expect(pending.last?[6] == "pending")
            clock.advance(by: 2)
            #expect(try await consumer.runOnce() == 1)
            let story = try await db.outbox().explain(job: id)
            #expect(story.map { $0[3] }.filter { $0 != "dead_letter" } == ["attempt", "attempt", "dead"])
            #expect(story.contains { $0[3] == "dead_letter" && $0[7].contains("attempts_exhausted: unavailable") })
            let user = try await db.outbox().explain(user: "admin", limit: 10)
            #expect(user.first?[3] == "dead")
            #expect(user.count == 3)
        }
    }

    @Test("seed 000 req 8.4–8.5: mark read, delete one, clear all; each syncs the user's other devices")
    func inboxActions() async throws {
        try await TestDatabase.withFresh { db in
            try await db.addCategory("chat")
            let tablet = try await db.registerDevice("u", "local", "tablet")
            try await db.registerDevice("u", "apns", "phone")
            for _ in 0..<3 { try await db.enqueue("u", "chat") }
            let provider = ScriptedProvider()
            let consumer = db.consumer(providers: ProviderRegistry([.local: provider, .apns: provider]))
            #expect(try await consumer.runOnce() == 3)
            let ids = try await db.rows("SELECT id FROM herald.inbox ORDER BY id").compactMap { $0[0] }
            #expect(ids.count == 3)
            #expect(try await db.int("SELECT herald.mark_read('u', ARRAY[\(ids[0]), 999]::bigint[], \(tablet))") == 1)
            #expect(try await db.int("SELECT herald.dismiss('u', ARRAY[\(ids[1])]::bigint[])") == 1)
            #expect(try await db.int("SELECT herald.dismiss_all('u')") == 2)
            #expect(try await db.int("SELECT count(*) FROM herald.inbox WHERE deleted_at IS NULL") == 0)
            let syncs = try await db.rows(
                "SELECT payload->'metadata'->>'action', payload->'metadata'->>'ids', options->>'excludeDevice' FROM herald.outbox WHERE category = 'herald.sync' ORDER BY id"
            )
            #expect(syncs == [["read", ids[0], "\(tablet)"], ["dismiss", ids[1], nil], ["dismiss_all", "", nil]])
        }
    }
}
