-- Herald 0019: the worker's acknowledgement counts its own inbox rows.
--
-- From this version the ack (`herald_ack_v11`) adds the unread count and the recent sends of the
-- inbox rows it writes in the same update that frees the batch's recipients, and sets
-- `herald.inbox_counted` for its transaction, so that the inbox's insert trigger
-- (herald.inbox_unread, sql/functions/05_inbox.sql, re-applied after this file) leaves those rows
-- to it: one new version of each served user's row per ack instead of two.
--
-- This file is also the guard of that pairing. A worker of this version over the trigger of
-- version 18 would count its rows twice; `herald run` refuses a schema older than its own, so
-- `herald migrate` (which installs the new trigger) runs first. Workers of version 18 still
-- running during a rolling upgrade do not set the setting, and the new trigger counts their rows
-- as before.
COMMENT ON COLUMN herald.recipients.unread IS
    'Unread inbox rows (the badge): kept by the inbox''s statement triggers, and for the rows the worker''s ack inserts by the ack itself (migration 0019).';
COMMENT ON COLUMN herald.recipients.sends IS
    'The newest 100 notification inbox rows of the last day, oldest first: kept by the inbox''s statement triggers, and for the rows the worker''s ack inserts by the ack itself (migration 0019).';
