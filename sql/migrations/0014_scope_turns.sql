-- Herald 0014: scopes take turns within an app.
--
-- Apps take turns in claims (0011), but within an app the claim took due jobs in (priority,
-- run_at, id) order: one organisation's 100,000-member announcement made every other
-- organisation's jobs of the same app and priority wait until it drained. This index keys the
-- pending jobs of an app by scope (`options.scope`, '' for a job without one), so a claim can
-- walk the app's scopes with pending jobs (one or two probes each) and take each one's first due
-- jobs along its own section (OutboxStatements.claim). The expression is the claim's own,
-- character for character: the planner matches it by text.
CREATE INDEX outbox_claim_scope ON herald.outbox (app_id, (coalesce(options->>'scope', '')), priority, run_at, id)
    WHERE state = 'pending';
