-- Herald 0004: least-privilege roles, the end user's identity and row-level security. The
-- identity checks and grants are in sql/functions/02_security.sql. docs/security.md explains the model; docs/supabase.md applies it to Supabase.
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
--   even concurrently) and never drops one. Creating a role needs CREATEROLE; a
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

-- ---------------------------------------------------------------------------------------------
-- Identity: who the signed-in end user is.
-- ---------------------------------------------------------------------------------------------

-- The signed-in end user's id, or NULL. It stays here, not in sql/functions/: the RLS policies
-- below call it, and herald.configure_identity rewrites its body (an operator's setting that
-- a re-applied definition would undo).
-- Default: the `herald.user_id` setting of the session or
-- transaction (`SELECT set_config('herald.user_id', 'alice', true)`).
CREATE FUNCTION herald.current_user_id() RETURNS text
LANGUAGE sql STABLE
RETURN nullif((current_setting('herald.user_id', true))::text, '');

-- ---------------------------------------------------------------------------------------------
-- Row-level security on the tables apps read directly. The owner (and so every SECURITY
-- DEFINER function) is exempt: RLS is enabled, not forced.
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
                       t, (SELECT s.role_name FROM herald.security_roles s WHERE s.kind = 'worker'));
        EXECUTE format('CREATE POLICY admin_all ON herald.%I FOR ALL TO %I USING (true) WITH CHECK (true)',
                       t, (SELECT s.role_name FROM herald.security_roles s WHERE s.kind = 'admin'));
    END LOOP;
END
$$;
