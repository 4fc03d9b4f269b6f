-- Herald 0020: each user's pending jobs in claim order, per app.
--
-- A claim takes a user only with every earlier due job of that user in the app (a user's jobs
-- are decided and sent in order: priority, due time, id). Its scan skips a user whose recipient
-- row another claim has locked; a claim that locked the row and then left that user out of its
-- batch (another app's turn, the scope turns' reach) frees it only at its commit, which can fall
-- between two of the user's jobs in the other scan. So after locking its job rows the claim
-- checks, per user and app of the batch, that no earlier due job of the user is pending outside
-- the batch (`gaps` in `herald_claim_v26`, Sources/Queue/OutboxStatements.swift), and leaves such
-- a user whole. This index makes that one probe, landing on the user's first pending job in the
-- app; so does the scope turns' check that a user's first due job lies in the walked scope.
--
-- It replaces `outbox_pending_user (user_id, category)`: the claim's per-user backlog count
-- reads the user's pending jobs of the category's app through it (the category is checked in the
-- heap, as the due time and summary key already were), and a fifth index written by every
-- enqueue cost more than that.
DROP INDEX herald.outbox_pending_user;
CREATE INDEX outbox_user_queue ON herald.outbox (user_id, app_id, priority, run_at, id) WHERE state = 'pending';
