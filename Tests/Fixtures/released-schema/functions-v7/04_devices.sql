-- Devices: register and unregister push tokens.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

CREATE OR REPLACE FUNCTION herald.register_device_unchecked(user_id text, provider text, token text, options jsonb DEFAULT '{}'::jsonb)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    k text;
    id_ bigint;
    env text;
BEGIN
    IF user_id IS NULL OR length(user_id) = 0 OR octet_length(user_id) > 256 THEN
        RAISE EXCEPTION 'herald: user_id must be a non-empty string of at most 256 bytes' USING ERRCODE = '22023';
    END IF;
    IF provider IS NULL OR provider NOT IN ('apns', 'fcm', 'expo', 'webpush', 'local') THEN
        RAISE EXCEPTION 'herald: unknown provider "%"', left(coalesce(provider, 'NULL'), 32)
            USING ERRCODE = '22023', HINT = 'one of apns, fcm, expo, webpush, local';
    END IF;
    IF token IS NULL OR length(token) = 0 OR octet_length(token) > 4096 THEN
        RAISE EXCEPTION 'herald: device token must be a non-empty string of at most 4096 bytes' USING ERRCODE = '22023';
    END IF;
    IF options IS NULL THEN options := '{}'; END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'herald: register_device options must be a JSON object' USING ERRCODE = '22023';
    END IF;
    FOR k IN SELECT jsonb_object_keys(options) LOOP
        IF k NOT IN ('appId', 'environment', 'p256dh', 'auth', 'locale', 'timeZone', 'attributes') THEN
            RAISE EXCEPTION 'herald: unknown device option "%"', left(k, 64) USING ERRCODE = '22023',
                HINT = 'allowed: appId, environment, p256dh, auth, locale, timeZone, attributes';
        END IF;
        IF k = 'attributes' AND jsonb_typeof(options->k) <> 'object' THEN
            RAISE EXCEPTION 'herald: device option attributes must be an object' USING ERRCODE = '22023';
        ELSIF k <> 'attributes' AND jsonb_typeof(options->k) <> 'string' THEN
            RAISE EXCEPTION 'herald: device option % must be a string', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    env := coalesce(options->>'environment', 'production');
    IF env NOT IN ('sandbox', 'production') THEN
        RAISE EXCEPTION 'herald: environment must be sandbox or production' USING ERRCODE = '22023';
    END IF;
    IF options ? 'timeZone' AND NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = options->>'timeZone') THEN
        RAISE EXCEPTION 'herald: unknown time zone "%"', left(options->>'timeZone', 64) USING ERRCODE = '22023';
    END IF;
    IF provider = 'webpush' AND (NOT options ? 'p256dh' OR NOT options ? 'auth') THEN
        RAISE EXCEPTION 'herald: a webpush subscription needs options.p256dh and options.auth' USING ERRCODE = '22023';
    END IF;
    INSERT INTO herald.devices AS d (user_id, provider, token, app_id, environment, p256dh, auth, locale, time_zone, attributes)
    VALUES (user_id, provider, token, coalesce(options->>'appId', 'default'), env, options->>'p256dh',
            options->>'auth', options->>'locale', options->>'timeZone', coalesce(options->'attributes', '{}'))
    ON CONFLICT ON CONSTRAINT devices_provider_token_key DO UPDATE
        SET user_id = EXCLUDED.user_id, app_id = EXCLUDED.app_id, environment = EXCLUDED.environment,
            p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth, locale = EXCLUDED.locale,
            time_zone = EXCLUDED.time_zone, attributes = EXCLUDED.attributes,
            active = true, disabled_reason = NULL, disabled_at = NULL, registered_at = now()
    RETURNING d.id INTO id_;
    RETURN id_;
END
$$;

-- An app caller removes only its own user's devices; another user's token answers false.
CREATE OR REPLACE FUNCTION herald.unregister_device(provider text, token text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
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

CREATE OR REPLACE FUNCTION herald.register_device(user_id text, provider text, token text, options jsonb DEFAULT '{}'::jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    permission_ text;
    id_ bigint;
BEGIN
    IF length(user_id) > 0 AND octet_length(user_id) <= 256 THEN
        PERFORM herald.authorize_user(user_id);
    END IF;
    IF jsonb_typeof(options) = 'object' AND options ? 'permission' THEN
        permission_ := options->>'permission';
        IF jsonb_typeof(options->'permission') <> 'string' OR permission_ NOT IN ('granted', 'provisional', 'denied') THEN
            RAISE EXCEPTION 'herald: device option permission must be granted, provisional or denied'
                USING ERRCODE = '22023';
        END IF;
        options := options - 'permission';
    END IF;
    id_ := herald.register_device_unchecked(user_id, provider, token, options);
    UPDATE herald.devices d SET permission = permission_ WHERE d.id = id_;
    RETURN id_;
END
$$;
