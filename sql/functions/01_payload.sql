-- Payload limits and checks: what enqueue accepts (sizes, shape, localized variants, options).
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

-- A payload accepted here is delivered by every provider, never dead-lettered later as too large:
-- each adapter shortens the push body to the preview that fits the bytes it really sends, so
-- only the other fields need a bound. They may travel twice (FCM repeats title and subtitle for
-- iOS; metadata and actions ride as JSON text inside a JSON string, escaping every quote), so
-- 2 x 1,536 bytes plus a provider's envelope stays under 4,096 with an empty body.
CREATE OR REPLACE FUNCTION herald.max_payload_fields_bytes()
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1536 $$;

-- How many folded items a summary remembers (its count is exact beyond that).
CREATE OR REPLACE FUNCTION herald.max_summary_items()
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 50 $$;

-- Priority rank used by the claim order: smaller is more urgent.
CREATE OR REPLACE FUNCTION herald.priority_rank(p text)
RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 WHEN 'low' THEN 3 END::smallint
$$;

-- Largest serialized payload accepted: the smallest provider body limit is 4096 bytes (APNs,
-- FCM, Expo, Web Push); 3,584 leaves room for the envelope each adapter adds (aps, data keys,
-- sentAtIso, collapse ids, encryption padding).
CREATE OR REPLACE FUNCTION herald.max_payload_bytes()
RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 3584 $$;

CREATE OR REPLACE FUNCTION herald.check_payload_shape(payload jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k text;
    v jsonb;
    size int;
BEGIN
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' THEN
        RAISE EXCEPTION 'herald: payload must be a JSON object with "title" and "body"'
            USING ERRCODE = '22023';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(payload) LOOP
        IF k NOT IN ('title', 'body', 'subtitle', 'route', 'metadata', 'imageUrl', 'sound',
                     'threadId', 'actions', 'eventType', 'sentAtIso') THEN
            RAISE EXCEPTION 'herald: unknown payload key "%"', left(k, 64)
                USING ERRCODE = '22023',
                      HINT = 'allowed: title, body, subtitle, route, metadata, imageUrl, sound, threadId, actions, eventType, sentAtIso; put app data in metadata';
        END IF;
        IF k = 'metadata' THEN
            IF jsonb_typeof(v) <> 'object' THEN
                RAISE EXCEPTION 'herald: payload.metadata must be an object of string values'
                    USING ERRCODE = '22023';
            END IF;
            IF EXISTS (SELECT 1 FROM jsonb_each(v) m WHERE jsonb_typeof(m.value) <> 'string') THEN
                RAISE EXCEPTION 'herald: payload.metadata must map keys to strings (found a non-string value)'
                    USING ERRCODE = '22023';
            END IF;
        ELSIF k = 'actions' THEN
            IF jsonb_typeof(v) <> 'array' THEN
                RAISE EXCEPTION 'herald: payload.actions must be an array' USING ERRCODE = '22023';
            END IF;
        ELSIF jsonb_typeof(v) <> 'string' THEN
            RAISE EXCEPTION 'herald: payload.% must be a string', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF NOT (payload ? 'title') OR NOT (payload ? 'body') THEN
        RAISE EXCEPTION 'herald: payload must have "title" and "body"' USING ERRCODE = '22023';
    END IF;
    IF length(btrim(payload->>'title')) = 0 THEN
        RAISE EXCEPTION 'herald: payload.title must not be empty' USING ERRCODE = '22023';
    END IF;
    size := octet_length(payload::text);
    IF size > herald.max_payload_bytes() THEN
        RAISE EXCEPTION 'herald: payload is % bytes; the limit is % bytes (providers accept 4096 including their envelope)',
            size, herald.max_payload_bytes()
            USING ERRCODE = '22001';
    END IF;
END
$$;

-- Validates enqueue options and returns them normalized (timestamps as ISO-8601 text).
CREATE OR REPLACE FUNCTION herald.check_options(options jsonb)
RETURNS jsonb
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
        WHEN 'traceparent' THEN
            -- W3C Trace Context: version-traceid-parentid-flags, lowercase hex, ids not all zero.
            IF jsonb_typeof(v) <> 'string' OR (v #>> '{}') !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
               OR (v #>> '{}') LIKE 'ff-%' OR split_part(v #>> '{}', '-', 2) = repeat('0', 32)
               OR split_part(v #>> '{}', '-', 3) = repeat('0', 16) THEN
                RAISE EXCEPTION 'herald: options.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)'
                    USING ERRCODE = '22023';
            END IF;
        ELSE
            RAISE EXCEPTION 'herald: unknown option "%"', left(k, 64)
                USING ERRCODE = '22023',
                      HINT = 'allowed: priority, dedupKey, coalesceKey, context, deliverAt, expiresAt, silent, collapseId, geo, requires, scope, mandatory, excludeDevice, traceparent';
        END CASE;
        out := out || jsonb_build_object(k, v);
    END LOOP;
    RETURN out;
END
$$;

CREATE OR REPLACE FUNCTION herald.check_payload_unlocalized(payload jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    reserved text;
    size int;
BEGIN
    PERFORM herald.check_payload_shape(payload);
    -- FCM data is one flat map: each metadata key travels beside Herald's own keys.
    SELECT m.key INTO reserved FROM jsonb_object_keys(coalesce(payload->'metadata', '{}')) m(key)
    WHERE m.key IN ('eventType', 'route', 'sentAtIso', 'actions', 'summaryCount', 'distanceKm', 'metadata',
                    'from', 'notification', 'message_type', 'collapse_key')
       OR m.key LIKE 'google%' OR m.key LIKE 'gcm%'
    LIMIT 1;
    IF reserved IS NOT NULL THEN
        RAISE EXCEPTION 'herald: payload.metadata key "%" is reserved', left(reserved, 64)
            USING ERRCODE = '22023',
                  HINT = 'Android (FCM) receives metadata keys beside eventType, route, sentAtIso, actions, summaryCount and distanceKm; FCM reserves from, notification, message_type, collapse_key and google*/gcm*';
    END IF;
    size := octet_length((payload - 'body')::text);
    IF size > herald.max_payload_fields_bytes() THEN
        RAISE EXCEPTION 'herald: payload fields other than "body" are % bytes; the limit is % bytes', size,
            herald.max_payload_fields_bytes()
            USING ERRCODE = '22001',
                  HINT = 'a push shows a preview of the body, shortened to fit each provider; the other fields (title, subtitle, metadata, actions, ...) are sent whole, some twice';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION herald.check_payload(payload jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    variants jsonb := CASE WHEN jsonb_typeof(payload) = 'object' THEN payload->'localized' END;
    tag text;
    variant jsonb;
    k text;
    widest int := 0;
    size int;
BEGIN
    PERFORM herald.check_payload_unlocalized(CASE WHEN variants IS NULL THEN payload ELSE payload - 'localized' END);
    -- summarizedIds travels beside Herald's other data keys (FCM data is one flat map).
    IF payload->'metadata' ? 'summarizedIds' THEN
        RAISE EXCEPTION 'herald: payload.metadata key "summarizedIds" is reserved' USING ERRCODE = '22023',
            HINT = 'a summary carries the ids it stands for under summarizedIds';
    END IF;
    IF variants IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(variants) <> 'object' THEN
        RAISE EXCEPTION 'herald: payload.localized must be an object of locales, e.g. {"sv": {"title": "…", "body": "…"}}'
            USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(variants)) > 32 THEN
        RAISE EXCEPTION 'herald: payload.localized has more than 32 locales' USING ERRCODE = '22023';
    END IF;
    FOR tag, variant IN SELECT * FROM jsonb_each(variants) LOOP
        IF tag !~ '^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$' THEN
            RAISE EXCEPTION 'herald: payload.localized key "%" is not a locale', left(tag, 64)
                USING ERRCODE = '22023', HINT = 'a BCP 47 tag such as sv, sv-SE or pt-BR';
        END IF;
        IF jsonb_typeof(variant) <> 'object' THEN
            RAISE EXCEPTION 'herald: payload.localized.% must be an object with title, body or subtitle', tag
                USING ERRCODE = '22023';
        END IF;
        FOR k IN SELECT jsonb_object_keys(variant) LOOP
            IF k NOT IN ('title', 'body', 'subtitle') THEN
                RAISE EXCEPTION 'herald: unknown key "%" in payload.localized.%', left(k, 64), tag
                    USING ERRCODE = '22023', HINT = 'allowed: title, body, subtitle';
            END IF;
            IF jsonb_typeof(variant->k) <> 'string' THEN
                RAISE EXCEPTION 'herald: payload.localized.%.% must be a string', tag, k USING ERRCODE = '22023';
            END IF;
        END LOOP;
        IF variant ? 'title' AND length(btrim(variant->>'title')) = 0 THEN
            RAISE EXCEPTION 'herald: payload.localized.%.title must not be empty', tag USING ERRCODE = '22023';
        END IF;
        IF octet_length(coalesce(variant->>'body', '')) > herald.max_payload_bytes() THEN
            RAISE EXCEPTION 'herald: payload.localized.%.body is % bytes; the limit is % bytes', tag,
                octet_length(variant->>'body'), herald.max_payload_bytes() USING ERRCODE = '22001';
        END IF;
        widest := greatest(widest, octet_length((variant - 'body')::text));
    END LOOP;
    size := octet_length((payload - 'body' - 'localized')::text) + widest;
    IF size > herald.max_payload_fields_bytes() THEN
        RAISE EXCEPTION 'herald: payload fields other than "body" are % bytes with the widest localized variant; the limit is % bytes',
            size, herald.max_payload_fields_bytes()
            USING ERRCODE = '22001',
                  HINT = 'a push shows a preview of the body, shortened to fit each provider; the other fields (title, subtitle, metadata, actions, a variant''s title and subtitle, ...) are sent whole, some twice';
    END IF;
END
$$;
