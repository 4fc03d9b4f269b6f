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

-- Enqueues the silent sync that tells the user's other devices what was read or dismissed.
CREATE FUNCTION herald.enqueue_sync(user_id text, action text, ids bigint[], from_device bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    unread int;
BEGIN
    SELECT count(*) INTO unread FROM herald.inbox i
    WHERE i.user_id = enqueue_sync.user_id AND i.read_at IS NULL AND i.deleted_at IS NULL;
    PERFORM herald.enqueue(
        user_id, 'herald.sync',
        jsonb_build_object('title', 'sync', 'body', '', 'metadata', jsonb_build_object(
            'action', action, 'ids', array_to_string(ids, ','), 'badge', unread::text)),
        jsonb_build_object('silent', true, 'collapseId', left('herald-sync-' || md5(user_id), 64))
            || CASE WHEN from_device IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('excludeDevice', from_device) END);
END
$$;

-- The one body behind mark_read, mark_all_read, dismiss and dismiss_all: marks rows read (and,
-- when `dismiss`, deleted from the history), then syncs the user's other devices with the ids
-- that changed (none for the "all" forms). `ids` NULL means every row.
CREATE FUNCTION herald.change_inbox(user_id text, ids bigint[], dismiss boolean, from_device bigint) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    WITH r AS (
        UPDATE herald.inbox i
        SET read_at = coalesce(i.read_at, now()), deleted_at = CASE WHEN dismiss THEN now() ELSE i.deleted_at END
        WHERE i.user_id = change_inbox.user_id AND (ids IS NULL OR i.id = ANY (ids)) AND i.deleted_at IS NULL
          AND (dismiss OR i.read_at IS NULL)
        RETURNING i.id
    )
    SELECT array_agg(r.id ORDER BY r.id) INTO changed FROM r;
    IF changed IS NOT NULL THEN
        PERFORM herald.enqueue_sync(
            user_id,
            CASE WHEN dismiss THEN 'dismiss' ELSE 'read' END || CASE WHEN ids IS NULL THEN '_all' ELSE '' END,
            CASE WHEN ids IS NULL THEN '{}' ELSE changed END, from_device);
    END IF;
    RETURN coalesce(cardinality(changed), 0);
END
$$;

-- Marks inbox rows read; the badge follows and the user's other devices get a silent sync.
-- `from_device` (optional) is the device the user read them on: it is not synced.
CREATE FUNCTION herald.mark_read(user_id text, ids bigint[], from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE sql AS $$ SELECT herald.change_inbox(user_id, coalesce(ids, '{}'), false, from_device) $$;

CREATE FUNCTION herald.mark_all_read(user_id text, from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE sql AS $$ SELECT herald.change_inbox(user_id, NULL, false, from_device) $$;

-- Deletes inbox rows from the history (seed 000 8.5) and dismisses them on the other devices.
CREATE FUNCTION herald.dismiss(user_id text, ids bigint[], from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE sql AS $$ SELECT herald.change_inbox(user_id, coalesce(ids, '{}'), true, from_device) $$;

-- Clears the whole history (seed 000 8.5 "clear all") and dismisses it on the other devices.
CREATE FUNCTION herald.dismiss_all(user_id text, from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE sql AS $$ SELECT herald.change_inbox(user_id, NULL, true, from_device) $$;
