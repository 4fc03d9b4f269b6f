-- Herald 0012: the acknowledgement's rows, one composite type per kind; jobs waiting for a retry.
--
-- A worker acknowledges a whole batch in one statement (OutboxStatements.acknowledge). It bound
-- every field of every row kind as its own array, 37 arrays side by side; now each kind is one
-- array of one of these types, and the statement reads the fields by name. Nothing is stored in
-- them: they only shape the binds.

-- Each job the batch settles: its new state, when a pending job runs again (epoch s), the error
-- it keeps, whether a Retry-After snooze refunds the attempt, whether its in-app alert is written
-- now, whether it goes back to pending to be sent again (`retrying`, below), and for a folded job
-- the summary it joins (key) and when that goes out (epoch s).
CREATE TYPE herald.settled_job AS (
    id bigint, state text, run_at float8, error text, refund boolean, alert boolean, retrying boolean,
    fold_key text, fold_due float8);

-- A device that accepted a job on this attempt.
CREATE TYPE herald.accepted_device AS (job_id bigint, device_id bigint);

-- A herald.delivery_log row (the worker column is the statement's own).
CREATE TYPE herald.log_record AS (
    job_id bigint, user_id text, category text, device_id bigint, provider text, event text,
    outcome text, status text, reason text, attempt int, latency_ms float8);

-- A device a provider called dead, with the reason.
CREATE TYPE herald.disabled_device AS (id bigint, reason text);

-- A herald.inbox notification row for a delivered job (or a fallback shown in the app).
CREATE TYPE herald.inbox_record AS (
    job_id bigint, user_id text, category text, title text, body text, route text, metadata jsonb,
    coalesce_key text, scope text, summary_count int);

-- A pending job that was sent (or held back behind such a job) and waits to be sent again. A
-- device gets its messages in order: while an older job waits for its retry on a device, the
-- same user's newer jobs wait behind it on that device (the claim reads these rows per user).
-- A job held by a rule (quiet hours, a schedule) is not retrying.
ALTER TABLE herald.outbox ADD COLUMN retrying boolean NOT NULL DEFAULT false;
CREATE INDEX outbox_retrying ON herald.outbox (user_id) WHERE retrying AND state = 'pending';
