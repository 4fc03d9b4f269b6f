-- Herald 0025: the outbox's statistics from a small sample.
--
-- The maintenance leader analyzes the outbox after a burst (`herald.refresh_queue_statistics`,
-- sql/functions/10_statistics.sql), so that nothing is planned from the statistics of the drained
-- queue, and autovacuum re-analyzes it as it churns. At PostgreSQL's default target ANALYZE
-- samples 30,000 rows: 150–215 ms for a 50,000-job backlog at rest, and in the middle of a drain,
-- whose every connection then plans its statements again (an ANALYZE invalidates them). What
-- those plans need from the statistics is the size of the queue and which of its few states,
-- priorities and categories are common: a sample of 3,000 rows says as much. A target of 10 on
-- every column still analyzed (migration 0018 keeps the wide ones out) and on the scope
-- expression of `outbox_claim_scope` (an index recreated later must set it again): the same
-- ANALYZE takes 14 ms (docs/benchmarks.md, "The outbox's statistics from a small sample").
-- The hot path's statements do not depend on them either way (each per-row lookup is a LATERAL
-- index probe, and they run on generic plans).
ALTER TABLE herald.outbox
    ALTER COLUMN id SET STATISTICS 10,
    ALTER COLUMN user_id SET STATISTICS 10,
    ALTER COLUMN category SET STATISTICS 10,
    ALTER COLUMN priority SET STATISTICS 10,
    ALTER COLUMN dedup_key SET STATISTICS 10,
    ALTER COLUMN state SET STATISTICS 10,
    ALTER COLUMN run_at SET STATISTICS 10,
    ALTER COLUMN expires_at SET STATISTICS 10,
    ALTER COLUMN attempt SET STATISTICS 10,
    ALTER COLUMN max_attempts SET STATISTICS 10,
    ALTER COLUMN lease_owner SET STATISTICS 10,
    ALTER COLUMN lease_expires_at SET STATISTICS 10,
    ALTER COLUMN replay_of SET STATISTICS 10,
    ALTER COLUMN created_at SET STATISTICS 10,
    ALTER COLUMN summary_key SET STATISTICS 10,
    ALTER COLUMN summary_count SET STATISTICS 10,
    ALTER COLUMN alerted_at SET STATISTICS 10,
    ALTER COLUMN paused_run_at SET STATISTICS 10,
    ALTER COLUMN app_id SET STATISTICS 10,
    ALTER COLUMN retrying SET STATISTICS 10,
    ALTER COLUMN bucket SET STATISTICS 10;
ALTER INDEX herald.outbox_claim_scope ALTER COLUMN 3 SET STATISTICS 10;
