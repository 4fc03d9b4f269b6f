-- Reverts 0005.
DROP FUNCTION IF EXISTS herald.check_payload(jsonb);
ALTER FUNCTION herald.check_payload_shape(jsonb) RENAME TO check_payload;
DROP FUNCTION IF EXISTS herald.max_payload_fields_bytes();
DROP INDEX IF EXISTS herald.inbox_alert_job;
ALTER TABLE herald.inbox DROP COLUMN IF EXISTS resolved_at;
ALTER TABLE herald.outbox DROP COLUMN IF EXISTS alerted_at;
ALTER TABLE herald.categories DROP COLUMN IF EXISTS deadline;
