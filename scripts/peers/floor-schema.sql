-- `make bench-peers`, the floor: the rows Herald must write per job, at their least, in a
-- database of their own (not Herald's schema). Run with psql -v jobs=N -v users=M.
-- Per job Herald leases the job row and holds its recipient (claim), then deletes the job,
-- writes an inbox row and a delivery-log row and frees the recipient (ack). The tables keep
-- the indexes Herald's have (the claim and per-user queue indexes, the running-lease index;
-- the per-user history indexes, the delivery log's job and time indexes). Nothing is read
-- beyond the claim's own scan: no devices, preferences, history, counts, policy, order checks.
CREATE TABLE outbox (
    id bigserial PRIMARY KEY,
    user_id text NOT NULL,
    app_id int NOT NULL DEFAULT 1,
    category text NOT NULL,
    payload jsonb NOT NULL,
    state text NOT NULL DEFAULT 'pending',
    priority smallint NOT NULL DEFAULT 2,
    run_at timestamptz NOT NULL DEFAULT now(),
    attempt int NOT NULL DEFAULT 0,
    lease_owner text,
    lease_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX outbox_claim ON outbox (app_id, priority, run_at, id) WHERE state = 'pending';
CREATE INDEX outbox_user_queue ON outbox (user_id, app_id, priority, run_at, id) WHERE state = 'pending';
CREATE INDEX outbox_running ON outbox (lease_expires_at) WHERE state = 'running';
CREATE TABLE recipients (
    user_id text PRIMARY KEY,
    lease_owner text,
    turn bigint NOT NULL DEFAULT 0,
    unread int NOT NULL DEFAULT 0);
CREATE TABLE inbox (
    id bigserial,
    created_at timestamptz NOT NULL DEFAULT now(),
    user_id text NOT NULL,
    job_id bigint,
    kind text NOT NULL DEFAULT 'push',
    title text,
    body text,
    PRIMARY KEY (id, created_at));
CREATE INDEX inbox_recent ON inbox (user_id, created_at DESC);
CREATE TABLE delivery_log (
    id bigserial,
    created_at timestamptz NOT NULL DEFAULT now(),
    job_id bigint,
    user_id text,
    device_id bigint,
    provider text,
    outcome text,
    PRIMARY KEY (id, created_at));
CREATE INDEX delivery_log_job ON delivery_log (job_id);
CREATE INDEX delivery_log_user ON delivery_log (user_id, created_at);
CREATE INDEX delivery_log_created ON delivery_log USING brin (created_at);
INSERT INTO recipients (user_id) SELECT 'bench-' || g FROM generate_series(0, :users - 1) g;
-- As herald-bench enqueues: rounds of one job per user, so a batch of 500 holds 500 users.
INSERT INTO outbox (user_id, category, payload)
SELECT 'bench-' || (g % :users), 'bench', '{"title": "Hello", "body": "World"}'
FROM generate_series(0, :jobs - 1) g;
VACUUM ANALYZE;
