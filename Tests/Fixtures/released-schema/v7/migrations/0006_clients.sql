-- Herald 0006: what each device receives, in the user's language, and what the app can ask back.
--
-- - Summaries list their items: a summary job remembers the ids and titles of the jobs folded
--   into it (newest first, the latest 50), so its push can list them ({titles}) and carry their
--   ids (summarizedIds).
-- - A payload may carry `localized` variants ({"sv": {"title", "body", "subtitle"}}); each
--   device gets the one for its locale.
-- - The app can ask back: herald.history (the user's last notifications with status and
--   action), herald.record_action (what the user did with one), herald.diagnose (why a user did
--   or did not get a notification); register_device records the permission state
--   (devices.permission: granted, provisional, denied; absent: unknown).
-- The functions are in sql/functions/.

ALTER TABLE herald.outbox
    ADD COLUMN summarized_ids bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN summarized_titles text[] NOT NULL DEFAULT '{}';
ALTER TABLE herald.devices
    ADD COLUMN permission text CHECK (permission IN ('granted', 'provisional', 'denied'));
ALTER TABLE herald.inbox
    ADD COLUMN action text,
    ADD COLUMN acted_at timestamptz;
