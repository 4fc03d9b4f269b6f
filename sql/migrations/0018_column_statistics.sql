-- Herald 0018: column statistics only where a plan can use them.
--
-- Autovacuum re-analyzes a table once a tenth of its rows have changed, and `recipients`
-- changes on every claim and every ack (lease, turn, badge, recent sends): on a busy queue its
-- ANALYZE runs each time autovacuum comes round, and the outbox's nearly as often. ANALYZE
-- sorts a sample of every column, and the costly columns are ones no statement filters, joins
-- or groups on: `recipients.sends` (arrays of records, compared field by field) took a
-- 10,000-user table's ANALYZE from 33 ms to 224 ms once every list was full, and the jobs'
-- payloads and the inbox's text add their own sorts. `perf` put ANALYZE at 17 % of
-- PostgreSQL's CPU while the benchmark drained. A statistics target of 0 keeps a column out of
-- ANALYZE; the planner never asks about these. Every column a statement filters on (ids, users,
-- states, times, categories, buckets, a recipient's holder) keeps the default target.
-- Partitions created later take their parent's zero targets (herald.add_history_partitions,
-- sql/functions/09_history.sql).
ALTER TABLE herald.recipients
    ALTER COLUMN sends SET STATISTICS 0,
    ALTER COLUMN turn SET STATISTICS 0,
    ALTER COLUMN unread SET STATISTICS 0;

ALTER TABLE herald.outbox
    ALTER COLUMN payload SET STATISTICS 0,
    ALTER COLUMN options SET STATISTICS 0,
    ALTER COLUMN accepted_devices SET STATISTICS 0,
    ALTER COLUMN last_error SET STATISTICS 0,
    ALTER COLUMN summarized_ids SET STATISTICS 0,
    ALTER COLUMN summarized_titles SET STATISTICS 0;

ALTER TABLE herald.inbox
    ALTER COLUMN title SET STATISTICS 0,
    ALTER COLUMN body SET STATISTICS 0,
    ALTER COLUMN route SET STATISTICS 0,
    ALTER COLUMN metadata SET STATISTICS 0;

ALTER TABLE herald.local_notifications
    ALTER COLUMN title SET STATISTICS 0,
    ALTER COLUMN body SET STATISTICS 0,
    ALTER COLUMN subtitle SET STATISTICS 0,
    ALTER COLUMN route SET STATISTICS 0,
    ALTER COLUMN data SET STATISTICS 0;

ALTER TABLE herald.delivery_log
    ALTER COLUMN worker SET STATISTICS 0,
    ALTER COLUMN latency_ms SET STATISTICS 0;
