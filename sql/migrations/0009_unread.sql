-- Herald 0009: the badge as a counter on the recipient row.
--
-- The badge is the user's unread count. Counting unread inbox rows in every claim cost one
-- index entry per unread notification per recipient, so claims slowed down as inboxes grew
-- (users who never read kept 100 and more). `recipients.unread` holds the same number: the
-- inbox's statement triggers (sql/functions/05_inbox.sql) add what each statement inserts,
-- reads, dismisses, restores or deletes, in the same transaction, whoever runs it (the ack,
-- the inbox functions, an app's own UPDATE under row-level security, retention). The claim
-- reads it from the row it holds: one row per recipient, whatever the history.
--
-- Invariant: for every user, unread = count(*) of inbox rows with read_at and deleted_at NULL.
-- The backfill below and the triggers' creation (in the functions step of the same migrate
-- transaction) happen under a lock that keeps writers out of the inbox meanwhile.
LOCK TABLE herald.inbox IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE herald.recipients ADD COLUMN unread integer NOT NULL DEFAULT 0;

INSERT INTO herald.recipients AS r (user_id, unread)
SELECT i.user_id, count(*) FROM herald.inbox i
WHERE i.read_at IS NULL AND i.deleted_at IS NULL
GROUP BY i.user_id
ON CONFLICT (user_id) DO UPDATE SET unread = excluded.unread;
