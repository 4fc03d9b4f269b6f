-- Herald 0008: one row per recipient, so one batch at a time holds a user.
--
-- Per-user policy (rate limits, scope quotas, coalescing, backlog summaries, the badge) reads
-- what earlier batches for the same user wrote at their ack. Two batches holding the same user
-- at once (two replicas, or two batches in flight in one) each read the history without the
-- other's sends, and together break the limit. A claim therefore marks the user held
-- (`lease_owner`), and every other claim skips the user until the ack frees it, in the same
-- transaction that writes the inbox and history. `turn` grows with every hold and free; a
-- claim whose snapshot predates the row's current turn does not take it (it would read history
-- older than the last free).
--
-- A recipient is held exactly while its holder has jobs of that user `running`: the claim that
-- holds it marks them running in the same statement, the ack (or a shutdown release) that
-- settles them frees it, and after a crash it is freed once the reaper has returned them. So
-- the hold needs no lease of its own, and no index beyond the key: holding and freeing change
-- only unindexed columns, which PostgreSQL updates in place (HOT; hence the fill factor).
-- Rows are created by a statement trigger on the outbox (sql/functions/03_enqueue.sql), so
-- every path that inserts a job (enqueue, summaries, replays) has its recipient.
CREATE TABLE herald.recipients (
    user_id     text PRIMARY KEY,
    lease_owner text,
    turn        bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

INSERT INTO herald.recipients (user_id) SELECT DISTINCT user_id FROM herald.outbox ON CONFLICT DO NOTHING;
