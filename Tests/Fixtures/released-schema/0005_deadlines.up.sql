-- Herald 0005: delivery deadlines for critical categories; payloads that fit every provider;
-- metadata keys that cannot collide with Herald's own data keys on FCM.
-- A category may carry a `deadline` (seed 003 safety alerts 5 s; seed 000 messages 5 s,
-- reservations 10 s, listings 30 s). A critical job that no device has accepted by
-- `created_at + deadline` gets its in-app alert (and its local-fallback record) then, while push
-- keeps retrying until its TTL; `outbox.alerted_at` remembers that it did, so the job never gets
-- a second alert. When push later succeeds, the alert row gets `resolved_at` and the app may
-- hide it.

ALTER TABLE herald.categories ADD COLUMN deadline interval CHECK (deadline > interval '0');
ALTER TABLE herald.outbox ADD COLUMN alerted_at timestamptz;
ALTER TABLE herald.inbox ADD COLUMN resolved_at timestamptz;
-- Resolving a job's alert when its push finally succeeds.
CREATE INDEX inbox_alert_job ON herald.inbox (job_id) WHERE kind = 'alert' AND resolved_at IS NULL;

-- A payload accepted here is delivered by every provider, never dead-lettered later as too large:
-- each adapter shortens the push body to the preview that fits the bytes it really sends, so
-- only the other fields need a bound. They may travel twice (FCM repeats title and subtitle for
-- iOS; metadata and actions ride as JSON text inside a JSON string, escaping every quote), so
-- 2 x 1,536 bytes plus a provider's envelope stays under 4,096 with an empty body.
CREATE FUNCTION herald.max_payload_fields_bytes() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 1536 $$;
REVOKE EXECUTE ON FUNCTION herald.max_payload_fields_bytes() FROM PUBLIC;

-- 0001's check (shape, types, total size) stays as it is under another name; check_payload,
-- which enqueue and enqueue_many call, runs it and then the checks below.
ALTER FUNCTION herald.check_payload(jsonb) RENAME TO check_payload_shape;

CREATE FUNCTION herald.check_payload(payload jsonb) RETURNS void
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
REVOKE EXECUTE ON FUNCTION herald.check_payload(jsonb) FROM PUBLIC;
