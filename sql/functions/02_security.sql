-- Roles, identity and grants: who may call what, for whom.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

CREATE OR REPLACE FUNCTION herald.role_name(role_kind text)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT s.role_name FROM herald.security_roles s WHERE s.kind = role_kind
$$;

-- Sets the SQL expression herald.current_user_id() evaluates, e.g. 'auth.uid()::text'
-- (Supabase) or $$nullif(current_setting('request.jwt.claims', true), '')::json->>'sub'$$
-- (PostgREST). NULL or '' restores the default. The expression must compile (it is not
-- evaluated: its value depends on the request), else nothing changes and the error says why.
-- Returns the expression now in force.
CREATE OR REPLACE FUNCTION herald.configure_identity(expression text)
RETURNS text
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
CREATE OR REPLACE FUNCTION herald.acting_user()
RETURNS text
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
CREATE OR REPLACE FUNCTION herald.authorize_user(target text)
RETURNS void
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

-- Owner-only: they rewrite functions, grants and roles.
CREATE OR REPLACE FUNCTION herald.owner_functions()
RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['herald.configure_identity(text)', 'herald.apply_grants()', 'herald.grant_app_role(text)',
                 'herald.revoke_app_role(text)']
$$;

CREATE OR REPLACE FUNCTION herald.apply_grants()
RETURNS void
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
    EXECUTE 'GRANT EXECUTE ON FUNCTION herald.bucket_of(text) TO PUBLIC';  -- every per-user row's bucket (0015)

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
CREATE OR REPLACE FUNCTION herald.grant_app_role(role_name text)
RETURNS void
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
CREATE OR REPLACE FUNCTION herald.revoke_app_role(role_name text)
RETURNS void
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

-- The app functions now include the three above.
CREATE OR REPLACE FUNCTION herald.app_functions()
RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[
        'herald.current_user_id()',
        'herald.register_device(text, text, text, jsonb)', 'herald.unregister_device(text, text)',
        'herald.set_presence(text, text, interval)',
        'herald.mark_read(text, bigint[], bigint)', 'herald.mark_all_read(text, bigint)',
        'herald.dismiss(text, bigint[], bigint)', 'herald.dismiss_all(text, bigint)',
        'herald.history(text, int)', 'herald.record_action(text, bigint, text)', 'herald.diagnose(text)']
$$;
