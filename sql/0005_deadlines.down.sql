-- Reverts 0005's schema. `herald.check_payload` keeps 0005's bound on the fields other than the
-- body (and `herald.max_payload_fields_bytes()` with it): stricter input is harmless on the older
-- schema, and a down migration that re-created the old function would be a second copy of it.
DROP INDEX IF EXISTS herald.inbox_alert_job;
ALTER TABLE herald.inbox DROP COLUMN IF EXISTS resolved_at;
ALTER TABLE herald.outbox DROP COLUMN IF EXISTS alerted_at;
ALTER TABLE herald.categories DROP COLUMN IF EXISTS deadline;
