-- Herald 0026: the inbox's insert counter without a transition table.
--
-- An insert into `herald.inbox` kept the unread count and the recent sends by a statement trigger
-- with a transition table (`inbox_unread_insert`, REFERENCING NEW TABLE). PostgreSQL fills such a
-- table for every row the statement inserts, whether or not the trigger then reads it, and on a
-- partitioned table that costs about 3.8 µs a row (500 inbox rows: 4.7 ms with it, 2.8 without):
-- the worker's acknowledgement, which counts its own inbox rows (migration 0019) and so never
-- read that table, paid it for every notification it delivered (docs/benchmarks.md, "The inbox's
-- insert counter without a transition table").
--
-- From this version a row trigger notes each inserted row in `herald.inbox_uncounted`, and a
-- statement trigger adds the statement's rows to the recipients' counts in user order, as the
-- statement trigger did (sql/functions/05_inbox.sql, `herald.inbox_note_insert` and
-- `herald.inbox_count_inserts`, created there after this file). Both are skipped, row by row and
-- for the statement, while the transaction has set `herald.inbox_counted` (the ack sets it before
-- its first inbox row), so the ack's rows cost one comparison each.
--
-- The table holds a statement's rows only until its own statement trigger takes them, in the same
-- transaction: rows of other transactions are never visible to it (they are gone before those
-- commit), so no two statements can count the same rows. Unlogged: nothing in it outlives its
-- transaction.
CREATE UNLOGGED TABLE herald.inbox_uncounted (
    xact         xid8 NOT NULL DEFAULT pg_current_xact_id(),
    id           bigint NOT NULL,
    user_id      text NOT NULL,
    kind         text NOT NULL,
    category     text NOT NULL,
    coalesce_key text,
    scope        text,
    created_at   timestamptz NOT NULL,
    unread       boolean NOT NULL
);
CREATE INDEX inbox_uncounted_xact ON herald.inbox_uncounted (xact);
COMMENT ON TABLE herald.inbox_uncounted IS
    'Inbox rows an insert statement has written and its statement trigger has not yet counted (migration 0026); empty outside such a statement.';

DROP TRIGGER IF EXISTS inbox_unread_insert ON herald.inbox;
