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
            (user_id, category, app_id, priority, payload, options, run_at, paused_run_at, expires_at, max_attempts)
        SELECT DISTINCT u, cat.name, cat.app_id, prio, payload, opts, held_run_at, held_due, expires_at_, cat.max_attempts
        FROM unnest(user_ids) AS u
        RETURNING o.id;
        RETURN;
    END IF;

    -- Reserve the key per user; an expired reservation is taken over, a live one skips the user.
    -- In user order: a reservation another call has made and not yet committed is waited for, so
    -- two calls of one key to overlapping users (a broadcast submitted twice at once) must take
    -- them in the same order, or each could wait for the other.
    RETURN QUERY
    WITH reserved AS (
        INSERT INTO herald.dedup_keys AS d (user_id, dedup_key, category, expires_at)
        SELECT DISTINCT u, key, cat.name, now() + cat.dedup_window FROM unnest(user_ids) AS u ORDER BY u
        ON CONFLICT (user_id, dedup_key) DO UPDATE
            SET category = EXCLUDED.category, expires_at = EXCLUDED.expires_at,
                created_at = now(), job_id = NULL
            WHERE d.expires_at IS NOT NULL AND d.expires_at <= now()
        RETURNING d.user_id
    ), inserted AS (
        INSERT INTO herald.outbox AS o
            (user_id, category, app_id, priority, payload, options, dedup_key, run_at, paused_run_at, expires_at, max_attempts)
        SELECT r.user_id, cat.name, cat.app_id, prio, payload, opts, key, held_run_at, held_due, expires_at_, cat.max_attempts
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

-- Every inserted job's recipient gets its row in herald.recipients (what a claim holds: one
-- batch at a time per user, migration 0008), whatever inserted the job: enqueue, enqueue_many,
-- a summary, a replay. New rows are inserted in user order, as every writer of recipient rows
-- locks them (see enqueue_rows' dedup reservation for why).
--
-- And the wake-up: one `NOTIFY herald_outbox` per statement that inserted jobs (never per row,
-- and never for a statement that inserted none, such as an acknowledgement that opened no
-- summary: a notifying transaction takes one lock for the whole database at commit and holds it
-- through its WAL flush, so every such commit waits for the others; migration 0022), and only
-- while a worker waits for it (herald.idle_workers, migration 0023, which says why no job is
-- missed: the wake gate's shared lock is held from before the look to the commit). A
-- statement that inserts a critical job always notifies `critical`, which wakes the workers'
-- critical lane even while their batch slots are all busy with a broadcast.
-- The wake-up gate's advisory lock key (after the pause gate's 72630003, 08_control.sql): shared
-- by each statement that inserts jobs from its look at herald.idle_workers to its commit, tried
-- exclusively by a worker that has just recorded that it waits (migration 0023).
CREATE OR REPLACE FUNCTION herald.wake_gate_key()
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 72630004::bigint $$;

CREATE OR REPLACE FUNCTION herald.outbox_recipients()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    critical boolean;
BEGIN
    -- NULL when the statement inserted no job.
    SELECT bool_or(a.priority = 0) INTO critical FROM added a;
    IF critical IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO herald.recipients (user_id)
    SELECT DISTINCT a.user_id FROM added a ORDER BY a.user_id
    ON CONFLICT (user_id) DO NOTHING;
    PERFORM pg_advisory_xact_lock_shared(herald.wake_gate_key());
    IF EXISTS (SELECT 1 FROM herald.idle_workers w WHERE w.since > now() - interval '1 minute') THEN
        PERFORM pg_notify('herald_outbox', '');
    END IF;
    IF critical THEN
        PERFORM pg_notify('herald_outbox', 'critical');
    END IF;
    RETURN NULL;
END
$$;

-- Whether recipient `user_id` is free now at `seen_turn`: as of this call, not as of the calling
-- statement's snapshot (VOLATILE, so its query takes a snapshot of its own under READ
-- COMMITTED). A claim asks before it locks a recipient it saw free: a user another claim took
-- after the claim's snapshot is then passed over unlocked. Locked, it failed the lock's recheck
-- but stayed locked until the claim ended, and that batch's acknowledgement, which frees the
-- user, waited for it (most of an ack's time while a flood drained).
--
-- Claims before v30 call `recipient_free_in_bucket`, which is handed the recipient's bucket, so
-- this look, like every statement of the hot path, stays in one bucket (one shard once
-- distributed); today's claim calls `recipient_unchanged_in_bucket` below, which asks the same
-- of the row version the claim read, by its ctid. Both older ones, and `recipient_free_now` (no
-- bucket), stay for workers of an earlier release during a rolling upgrade.
--
-- A claim calls it for every due job it scans (about twice a batch's size while batches are
-- in flight), so it is plain SQL (not inlined: it holds a subquery; VOLATILE still gives its
-- query a snapshot of its own) with every name qualified and no `SET search_path`: that clause
-- saves and restores the setting on every call, and with PL/pgSQL's call overhead it cost
-- 3.8 µs a call against 2.6 µs now (100,000 calls, this project's machine). It runs with the
-- caller's rights, so the caller's search path can give it nothing the caller does not have;
-- its operators on text, bigint and smallint resolve in pg_catalog, which is searched first.
CREATE OR REPLACE FUNCTION herald.recipient_free_in_bucket(bucket smallint, user_id text, seen_turn bigint)
RETURNS boolean
LANGUAGE sql VOLATILE COST 1 AS $$
    SELECT EXISTS (SELECT 1 FROM herald.recipients r
                   WHERE r.bucket = $1 AND r.user_id = $2 AND r.turn = $3 AND r.lease_owner IS NULL);
$$;

-- Whether the version of a recipient row that the calling statement's snapshot read (`seen`,
-- its ctid) is still the row's live version as of this call: no transaction that committed
-- since has updated or deleted it (a lock alone does not count). The claim's fresh look before
-- it locks (`OutboxStatements.lockRecipient`): a user another claim took, or a batch freed,
-- after the claim's snapshot has a newer version, so the look fails and the row stays unlocked,
-- as with `recipient_free_in_bucket`, which asked the same through the row's primary key and
-- compared its turn and holder. Here the look is one heap fetch by ctid (a TID scan), no index
-- descent, so it costs a third of the buffer visits; it is stricter only for a row changed
-- since the snapshot without a new turn (an unread count moved by the app reading an inbox
-- row), which the claim then leaves to its next round. VOLATILE, plain SQL, qualified names,
-- no SET clause: as `recipient_free_in_bucket` above, and for the same reasons. The bucket keeps
-- it on one shard once distributed.
CREATE OR REPLACE FUNCTION herald.recipient_unchanged_in_bucket(bucket smallint, seen tid)
RETURNS boolean
LANGUAGE sql VOLATILE COST 1 AS $$
    SELECT EXISTS (SELECT 1 FROM herald.recipients r WHERE r.ctid = $2 AND r.bucket = $1);
$$;

CREATE OR REPLACE FUNCTION herald.recipient_free_now(user_id text, seen_turn bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE COST 1 SET search_path = pg_catalog, herald, pg_temp AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM herald.recipients r
                   WHERE r.user_id = recipient_free_now.user_id AND r.turn = seen_turn AND r.lease_owner IS NULL);
END
$$;

-- A category moved to another app takes its queued and running jobs along (migration 0011:
-- claims share out by app).
CREATE OR REPLACE FUNCTION herald.category_app_moved()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
BEGIN
    UPDATE herald.outbox o SET app_id = n.app_id
    FROM moved n JOIN was w ON w.name = n.name
    WHERE n.app_id IS DISTINCT FROM w.app_id AND o.category = n.name AND o.app_id <> n.app_id;
    RETURN NULL;
END
$$;

-- The outbox's and the categories' triggers, created once each; re-creating them on every
-- migrate would lock the tables against writes.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'herald.outbox'::regclass AND tgname = 'outbox_recipients') THEN
        CREATE TRIGGER outbox_recipients AFTER INSERT ON herald.outbox
            REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION herald.outbox_recipients();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'herald.categories'::regclass AND tgname = 'categories_app_moved') THEN
        CREATE TRIGGER categories_app_moved AFTER UPDATE ON herald.categories
            REFERENCING OLD TABLE AS was NEW TABLE AS moved FOR EACH STATEMENT EXECUTE FUNCTION herald.category_app_moved();
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
    SELECT coalesce(max(r.unread), 0) INTO unread FROM herald.recipients r WHERE r.user_id = enqueue_sync.user_id;
    PERFORM herald.enqueue(
        user_id, 'herald.sync',
        jsonb_build_object('title', 'sync', 'body', '', 'metadata', jsonb_build_object(
            'action', action, 'ids', array_to_string(ids, ','), 'badge', unread::text)),
        jsonb_build_object('silent', true, 'collapseId', left('herald-sync-' || md5(user_id), 64))
            || CASE WHEN from_device IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('excludeDevice', from_device) END);
END
$$;
