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

-- Options gain `excludeDevice` (the device that caused a sync does not receive it).
CREATE OR REPLACE FUNCTION herald.check_options(options jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    k text;
    v jsonb;
    out jsonb := '{}';
    ts timestamptz;
BEGIN
    IF options IS NULL THEN
        RETURN '{}';
    END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'herald: options must be a JSON object' USING ERRCODE = '22023';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(options) LOOP
        CASE k
        WHEN 'priority' THEN
            IF jsonb_typeof(v) <> 'string' OR (v #>> '{}') NOT IN ('critical', 'high', 'normal', 'low') THEN
                RAISE EXCEPTION 'herald: options.priority must be one of critical, high, normal, low'
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'deliverAt', 'expiresAt' THEN
            IF jsonb_typeof(v) <> 'string' THEN
                RAISE EXCEPTION 'herald: options.% must be an ISO-8601 timestamp string', k USING ERRCODE = '22007';
            END IF;
            BEGIN
                ts := (v #>> '{}')::timestamptz;
            EXCEPTION WHEN others THEN
                RAISE EXCEPTION 'herald: options.% is not a valid timestamp', k USING ERRCODE = '22007';
            END;
            IF ts < '2000-01-01'::timestamptz OR ts > '2200-01-01'::timestamptz OR ts IN ('infinity', '-infinity') THEN
                RAISE EXCEPTION 'herald: options.% is out of range (2000..2200)', k USING ERRCODE = '22008';
            END IF;
            v := to_jsonb(ts);
        WHEN 'dedupKey', 'coalesceKey', 'context', 'scope' THEN
            IF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') = 0 OR octet_length(v #>> '{}') > 256
               OR (v #>> '{}') ~ '[[:cntrl:]]' THEN
                RAISE EXCEPTION 'herald: options.% must be a non-empty string of at most 256 bytes without control characters', k
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'collapseId' THEN
            IF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') = 0 OR octet_length(v #>> '{}') > 64 THEN
                RAISE EXCEPTION 'herald: options.collapseId must be a non-empty string of at most 64 bytes (APNs limit)'
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'silent', 'mandatory' THEN
            IF jsonb_typeof(v) <> 'boolean' THEN
                RAISE EXCEPTION 'herald: options.% must be a boolean', k USING ERRCODE = '22023';
            END IF;
        WHEN 'excludeDevice' THEN
            IF jsonb_typeof(v) <> 'number' THEN
                RAISE EXCEPTION 'herald: options.excludeDevice must be a device id' USING ERRCODE = '22023';
            END IF;
        WHEN 'geo' THEN
            IF jsonb_typeof(v) <> 'object' OR jsonb_typeof(v->'lat') IS DISTINCT FROM 'number'
               OR jsonb_typeof(v->'lon') IS DISTINCT FROM 'number'
               OR (v->>'lat')::float8 NOT BETWEEN -90 AND 90 OR (v->>'lon')::float8 NOT BETWEEN -180 AND 180 THEN
                RAISE EXCEPTION 'herald: options.geo must be {"lat": -90..90, "lon": -180..180}'
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'requires' THEN
            IF jsonb_typeof(v) <> 'object' THEN
                RAISE EXCEPTION 'herald: options.requires must be an object of device attributes'
                    USING ERRCODE = '22023';
            END IF;
        ELSE
            RAISE EXCEPTION 'herald: unknown option "%"', left(k, 64)
                USING ERRCODE = '22023',
                      HINT = 'allowed: priority, dedupKey, coalesceKey, context, deliverAt, expiresAt, silent, collapseId, geo, requires, scope, mandatory, excludeDevice';
        END CASE;
        out := out || jsonb_build_object(k, v);
    END LOOP;
    RETURN out;
END
$$;

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

DROP FUNCTION herald.mark_read(text, bigint[]);
DROP FUNCTION herald.mark_all_read(text);

-- Marks inbox rows read; the badge follows and the user's other devices get a silent sync.
-- `from_device` (optional) is the device the user read them on: it is not synced.
CREATE FUNCTION herald.mark_read(user_id text, ids bigint[], from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    WITH r AS (
        UPDATE herald.inbox i SET read_at = now()
        WHERE i.user_id = mark_read.user_id AND i.id = ANY (ids) AND i.read_at IS NULL
        RETURNING i.id
    )
    SELECT array_agg(r.id ORDER BY r.id) INTO changed FROM r;
    IF changed IS NOT NULL THEN
        PERFORM herald.enqueue_sync(user_id, 'read', changed, from_device);
    END IF;
    RETURN coalesce(cardinality(changed), 0);
END
$$;

CREATE FUNCTION herald.mark_all_read(user_id text, from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    UPDATE herald.inbox i SET read_at = now()
    WHERE i.user_id = mark_all_read.user_id AND i.read_at IS NULL AND i.deleted_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM herald.enqueue_sync(user_id, 'read_all', '{}', from_device);
    END IF;
    RETURN n;
END
$$;

-- Deletes inbox rows from the history (seed 000 8.5) and dismisses them on the other devices.
CREATE FUNCTION herald.dismiss(user_id text, ids bigint[], from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    WITH r AS (
        UPDATE herald.inbox i SET deleted_at = now(), read_at = coalesce(i.read_at, now())
        WHERE i.user_id = dismiss.user_id AND i.id = ANY (ids) AND i.deleted_at IS NULL
        RETURNING i.id
    )
    SELECT array_agg(r.id ORDER BY r.id) INTO changed FROM r;
    IF changed IS NOT NULL THEN
        PERFORM herald.enqueue_sync(user_id, 'dismiss', changed, from_device);
    END IF;
    RETURN coalesce(cardinality(changed), 0);
END
$$;

-- Clears the whole history (seed 000 8.5 "clear all") and dismisses it on the other devices.
CREATE FUNCTION herald.dismiss_all(user_id text, from_device bigint DEFAULT NULL) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    UPDATE herald.inbox i SET deleted_at = now(), read_at = coalesce(i.read_at, now())
    WHERE i.user_id = dismiss_all.user_id AND i.deleted_at IS NULL;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM herald.enqueue_sync(user_id, 'dismiss_all', '{}', from_device);
    END IF;
    RETURN n;
END
$$;
