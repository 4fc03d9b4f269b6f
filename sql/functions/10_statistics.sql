-- Planner statistics Herald keeps itself, beside autovacuum's. Applied by every `herald migrate`
-- after the migrations, as CREATE OR REPLACE; callable by the worker and admin roles
-- (herald.apply_grants, run last by 99_grants.sql).

-- The outbox's statistics, kept up with a burst (the maintenance leader, every reap interval).
-- The planner sizes the outbox from pg_class.reltuples, which VACUUM and ANALYZE set. After the
-- queue has drained they say the outbox is empty, and a burst enqueued then is planned as if it
-- still were until autovacuum's next ANALYZE (`autovacuum_naptime`, a minute by default): the
-- claim then walks every due job and its gap check reads the whole queue once per claimed user
-- (one claim of 500 on 50,000 due jobs: 24 s, so cancelled by the statement timeout, again and
-- again). This analyzes the outbox as soon as it holds four times the rows its statistics say,
-- and at least `floor`: a read of the cumulative statistics each call, an ANALYZE (about 0.1 s
-- for 50,000 jobs) only then. Statistics that say more rows than there are (a drained queue)
-- are left alone: they plan the claim as the ordered walk it is at any size. `SKIP_LOCKED`: a
-- vacuum running on the outbox is not waited for (the next call tries again). SECURITY
-- DEFINER: ANALYZE needs the table's owner, and the leader may run as a least-privilege worker.
-- Returns whether it analyzed.
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
