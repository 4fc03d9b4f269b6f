-- Enqueue and cancel: how a backend hands Herald a notification, and the wake-up trigger.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

-- The shared body of enqueue and enqueue_many: validates once, inserts set-based, returns the
-- new job ids. Users whose dedup key is still reserved are skipped.
CREATE OR REPLACE FUNCTION herald.enqueue_rows(user_ids text[], category text, payload jsonb, options jsonb)
RETURNS TABLE(job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    cat herald.categories;
    opts jsonb;
    prio smallint;
    run_at_ timestamptz;
    expires_at_ timestamptz;
    key text;
    held_run_at timestamptz;
    held_due timestamptz;
BEGIN
    SELECT * INTO cat FROM herald.categories c WHERE c.name = enqueue_rows.category;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald: unknown category "%"', left(coalesce(enqueue_rows.category, 'NULL'), 64)
            USING ERRCODE = '23503', HINT = 'insert a row into herald.categories first';
    END IF;
    PERFORM herald.check_payload(payload);
    opts := herald.check_options(options);
    IF user_ids IS NULL THEN
        RAISE EXCEPTION 'herald: user_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(user_ids) u WHERE u IS NULL OR length(u) = 0 OR octet_length(u) > 256) THEN
        RAISE EXCEPTION 'herald: every user id must be a non-empty string of at most 256 bytes'
            USING ERRCODE = '22023';
    END IF;
    prio := herald.priority_rank(coalesce(opts->>'priority', cat.priority));
    run_at_ := greatest(now(), coalesce((opts->>'deliverAt')::timestamptz, now()));
    expires_at_ := coalesce((opts->>'expiresAt')::timestamptz, run_at_ + cat.ttl);
    IF expires_at_ <= now() THEN
        RAISE EXCEPTION 'herald: options.expiresAt is already in the past' USING ERRCODE = '22008';
    END IF;
    key := opts->>'dedupKey';
    -- A paused category's jobs are held from the start (sql/functions/08_control.sql).
    IF EXISTS (SELECT 1 FROM herald.pauses) AND cat.name = ANY (herald.paused_categories()) THEN
        held_run_at := 'infinity';
        held_due := run_at_;
    ELSE
        held_run_at := run_at_;
    END IF;

    IF key IS NULL THEN
        RETURN QUERY
        INSERT INTO herald.outbox AS o
            (user_id, category, priority, payload, options, run_at, paused_run_at, expires_at, max_attempts)
        SELECT DISTINCT u, cat.name, prio, payload, opts, held_run_at, held_due, expires_at_, cat.max_attempts
        FROM unnest(user_ids) AS u
        RETURNING o.id;
        RETURN;
    END IF;

    -- Reserve the key per user; an expired reservation is taken over, a live one skips the user.
    RETURN QUERY
    WITH reserved AS (
        INSERT INTO herald.dedup_keys AS d (user_id, dedup_key, category, expires_at)
        SELECT DISTINCT u, key, cat.name, now() + cat.dedup_window FROM unnest(user_ids) AS u
        ON CONFLICT (user_id, dedup_key) DO UPDATE
            SET category = EXCLUDED.category, expires_at = EXCLUDED.expires_at,
                created_at = now(), job_id = NULL
            WHERE d.expires_at IS NOT NULL AND d.expires_at <= now()
        RETURNING d.user_id
    ), inserted AS (
        INSERT INTO herald.outbox AS o
            (user_id, category, priority, payload, options, dedup_key, run_at, paused_run_at, expires_at, max_attempts)
        SELECT r.user_id, cat.name, prio, payload, opts, key, held_run_at, held_due, expires_at_, cat.max_attempts
        FROM reserved r
        RETURNING o.id, o.user_id
    ), linked AS (
        UPDATE herald.dedup_keys d SET job_id = i.id
        FROM inserted i WHERE d.user_id = i.user_id AND d.dedup_key = key
    )
    SELECT i.id FROM inserted i;
END
$$;

-- Enqueues one notification per user in one set-based insert; returns how many were enqueued.
CREATE OR REPLACE FUNCTION herald.enqueue_many(user_ids text[], category text, payload jsonb, options jsonb DEFAULT '{}'::jsonb)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
    SELECT count(*) FROM herald.enqueue_rows(user_ids, category, payload, options)
$$;

-- Enqueues one notification; returns the job id, or NULL when a dedup key already covers it.
CREATE OR REPLACE FUNCTION herald.enqueue(user_id text, category text, payload jsonb, options jsonb DEFAULT '{}'::jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    job bigint;
BEGIN
    IF user_id IS NULL OR length(user_id) = 0 THEN
        RAISE EXCEPTION 'herald: user_id must be a non-empty string' USING ERRCODE = '22004';
    END IF;
    SELECT r.job_id INTO job FROM herald.enqueue_rows(ARRAY[user_id], category, payload, options) r;
    RETURN job;
END
$$;

-- Cancels pending jobs with this dedup key and frees their reservations; returns how many.
CREATE OR REPLACE FUNCTION herald.cancel(dedup_key text)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    n int;
BEGIN
    WITH gone AS (
        DELETE FROM herald.outbox o
        WHERE o.dedup_key = cancel.dedup_key AND o.state = 'pending'
        RETURNING o.id, o.user_id, o.category, o.attempt
    ), logged AS (
        INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, reason, attempt)
        SELECT id, user_id, category, 'cancelled', 'cancelled', 'cancelled_by_key', attempt FROM gone
    ), freed AS (
        DELETE FROM herald.dedup_keys d USING gone g
        WHERE d.user_id = g.user_id AND d.dedup_key = cancel.dedup_key
    )
    SELECT count(*) INTO n FROM gone;
    RETURN n;
END
$$;

-- One NOTIFY per inserting statement (never per row: NOTIFY takes a global lock at commit).
CREATE OR REPLACE FUNCTION herald.notify_outbox()
RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_outbox', '');
    RETURN NULL;
END
$$;

-- Created once; re-creating it on every migrate would lock the outbox against inserts.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'herald.outbox'::regclass AND tgname = 'outbox_notify') THEN
        CREATE TRIGGER outbox_notify AFTER INSERT ON herald.outbox
            FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_outbox();
    END IF;
END
$$;

-- Enqueues the silent sync that tells the user's other devices what was read or dismissed.
CREATE OR REPLACE FUNCTION herald.enqueue_sync(user_id text, action text, ids bigint[], from_device bigint)
RETURNS void
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
