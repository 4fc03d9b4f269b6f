-- Reverts 0006: 0005's payload check, register_device without permission, app functions.
DROP FUNCTION IF EXISTS herald.history(text, int);
DROP FUNCTION IF EXISTS herald.record_action(text, bigint, text);
DROP FUNCTION IF EXISTS herald.diagnose(text);
DROP FUNCTION IF EXISTS herald.max_summary_items();
CREATE OR REPLACE FUNCTION herald.app_functions() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[
        'herald.current_user_id()',
        'herald.register_device(text, text, text, jsonb)', 'herald.unregister_device(text, text)',
        'herald.set_presence(text, text, interval)',
        'herald.mark_read(text, bigint[], bigint)', 'herald.mark_all_read(text, bigint)',
        'herald.dismiss(text, bigint[], bigint)', 'herald.dismiss_all(text, bigint)']
$$;
CREATE OR REPLACE FUNCTION herald.register_device(user_id text, provider text, token text, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF length(user_id) > 0 AND octet_length(user_id) <= 256 THEN
        PERFORM herald.authorize_user(user_id);
    END IF;
    RETURN herald.register_device_unchecked(user_id, provider, token, options);
END
$$;
CREATE OR REPLACE FUNCTION herald.check_payload(payload jsonb) RETURNS void
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
ALTER TABLE herald.inbox DROP COLUMN IF EXISTS action, DROP COLUMN IF EXISTS acted_at;
ALTER TABLE herald.devices DROP COLUMN IF EXISTS permission;
ALTER TABLE herald.outbox DROP COLUMN IF EXISTS summarized_ids, DROP COLUMN IF EXISTS summarized_titles;
SELECT herald.apply_grants();
