-- Planner statistics Herald keeps itself, beside autovacuum's. Applied by every `herald migrate`
-- after the migrations, as CREATE OR REPLACE; callable by the worker and admin roles
-- (herald.apply_grants, run last by 99_grants.sql).

-- The outbox's statistics, kept up with a burst (the maintenance leader, every reap interval).
-- After the queue drains, VACUUM and ANALYZE record the outbox as empty (`reltuples` 0), and a
-- burst enqueued then is planned from that until autovacuum's next ANALYZE, up to
-- `autovacuum_naptime` (a minute by default) away: docs/benchmarks.md, "Statistics from a
-- drained queue". This analyzes the outbox once it holds at least `floor` live rows and four
-- times what its statistics say: each call reads the cumulative statistics, and only then runs
-- an ANALYZE (about 20 ms for 50,000 jobs: a sample of 3,000 rows, migration 0025). Statistics
-- that say more rows than there are are left alone: they plan the claim as the ordered walk it
-- is at any size. `SKIP_LOCKED`: a vacuum running on the outbox is not waited for (the next
-- call tries again). SECURITY DEFINER: ANALYZE needs the table's owner, and the leader may run as
-- a least-privilege worker. Returns whether it analyzed.
CREATE OR REPLACE FUNCTION herald.refresh_queue_statistics(floor bigint DEFAULT 1000)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    live bigint;
    planned real;
BEGIN
    SELECT s.n_live_tup, c.reltuples INTO live, planned
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.relid = 'herald.outbox'::regclass;
    IF live IS NULL OR live < greatest(floor, 1) OR live <= 4 * greatest(planned, 0) THEN
        RETURN false;
    END IF;
    ANALYZE (SKIP_LOCKED) herald.outbox;
    RETURN true;
END
$$;
