-- Herald 0011: apps share claims fairly.
--
-- Claims took due jobs in (priority, run_at, id) order, so one app's flood of 100,000 jobs
-- made every other app's jobs of the same priority wait until it drained. A job now carries
-- the app of its category (`app_id`, set by every insert path: enqueue, summaries, replays;
-- kept current by a trigger if a category moves to another app), and the claim index leads
-- with it: a claim takes each app's most urgent due jobs along its own section of the index
-- and interleaves them, one job per app in turn within each priority (OutboxStatements.claim).
ALTER TABLE herald.outbox ADD COLUMN app_id text NOT NULL DEFAULT 'default';
UPDATE herald.outbox o SET app_id = k.app_id FROM herald.categories k WHERE k.name = o.category AND o.app_id <> k.app_id;

DROP INDEX herald.outbox_claim;
CREATE INDEX outbox_claim ON herald.outbox (app_id, priority, run_at, id) WHERE state = 'pending';
