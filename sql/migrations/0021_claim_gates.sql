-- Herald 0021: a claim skips the per-user reads its bucket has no rows for.
--
-- For each user of a batch the claim reads its preferences, its presence, its open summary jobs
-- and its jobs waiting to be sent again: one index probe each, two buffer visits, even when no
-- user of the bucket has any (a broadcast to users who set no preference and have no app in the
-- foreground: 2,000 of a claim's ~19,500 buffer visits for a batch of 500). The claim now asks
-- once whether its bucket has any such rows (`gates` in `herald_claim_v29`,
-- Sources/Queue/OutboxStatements.swift) and reads them per user only if it has. Each question is
-- the first entry of an index led by the bucket, as every hot-path read stays in one bucket.
--
-- Each index is keyed (bucket, user_id): a plan that reads a user's rows through it instead of
-- the table's own per-user index is still one probe per user (an index on the bucket alone, or
-- on (bucket, expires_at), would read the bucket's rows for every user whenever the planner
-- chose it, say with statistics from when the table was empty). So the presence gate asks for
-- any presence row, live or expired: maintenance deletes the expired ones, and an open gate only
-- costs the reads the claim made before.
CREATE INDEX presence_bucket ON herald.presence (bucket, user_id);
CREATE INDEX preferences_bucket ON herald.preferences (bucket, user_id);
DROP INDEX herald.outbox_retrying;
CREATE INDEX outbox_retrying ON herald.outbox (bucket, user_id) WHERE retrying AND state = 'pending';
CREATE INDEX outbox_open_summaries ON herald.outbox (bucket, user_id) WHERE summary_key IS NOT NULL AND state = 'pending';
