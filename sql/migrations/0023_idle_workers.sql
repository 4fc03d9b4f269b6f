-- Herald 0023: the outbox wake-up only while a worker waits for it.
--
-- Every statement that inserted jobs sent `NOTIFY herald_outbox`. A transaction that notifies
-- takes one lock for the whole database at commit and holds it through its WAL flush, so the
-- backends' enqueuing transactions committed one at a time (pgbench, herald.enqueue: 1,445
-- transactions a second at 8 clients against 1,586 at one, 2,635 without the NOTIFY;
-- docs/benchmarks.md). A worker's batch slots need the wake-up only while they wait, after a
-- claim found nothing: they record that here (one row per consumer) and remove the row once a
-- claim finds work; herald.outbox_recipients (sql/functions/03_enqueue.sql) notifies only while
-- a row is present. Critical jobs still always notify (`critical`, the critical lane's wake-up).
--
-- No job is missed: a producer takes the wake gate's advisory lock (herald.wake_gate_key(),
-- shared) before it reads this table and holds it to its commit; a worker, after its row is
-- committed, claims again only once its exclusive `pg_try_advisory_xact_lock` on it succeeds, that is, once every producer that may have
-- read the table before the row was there has committed (or rolled back). Until then it polls
-- at short intervals. A row not refreshed for a minute is ignored (a worker that died waiting).
CREATE TABLE IF NOT EXISTS herald.idle_workers (
    worker text PRIMARY KEY,
    since timestamptz NOT NULL DEFAULT now()
);
