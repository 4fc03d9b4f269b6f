-- Herald 0004: least-privilege roles, row-level security, and identity checks in the public
-- functions. docs/security.md explains the model; docs/supabase.md applies it to Supabase.
--
-- Roles (NOLOGIN groups; an operator grants them to login roles):
--   worker   `herald run`: DML on every herald table, EXECUTE on every herald function. No DDL.
--   backend  trusted server code: the public functions (enqueue for anyone), no direct outbox writes.
--   admin    operators and support: DML on every table; row-level security lets it see every row.
-- Their names come from `herald.worker_role`, `herald.backend_role` and `herald.admin_role` when
-- set (e.g. `PGOPTIONS='-c herald.worker_role=push_worker' herald migrate`, or ALTER DATABASE …
-- SET), else herald_worker, herald_backend and herald_admin.
--
-- - Important: roles are cluster-wide while this migration runs per database, so it creates a
--   role only when it is missing (another database of the cluster may have created it first,
--   even concurrently) and 0004's .down never drops one. Creating a role needs CREATEROLE; a
--   DBA can instead create the three roles beforehand and run `herald migrate` as the owner.

-- The configured roles of this database: one each of worker, backend, admin, plus the app
-- roles added by herald.grant_app_role (end users: Supabase `authenticated`, PostgREST's web role).
CREATE TABLE herald.security_roles (
    role_name   text PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('worker', 'backend', 'admin', 'app')),
    added_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX security_roles_one_per_kind ON herald.security_roles (kind) WHERE kind <> 'app';

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT k.kind, coalesce(nullif(btrim(current_setting('herald.' || k.kind || '_role', true)), ''),
                                'herald_' || k.kind) AS role_name
        FROM (VALUES ('worker'), ('backend'), ('admin')) AS k (kind)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r.role_name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r.role_name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- another database's migration created it a moment ago
            END;
        END IF;
        INSERT INTO herald.security_roles (role_name, kind) VALUES (r.role_name, r.kind);
    END LOOP;
END
$$;

CREATE FUNCTION herald.role_name(role_kind text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT s.role_name FROM herald.security_roles s WHERE s.kind = role_kind
$$;

-- ---------------------------------------------------------------------------------------------
-- Identity: who the signed-in end user is. The body is replaced by herald.configure_identity.
-- ---------------------------------------------------------------------------------------------

-- The signed-in end user's id, or NULL. Default: the `herald.user_id` setting of the session or
-- transaction (`SELECT set_config('herald.user_id', 'alice', true)`).
CREATE FUNCTION herald.current_user_id() RETURNS text
LANGUAGE sql STABLE
RETURN nullif((current_setting('herald.user_id', true))::text, '');

-- Sets the SQL expression herald.current_user_id() evaluates, e.g. 'auth.uid()::text'
-- (Supabase) or $$nullif(current_setting('request.jwt.claims', true), '')::json->>'sub'$$
-- (PostgREST). NULL or '' restores the default. The expression must compile (it is not
-- evaluated: its value depends on the request), else nothing changes and the error says why.
-- Returns the expression now in force.
CREATE FUNCTION herald.configure_identity(expression text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    sql text;
BEGIN
    IF expression IS NULL OR btrim(expression) = '' THEN
        expression := $e$current_setting('herald.user_id', true)$e$;
    END IF;
    IF position(';' IN expression) > 0 THEN
        RAISE EXCEPTION 'herald: the identity expression must be one SQL expression (no ";")'
            USING ERRCODE = '22023';
    END IF;
    -- A SQL-standard body is parsed and bound now: a typo or a missing function fails here, and
    -- later calls never depend on the caller's search_path.
    sql := format('CREATE OR REPLACE FUNCTION herald.current_user_id() RETURNS text LANGUAGE sql STABLE '
                  'RETURN nullif((%s)::text, %L)', expression, '');
    BEGIN
        EXECUTE sql;
    EXCEPTION WHEN others THEN
        RAISE EXCEPTION 'herald: the identity expression % does not work: %', left(expression, 200), SQLERRM
            USING ERRCODE = '22023',
                  HINT = 'examples: auth.uid()::text (Supabase); '
                         'nullif(current_setting(''request.jwt.claims'', true), '''')::json->>''sub'' (PostgREST)';
    END;
    RETURN expression;
END
$$;

-- Whom the calling session may act for: NULL means anyone (a trusted caller), otherwise the one
-- user id it may act for. Raises 42501 for an app caller with no identity.
--
-- - Important: the caller is the session's role (SET ROLE, as PostgREST and Supabase do, or the
--   login role), read from the `role` setting, because inside a SECURITY DEFINER function
--   current_user is the function's owner. Trusted: superusers, the schema owner, the admin and
--   worker roles; the backend role too while no end-user identity is set. Everyone else, and
--   the backend role acting for a signed-in user, acts for herald.current_user_id() only.
CREATE FUNCTION herald.acting_user() RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    caller text := CASE WHEN current_setting('role') = 'none' THEN session_user::text ELSE current_setting('role') END;
    me text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = caller AND r.rolsuper)
       OR pg_has_role(caller, (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'herald'), 'MEMBER')
       OR EXISTS (SELECT 1 FROM herald.security_roles s
                  WHERE s.kind IN ('admin', 'worker') AND pg_has_role(caller, s.role_name, 'MEMBER')) THEN
        RETURN NULL;
    END IF;
    me := herald.current_user_id();
    IF me IS NOT NULL THEN
        RETURN me;
    END IF;
    IF EXISTS (SELECT 1 FROM herald.security_roles s
               WHERE s.kind = 'backend' AND pg_has_role(caller, s.role_name, 'MEMBER')) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'herald: no signed-in user: role % may only act for herald.current_user_id(), which is NULL', caller
        USING ERRCODE = '42501', HINT = 'sign in (set the identity the database reads), or call from the backend role';
END
$$;

-- Raises 42501 unless the calling session may act for `target` (see herald.acting_user).
CREATE FUNCTION herald.authorize_user(target text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    acting text := herald.acting_user();
BEGIN
    IF acting IS NOT NULL AND acting IS DISTINCT FROM target THEN
        RAISE EXCEPTION 'herald: the signed-in user may only act for themselves'
            USING ERRCODE = '42501', DETAIL = format('signed in as %s', acting);
    END IF;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- The public functions users call for themselves check the identity; the enqueue path is
-- unchanged (a trusted backend enqueues for anyone). set_presence and change_inbox qualify
-- parameters with their own function name, so they cannot be renamed behind a wrapper like
-- register_device: they are redefined with the check added.
-- ---------------------------------------------------------------------------------------------
-- register_device keeps its 0001 body under another name, behind a wrapper that checks the
-- caller first (an empty or oversize user_id is left to the body's own 22023 error). A token
-- registered by another user still moves to this one (re-login on a shared phone): holding the
-- token is the proof, and the previous user must stop receiving pushes on this device.
ALTER FUNCTION herald.register_device(text, text, text, jsonb) RENAME TO register_device_unchecked;

CREATE FUNCTION herald.register_device(user_id text, provider text, token text, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF length(user_id) > 0 AND octet_length(user_id) <= 256 THEN
        PERFORM herald.authorize_user(user_id);
    END IF;
    RETURN herald.register_device_unchecked(user_id, provider, token, options);
END
$$;

-- An app caller removes only its own user's devices; another user's token answers false.
CREATE OR REPLACE FUNCTION herald.unregister_device(provider text, token text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    acting text := herald.acting_user();
    found_ boolean;
BEGIN
    WITH gone AS (
        DELETE FROM herald.devices d
        WHERE d.provider = unregister_device.provider AND d.token = unregister_device.token
          AND (acting IS NULL OR d.user_id = acting)
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM gone) INTO found_;
    RETURN found_;
END
$$;

CREATE OR REPLACE FUNCTION herald.set_presence(user_id text, context text, ttl interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF user_id IS NULL OR context IS NULL THEN
        RAISE EXCEPTION 'herald: set_presence needs a user_id and a context' USING ERRCODE = '22004';
    END IF;
    PERFORM herald.authorize_user(user_id);
    IF ttl IS NULL OR ttl <= interval '0' THEN
        DELETE FROM herald.presence p WHERE p.user_id = set_presence.user_id AND p.context = set_presence.context;
        RETURN;
    END IF;
    INSERT INTO herald.presence AS p (user_id, context, expires_at)
    VALUES (user_id, context, now() + least(ttl, interval '1 day'))
    ON CONFLICT ON CONSTRAINT presence_pkey DO UPDATE SET expires_at = EXCLUDED.expires_at;
END
$$;

-- The one body behind mark_read, mark_all_read, dismiss and dismiss_all (0002), now checking
-- the caller may act for `user_id` first.
CREATE OR REPLACE FUNCTION herald.change_inbox(user_id text, ids bigint[], dismiss boolean, from_device bigint) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    PERFORM herald.authorize_user(user_id);
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

-- The public functions run as their owner, so callers need EXECUTE but no table privileges.
-- - Important: a fixed search_path (pg_temp last) so a caller's objects can never stand in for
--   the ones these bodies mean.
ALTER FUNCTION herald.enqueue(text, text, jsonb, jsonb) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.enqueue_many(text[], text, jsonb, jsonb) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.cancel(text) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.register_device(text, text, text, jsonb) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.unregister_device(text, text) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.set_presence(text, text, interval) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.mark_read(text, bigint[], bigint) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.mark_all_read(text, bigint) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.dismiss(text, bigint[], bigint) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
ALTER FUNCTION herald.dismiss_all(text, bigint) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;

-- ---------------------------------------------------------------------------------------------
-- Row-level security on the tables apps read directly. The owner (and so every SECURITY
-- DEFINER function above) is exempt: RLS is enabled, not forced.
-- ---------------------------------------------------------------------------------------------
ALTER TABLE herald.preferences ENABLE ROW LEVEL SECURITY;
ALTER TABLE herald.inbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE herald.devices ENABLE ROW LEVEL SECURITY;
ALTER TABLE herald.local_notifications ENABLE ROW LEVEL SECURITY;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['preferences', 'inbox', 'devices', 'local_notifications'] LOOP
        -- Everyone with table privileges: their own rows. `(SELECT …)` evaluates the identity
        -- once per statement, not once per row. What each role may do (read, update, delete)
        -- is set by its table privileges (herald.apply_grants).
        EXECUTE format('CREATE POLICY own_rows ON herald.%I FOR ALL TO PUBLIC '
                       'USING (user_id = (SELECT herald.current_user_id())) '
                       'WITH CHECK (user_id = (SELECT herald.current_user_id()))', t);
        -- Permissive policies are OR-ed: these two see and write every row.
        EXECUTE format('CREATE POLICY worker_all ON herald.%I FOR ALL TO %I USING (true) WITH CHECK (true)',
                       t, herald.role_name('worker'));
        EXECUTE format('CREATE POLICY admin_all ON herald.%I FOR ALL TO %I USING (true) WITH CHECK (true)',
                       t, herald.role_name('admin'));
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Grants, re-applied by one idempotent function. A later migration that adds a table or a
-- function ends with `SELECT herald.apply_grants();`.
-- ---------------------------------------------------------------------------------------------

-- The functions an end user may call for themselves; app roles and the backend get EXECUTE.
CREATE FUNCTION herald.app_functions() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[
        'herald.current_user_id()',
        'herald.register_device(text, text, text, jsonb)', 'herald.unregister_device(text, text)',
        'herald.set_presence(text, text, interval)',
        'herald.mark_read(text, bigint[], bigint)', 'herald.mark_all_read(text, bigint)',
        'herald.dismiss(text, bigint[], bigint)', 'herald.dismiss_all(text, bigint)']
$$;

-- Owner-only: they rewrite functions, grants and roles.
CREATE FUNCTION herald.owner_functions() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['herald.configure_identity(text)', 'herald.apply_grants()', 'herald.grant_app_role(text)',
                 'herald.revoke_app_role(text)']
$$;

CREATE FUNCTION herald.apply_grants() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    worker text := herald.role_name('worker');
    backend text := herald.role_name('backend');
    admin text := herald.role_name('admin');
    f text;
    r record;
BEGIN
    -- Functions are EXECUTE-able by PUBLIC when created; here only granted roles may call them.
    EXECUTE 'REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA herald FROM PUBLIC';
    EXECUTE 'GRANT EXECUTE ON FUNCTION herald.current_user_id() TO PUBLIC';  -- RLS policies call it

    -- Worker and admin: rows of every table, every function, no DDL. Neither may change the
    -- migration history or the role registry.
    FOREACH f IN ARRAY ARRAY[worker, admin] LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA herald TO %I', f);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA herald TO %I', f);
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON herald.security_roles FROM %I', f);
        IF to_regclass('herald.schema_migrations') IS NOT NULL THEN  -- created by `herald migrate`
            EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON herald.schema_migrations FROM %I', f);
        END IF;
        EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA herald TO %I', f);
        EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA herald TO %I', f);
        -- Tables and functions later created by this owner get the same, even before a
        -- migration calls apply_grants.
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', f);
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT USAGE, SELECT ON SEQUENCES TO %I', f);
        EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald GRANT EXECUTE ON FUNCTIONS TO %I', f);
    END LOOP;

    -- Backend: the enqueue side of the public interface. No table writes except what RLS lets
    -- any app role do for its signed-in user (below).
    EXECUTE format('GRANT USAGE ON SCHEMA herald TO %I', backend);
    EXECUTE format('GRANT EXECUTE ON FUNCTION herald.enqueue(text, text, jsonb, jsonb), '
                   'herald.enqueue_many(text[], text, jsonb, jsonb), herald.cancel(text) TO %I', backend);

    -- The backend and every app role: their own preferences, inbox, devices and local
    -- notifications under RLS, the categories (for a settings screen), the app functions.
    FOR r IN SELECT backend AS role_name
             UNION SELECT s.role_name FROM herald.security_roles s
                   WHERE s.kind = 'app' AND EXISTS (SELECT 1 FROM pg_roles p WHERE p.rolname = s.role_name) LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA herald TO %I', r.role_name);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', array_to_string(herald.app_functions(), ', '), r.role_name);
        EXECUTE format('GRANT SELECT ON herald.categories TO %I', r.role_name);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON herald.preferences TO %I', r.role_name);
        EXECUTE format('GRANT SELECT, DELETE ON herald.inbox TO %I', r.role_name);
        EXECUTE format('GRANT UPDATE (read_at, deleted_at) ON herald.inbox TO %I', r.role_name);
        EXECUTE format('GRANT SELECT, DELETE ON herald.devices TO %I', r.role_name);
        EXECUTE format('GRANT SELECT ON herald.local_notifications TO %I', r.role_name);
    END LOOP;

    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM %I, %I, %I',
                   array_to_string(herald.owner_functions(), ', '), worker, backend, admin);
END
$$;

-- Lets an existing role act as signed-in end users (e.g. Supabase `authenticated`): schema
-- usage, the app functions, and their own rows under RLS. Idempotent; owner only.
CREATE FUNCTION herald.grant_app_role(role_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = grant_app_role.role_name) THEN
        RAISE EXCEPTION 'herald: role "%" does not exist', left(coalesce(role_name, 'NULL'), 64) USING ERRCODE = '42704';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = grant_app_role.role_name AND (r.rolsuper OR r.rolbypassrls)) THEN
        RAISE WARNING 'herald: role "%" bypasses row-level security; it will see every user''s rows', role_name;
    END IF;
    INSERT INTO herald.security_roles AS s (role_name, kind) VALUES (grant_app_role.role_name, 'app')
    ON CONFLICT ON CONSTRAINT security_roles_pkey DO NOTHING;
    PERFORM herald.apply_grants();
END
$$;

-- Undoes herald.grant_app_role in this database. Owner only.
CREATE FUNCTION herald.revoke_app_role(role_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM herald.security_roles s WHERE s.role_name = revoke_app_role.role_name AND s.kind = 'app';
    IF FOUND THEN
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA herald FROM %I', role_name);
        EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA herald FROM %I', role_name);
        EXECUTE format('REVOKE USAGE ON SCHEMA herald FROM %I', role_name);
    END IF;
END
$$;

SELECT herald.apply_grants();
