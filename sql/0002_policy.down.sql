-- Reverts 0002.
DROP FUNCTION IF EXISTS herald.dismiss_all(text, bigint);
DROP FUNCTION IF EXISTS herald.change_inbox(text, bigint[], boolean, bigint);
DROP FUNCTION IF EXISTS herald.dismiss(text, bigint[], bigint);
DROP FUNCTION IF EXISTS herald.mark_read(text, bigint[], bigint);
DROP FUNCTION IF EXISTS herald.mark_all_read(text, bigint);
DROP FUNCTION IF EXISTS herald.enqueue_sync(text, text, bigint[], bigint);
DELETE FROM herald.categories WHERE name = 'herald.sync';
DROP INDEX IF EXISTS herald.inbox_recent;
ALTER TABLE herald.inbox DROP COLUMN IF EXISTS coalesce_key, DROP COLUMN IF EXISTS scope, DROP COLUMN IF EXISTS summary_count;
DROP INDEX IF EXISTS herald.outbox_pending_user;
DROP INDEX IF EXISTS herald.outbox_open_summary;
ALTER TABLE herald.outbox DROP COLUMN IF EXISTS summary_key, DROP COLUMN IF EXISTS summary_count;
-- (0001 defines no inbox functions; they all come with 0002.)
