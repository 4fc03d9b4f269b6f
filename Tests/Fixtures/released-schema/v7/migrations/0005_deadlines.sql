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
