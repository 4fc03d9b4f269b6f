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
ALTER FUNCTION herald.register_device(text, text, text, jsonb) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;
DROP FUNCTION IF EXISTS herald.check_payload(jsonb);
ALTER FUNCTION herald.check_payload_unlocalized(jsonb) RENAME TO check_payload;
ALTER TABLE herald.inbox DROP COLUMN IF EXISTS action, DROP COLUMN IF EXISTS acted_at;
ALTER TABLE herald.devices DROP COLUMN IF EXISTS permission;
ALTER TABLE herald.outbox DROP COLUMN IF EXISTS summarized_ids, DROP COLUMN IF EXISTS summarized_titles;
SELECT herald.apply_grants();
