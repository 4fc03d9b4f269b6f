-- Reverts 0004 in this database: grants, policies, identity checks, SECURITY DEFINER.
--
-- - Important: the roles themselves stay. Roles are cluster-wide and other databases of the
--   cluster (every test database, a staging copy) may still use them; dropping one here would
--   fail while they hold privileges there, or succeed and break them. After reverting 0004 in
--   every database, a DBA drops them: `DROP OWNED BY herald_worker; DROP ROLE herald_worker;`
--   (and the same for the backend and admin roles), once per database for DROP OWNED.

-- Privileges given to the configured roles, and the default privileges for future objects.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT s.role_name, s.kind FROM herald.security_roles s
             WHERE EXISTS (SELECT 1 FROM pg_roles p WHERE p.rolname = s.role_name) LOOP
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA herald FROM %I', r.role_name);
        EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA herald FROM %I', r.role_name);
        EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA herald FROM %I', r.role_name);
        EXECUTE format('REVOKE ALL ON SCHEMA herald FROM %I', r.role_name);
        IF r.kind IN ('worker', 'admin') THEN
            EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald REVOKE ALL ON TABLES FROM %I', r.role_name);
            EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald REVOKE ALL ON SEQUENCES FROM %I', r.role_name);
            EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA herald REVOKE ALL ON FUNCTIONS FROM %I', r.role_name);
        END IF;
    END LOOP;
END
$$;

-- Row-level security.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['preferences', 'inbox', 'devices', 'local_notifications'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS own_rows ON herald.%I', t);
        EXECUTE format('DROP POLICY IF EXISTS worker_all ON herald.%I', t);
        EXECUTE format('DROP POLICY IF EXISTS admin_all ON herald.%I', t);
        EXECUTE format('ALTER TABLE herald.%I DISABLE ROW LEVEL SECURITY', t);
    END LOOP;
END
$$;

-- The public functions run as their caller again, with the bodies of 0001 and 0002.
ALTER FUNCTION herald.enqueue(text, text, jsonb, jsonb) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.enqueue_many(text[], text, jsonb, jsonb) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.cancel(text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.unregister_device(text, text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.set_presence(text, text, interval) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.mark_read(text, bigint[], bigint) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.mark_all_read(text, bigint) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.dismiss(text, bigint[], bigint) SECURITY INVOKER RESET search_path;
ALTER FUNCTION herald.dismiss_all(text, bigint) SECURITY INVOKER RESET search_path;

DROP FUNCTION herald.register_device(text, text, text, jsonb);
ALTER FUNCTION herald.register_device_unchecked(text, text, text, jsonb) RENAME TO register_device;

CREATE OR REPLACE FUNCTION herald.unregister_device(provider text, token text) RETURNS boolean
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM herald.devices d WHERE d.provider = unregister_device.provider AND d.token = unregister_device.token
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

CREATE OR REPLACE FUNCTION herald.set_presence(user_id text, context text, ttl interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF user_id IS NULL OR context IS NULL THEN
        RAISE EXCEPTION 'herald: set_presence needs a user_id and a context' USING ERRCODE = '22004';
    END IF;
    IF ttl IS NULL OR ttl <= interval '0' THEN
        DELETE FROM herald.presence p WHERE p.user_id = set_presence.user_id AND p.context = set_presence.context;
        RETURN;
    END IF;
    INSERT INTO herald.presence AS p (user_id, context, expires_at)
    VALUES (user_id, context, now() + least(ttl, interval '1 day'))
    ON CONFLICT ON CONSTRAINT presence_pkey DO UPDATE SET expires_at = EXCLUDED.expires_at;
END
$$;

CREATE OR REPLACE FUNCTION herald.change_inbox(user_id text, ids bigint[], dismiss boolean, from_device bigint) RETURNS int
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

-- Functions are EXECUTE-able by PUBLIC again, as PostgreSQL creates them.
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA herald TO PUBLIC;

DROP FUNCTION IF EXISTS herald.revoke_app_role(text);
DROP FUNCTION IF EXISTS herald.grant_app_role(text);
DROP FUNCTION IF EXISTS herald.apply_grants();
DROP FUNCTION IF EXISTS herald.owner_functions();
DROP FUNCTION IF EXISTS herald.app_functions();
DROP FUNCTION IF EXISTS herald.authorize_user(text);
DROP FUNCTION IF EXISTS herald.acting_user();
DROP FUNCTION IF EXISTS herald.configure_identity(text);
DROP FUNCTION IF EXISTS herald.current_user_id();
DROP FUNCTION IF EXISTS herald.role_name(text);
DROP TABLE IF EXISTS herald.security_roles;
