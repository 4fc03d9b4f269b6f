-- Herald 0002: what the policy engine needs: open summaries, recent sends, badge sync.

-- A summary job is an ordinary outbox row with summary_key set: folded jobs increment its
-- count (and, for trailing categories, push its due time back). At most one is open (pending)
-- per user, category and key.
ALTER TABLE herald.outbox
    ADD COLUMN summary_key text,
    ADD COLUMN summary_count int NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX outbox_open_summary ON herald.outbox (user_id, category, summary_key)
    WHERE summary_key IS NOT NULL AND state = 'pending';
-- Backlog per recipient ("more than N pending gets one summary"). Partial: claimed and finished
-- rows leave it, so only enqueues and retries pay for it.
CREATE INDEX outbox_pending_user ON herald.outbox (user_id, category) WHERE state = 'pending';

-- The inbox doubles as the send history that rate limits and coalescing windows read.
ALTER TABLE herald.inbox
    ADD COLUMN coalesce_key text,
    ADD COLUMN scope text,
    ADD COLUMN summary_count int NOT NULL DEFAULT 0;
CREATE INDEX inbox_recent ON herald.inbox (user_id, created_at DESC);

-- Push bodies can be cut to a preview (seed 000: the first 100 characters of a message); NULL
-- sends the whole body. The inbox always keeps the full text.
ALTER TABLE herald.categories
    ADD COLUMN preview_chars int CHECK (preview_chars BETWEEN 10 AND 4000);

-- Badge and dismiss sync to the user's other devices: a silent, low-priority built-in category.
-- Mandatory with quiet hours bypassed: a silent sync disturbs no one and must not wait all night.
INSERT INTO herald.categories (name, app_id, priority, mandatory, quiet_hours, silent, max_attempts, ttl, backoff_base, backoff_cap)
VALUES ('herald.sync', 'herald', 'low', true, 'bypass', true, 3, '1 hour', '2 seconds', '1 minute')
ON CONFLICT (name) DO NOTHING;
