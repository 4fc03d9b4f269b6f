-- Presence: suppress notifications for what the user is looking at.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

CREATE OR REPLACE FUNCTION herald.set_presence(user_id text, context text, ttl interval)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
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
