-- The kill switch: pause, resume and cancel what is pending, by category, app or everything.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql: the worker and admin roles
-- and the schema owner (operators), not apps or the backend role.
--
-- - Important: every bulk change here picks its rows with FOR UPDATE SKIP LOCKED, so it never
--   waits for a worker: a job being claimed or acknowledged at that instant is skipped (it is
--   being sent; the claim guard and the next sweep catch a retry), and no lock cycle with an
--   acknowledgement can form (a plain bulk UPDATE deadlocked with acks while replicas sent).
-- - Important: two layers stop a paused category. The claim skips every category paused at
--   that moment, so nothing of it is claimed once herald.pause commits; and its pending jobs are
--   held in chunks (run_at moved to 'infinity', the due time kept in paused_run_at), so claims
--   do not walk them. pause and resume only change the pause row, so they return at once
--   whatever the backlog; the chunks run in their own transactions.
-- - Important: "once herald.pause commits" holds for a claim already running at that moment
--   too. A claim's snapshot is taken when its statement starts, so one that began just before
--   the pause committed would not see it and could take the category's jobs after `herald pause`
--   returned (seen with two replicas: 400 jobs sent after the pause had settled). So the claim
--   reads the pauses through the pause gate (herald.paused_for_claim): a shared advisory lock,
--   then a snapshot of its own; herald.pause takes the gate exclusively before it commits, which
--   waits for the claims that read the pauses without it and makes the ones after it wait for
--   its commit (milliseconds). Call herald.pause in a transaction of its own (the CLI and the
--   console do): while a transaction that paused is open, claims wait 2 s each and take nothing.

-- Who did it: `herald.actor` when the caller sets it (the console, `herald --actor`), else the
-- login role.
CREATE OR REPLACE FUNCTION herald.actor()
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('herald.actor', true), ''), session_user::text)
$$;

-- The categories paused right now (by their own pause, their app's, or a pause of everything).
-- PL/pgSQL, not SQL: every claim calls it (through herald.paused_for_claim), and a SQL function
-- whose body reads tables is not inlined, so each call planned its join again; PL/pgSQL keeps
-- the plan for the session (pgbench of `SELECT herald.paused_for_claim()`, nothing paused: 0.29-
-- 0.37 ms a call as SQL, 0.19-0.22 now, round trip and commit included). STABLE either way: it
-- reads in its caller's snapshot.
CREATE OR REPLACE FUNCTION herald.paused_categories()
RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    -- Driven by the pauses (usually none), so it costs nothing while nothing is paused.
    RETURN (SELECT coalesce(array_agg(DISTINCT k.name), '{}')
            FROM herald.pauses p
            JOIN herald.categories k
              ON p.category = k.name OR p.app_id = k.app_id OR (p.category IS NULL AND p.app_id IS NULL)
            WHERE p.until IS NULL OR p.until > now());
END
$$;

-- The pause gate's advisory lock key (after pruning's 72630001 and partition upkeep's 72630002):
-- shared by each claim while it reads the pauses, taken exclusively by herald.pause.
CREATE OR REPLACE FUNCTION herald.pause_gate_key()
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 72630003::bigint $$;

-- The paused categories as a claim must see them (the claim's `paused`): read with a snapshot
-- taken after the gate's shared lock, not the claim statement's, so a pause that committed while
-- the claim was scanning is seen. VOLATILE on purpose: a STABLE function would read in the
-- claim's snapshot. The lock is the transaction's, so herald.pause waits until the claim that
-- read without its pause has committed. While a pause is committing (the gate taken or asked
-- for exclusively) the claim waits for it, milliseconds; a pause whose transaction stays open
-- makes it wait 2 s at most and then return NULL: the claim takes nothing, the worker claims
-- again at its next interval, and no error is raised.
CREATE OR REPLACE FUNCTION herald.paused_for_claim()
RETURNS text[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    gate_open boolean := pg_try_advisory_xact_lock_shared(herald.pause_gate_key());
    timeout text;
    names text[];
BEGIN
    IF NOT gate_open THEN
        -- A pause is committing: wait for it, 2 s at most, then put the claim's lock_timeout back.
        timeout := current_setting('lock_timeout');
        PERFORM set_config('lock_timeout', '2s', true);
        BEGIN
            PERFORM pg_advisory_xact_lock_shared(herald.pause_gate_key());
            gate_open := true;
        EXCEPTION WHEN lock_not_available THEN
            NULL;
        END;
        PERFORM set_config('lock_timeout', timeout, true);
    END IF;
    IF gate_open THEN
        SELECT herald.paused_categories() INTO names;
    END IF;
    RETURN names;
END
$$;

-- Holds (run_at to 'infinity') up to `max_jobs` pending, not yet held jobs of the paused
-- categories; returns how many. The caller repeats it, one transaction each, until it returns
-- less than `max_jobs`: `herald pause` does, and so does the maintenance leader every interval
-- (which also catches retries and reaped leases of a paused category).
CREATE OR REPLACE FUNCTION herald.hold_paused(max_jobs int DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    paused text[] := herald.paused_categories();
    n bigint;
BEGIN
    IF cardinality(paused) = 0 THEN
        RETURN 0;
    END IF;
    UPDATE herald.outbox o SET paused_run_at = o.run_at, run_at = 'infinity'
    WHERE o.id = ANY (ARRAY(
        SELECT c.id FROM herald.outbox c
        WHERE c.state = 'pending' AND c.paused_run_at IS NULL AND c.category = ANY (paused)
        LIMIT max_jobs
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Puts back the due time of up to `max_jobs` held jobs whose category is no longer paused
-- (resumed, `until` passed, or the category moved to another app), after dropping expired
-- pauses; returns how many. Repeated like hold_paused by `herald resume` and the leader.
CREATE OR REPLACE FUNCTION herald.release_unpaused(max_jobs int DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    paused text[];
    n bigint;
BEGIN
    DELETE FROM herald.pauses WHERE until IS NOT NULL AND until <= now();
    paused := herald.paused_categories();
    UPDATE herald.outbox o SET run_at = o.paused_run_at, paused_run_at = NULL
    WHERE o.id = ANY (ARRAY(
        SELECT c.id FROM herald.outbox c
        WHERE c.paused_run_at IS NOT NULL AND c.category <> ALL (paused)
        LIMIT max_jobs
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Pauses a category, an app's categories, or everything (both NULL) until `until` (NULL: until
-- resumed). Pausing the same target again replaces its `until`. Once this commits no worker
-- claims a job of the target; its pending jobs are then held in chunks (herald.hold_paused) by
-- `herald pause` or by the maintenance leader within one interval. Returns how many pending
-- jobs its target has. An unknown category or app raises 23503.
CREATE OR REPLACE FUNCTION herald.pause(category text DEFAULT NULL, app_id text DEFAULT NULL,
                                        until timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    n bigint;
BEGIN
    IF pause.category IS NOT NULL AND pause.app_id IS NOT NULL THEN
        RAISE EXCEPTION 'herald: pause a category or an app, not both' USING ERRCODE = '22023';
    END IF;
    IF pause.category IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.categories k WHERE k.name = pause.category) THEN
        RAISE EXCEPTION 'herald: unknown category "%"', left(pause.category, 64)
            USING ERRCODE = '23503', HINT = 'herald.categories lists the categories';
    END IF;
    IF pause.app_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM herald.categories k WHERE k.app_id = pause.app_id) THEN
        RAISE EXCEPTION 'herald: no category belongs to app "%"', left(pause.app_id, 64)
            USING ERRCODE = '23503', HINT = 'herald.categories.app_id names the apps';
    END IF;
    IF pause.until IS NOT NULL AND pause.until <= now() THEN
        RAISE EXCEPTION 'herald: until is already in the past' USING ERRCODE = '22008';
    END IF;
    INSERT INTO herald.pauses AS p (category, app_id, until, paused_by)
    VALUES (pause.category, pause.app_id, pause.until, herald.actor())
    ON CONFLICT (category, app_id) DO UPDATE SET until = EXCLUDED.until, paused_by = EXCLUDED.paused_by,
        created_at = now();
    SELECT count(*) INTO n FROM herald.outbox o
    WHERE o.state = 'pending' AND (pause.category IS NULL OR o.category = pause.category)
      AND (pause.app_id IS NULL OR o.category IN (SELECT k.name FROM herald.categories k WHERE k.app_id = pause.app_id));
    INSERT INTO herald.audit_log (actor, action, target, jobs)
    VALUES (herald.actor(), 'pause',
            jsonb_strip_nulls(jsonb_build_object('category', pause.category, 'app_id', pause.app_id, 'until', pause.until)), n);
    -- The pause gate (see the top of this file), last, so claims wait for this commit as briefly
    -- as can be: wait for the claims that read the pauses without this one; the claims that ask
    -- after this wait for the commit and then see it.
    PERFORM pg_advisory_xact_lock(herald.pause_gate_key());
    RETURN n;
END
$$;

-- Lifts the pause of exactly this target (a category, an app, or everything: both NULL). The
-- jobs no other pause still holds get their due times back in chunks (herald.release_unpaused)
-- from `herald resume` or the maintenance leader within one interval. Returns how many held
-- jobs that frees; 0 when that target was not paused.
CREATE OR REPLACE FUNCTION herald.resume(category text DEFAULT NULL, app_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    paused text[];
    n bigint;
BEGIN
    DELETE FROM herald.pauses p
    WHERE p.category IS NOT DISTINCT FROM resume.category AND p.app_id IS NOT DISTINCT FROM resume.app_id;
    paused := herald.paused_categories();
    SELECT count(*) INTO n FROM herald.outbox o
    WHERE o.paused_run_at IS NOT NULL AND o.category <> ALL (paused);
    INSERT INTO herald.audit_log (actor, action, target, jobs)
    VALUES (herald.actor(), 'resume', jsonb_strip_nulls(jsonb_build_object('category', resume.category, 'app_id', resume.app_id)), n);
    RETURN n;
END
$$;

-- Cancels every pending job (held or not) of a category, a scope (options.scope), an app, or
-- their intersection, in one statement: each gets a delivery-log row (event and reason
-- `cancelled`) and its dedup key is freed. Jobs being sent right now are not touched (a
-- provider may already have them): pause first, then cancel, to stop their retries too.
-- At least one filter is required (22023). Returns how many it cancelled.
CREATE OR REPLACE FUNCTION herald.cancel_pending(category text DEFAULT NULL, scope text DEFAULT NULL,
                                                 app_id text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    n bigint;
BEGIN
    IF cancel_pending.category IS NULL AND cancel_pending.scope IS NULL AND cancel_pending.app_id IS NULL THEN
        RAISE EXCEPTION 'herald: cancel_pending needs a category, a scope or an app'
            USING ERRCODE = '22023', HINT = 'to stop everything, herald.pause() first';
    END IF;
    IF cancel_pending.category IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM herald.categories k WHERE k.name = cancel_pending.category) THEN
        RAISE EXCEPTION 'herald: unknown category "%"', left(cancel_pending.category, 64) USING ERRCODE = '23503';
    END IF;
    WITH gone AS (
        DELETE FROM herald.outbox o
        WHERE o.id = ANY (ARRAY(
            SELECT c.id FROM herald.outbox c
            WHERE c.state = 'pending'
              AND (cancel_pending.category IS NULL OR c.category = cancel_pending.category)
              AND (cancel_pending.scope IS NULL OR c.options->>'scope' = cancel_pending.scope)
              AND (cancel_pending.app_id IS NULL OR c.category IN (
                       SELECT k.name FROM herald.categories k WHERE k.app_id = cancel_pending.app_id))
            FOR UPDATE SKIP LOCKED))
        RETURNING o.id, o.user_id, o.category, o.attempt, o.dedup_key
    ), logged AS (
        INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, reason, attempt)
        SELECT id, user_id, category, 'cancelled', 'cancelled', 'cancelled', attempt FROM gone
    ), freed AS (
        DELETE FROM herald.dedup_keys d USING gone g
        WHERE g.dedup_key IS NOT NULL AND d.user_id = g.user_id AND d.dedup_key = g.dedup_key
    )
    SELECT count(*) INTO n FROM gone;
    INSERT INTO herald.audit_log (actor, action, target, jobs)
    VALUES (herald.actor(), 'cancel_pending',
            jsonb_strip_nulls(jsonb_build_object('category', cancel_pending.category, 'scope', cancel_pending.scope,
                                                 'app_id', cancel_pending.app_id)), n);
    RETURN n;
END
$$;
