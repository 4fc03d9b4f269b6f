-- Herald 0022: the outbox wake-up only for statements that inserted jobs.
--
-- `outbox_notify`, a statement trigger with no transition table, sent `NOTIFY herald_outbox`
-- for every INSERT statement on the outbox, also one that inserted no row; every worker
-- acknowledgement holds such a statement (the summaries a batch's folds open, nearly always
-- none). A transaction that notifies takes one lock for the whole database at commit and holds
-- it through its commit's WAL flush, so every acknowledgement and every enqueue committed one
-- at a time behind it (sampled in a drain: acknowledgements and a backend's `enqueue` waiting
-- on `Lock:object` and on each other's `WALSync`), and every idle worker woke for nothing.
-- `herald.outbox_recipients`, which already reads the inserted rows (`added`), now sends the
-- wake-up when there are some (sql/functions/03_enqueue.sql).
DROP TRIGGER IF EXISTS outbox_notify ON herald.outbox;
DROP FUNCTION IF EXISTS herald.notify_outbox();
