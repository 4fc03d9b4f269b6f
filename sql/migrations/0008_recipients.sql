-- Herald 0008: one row per recipient, leased like a job, so one batch at a time holds a user.
--
-- Per-user policy (rate limits, scope quotas, coalescing, backlog summaries, the badge) reads
-- what earlier batches for the same user wrote at their ack. Two batches holding the same user
-- at once (two replicas, or two batches in flight in one) each read the history without the
-- other's sends, and together break the limit. A claim therefore leases the recipient row as
-- well as the jobs: a user whose row is leased is skipped by every other claim until the ack
-- that releases it, in the same transaction that writes the inbox and history. `turn` grows
-- with every hold and release; a claim whose snapshot predates the row's current turn does not
-- take it (it would read history older than the last release). Rows are created by a
-- statement trigger on the outbox (sql/functions/03_enqueue.sql), so every path that inserts
-- a job (enqueue, summaries, replays) has its recipient.

CREATE TABLE herald.recipients (
    user_id          text PRIMARY KEY,
    lease_owner      text,
    lease_expires_at timestamptz,
    turn             bigint NOT NULL DEFAULT 0
);
-- Lease renewal and shutdown find a worker's recipients without reading the table.
CREATE INDEX recipients_held ON herald.recipients (lease_owner) WHERE lease_owner IS NOT NULL;

INSERT INTO herald.recipients (user_id) SELECT DISTINCT user_id FROM herald.outbox ON CONFLICT DO NOTHING;

-- A claim finds a user's first due job it did not take (its jobs go in order) with one probe.
CREATE INDEX outbox_user_due ON herald.outbox (user_id, priority, run_at, id) WHERE state = 'pending';
