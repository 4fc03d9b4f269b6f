-- Reverts 0005.
DROP INDEX IF EXISTS herald.inbox_alert_job;
ALTER TABLE herald.inbox DROP COLUMN IF EXISTS resolved_at;
ALTER TABLE herald.outbox DROP COLUMN IF EXISTS alerted_at;
ALTER TABLE herald.categories DROP COLUMN IF EXISTS deadline;

-- The payload check as 0001 defined it.
CREATE OR REPLACE FUNCTION herald.check_payload(payload jsonb) RETURNS void
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
DROP FUNCTION IF EXISTS herald.max_payload_fields_bytes();
