-- Herald 0001: the outbox, devices, categories, history and the inbox.
-- Applied once by `herald migrate` inside one transaction under an advisory lock. Released
-- migrations never change; the functions live in sql/functions/ and are re-applied by every
-- migrate.
-- Every object lives in schema `herald`; names in DESIGN.md's "Public SQL interface" are stable.

CREATE SCHEMA IF NOT EXISTS herald;

-- ---------------------------------------------------------------------------------------------
-- Categories: one row per kind of notification. Policy and retry knobs live here, not in code.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE herald.categories (
    name                text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.:-]{0,63}$'),
    app_id              text NOT NULL DEFAULT 'default',
    priority            text NOT NULL DEFAULT 'normal'
                        CHECK (priority IN ('critical', 'high', 'normal', 'low')),
    mandatory           boolean NOT NULL DEFAULT false,   -- users cannot mute it (safety alerts)
    opt_in              boolean NOT NULL DEFAULT false,   -- off unless the user opted in (marketing)
    quiet_hours         text NOT NULL DEFAULT 'defer' CHECK (quiet_hours IN ('defer', 'drop', 'bypass')),
    dedup_window        interval,                         -- NULL: a dedup key holds forever
    coalesce            jsonb NOT NULL DEFAULT '{}',      -- policy engine (issue 3)
    rate_limit          jsonb NOT NULL DEFAULT '{}',      -- policy engine (issue 3)
    ttl                 interval NOT NULL DEFAULT '1 day' CHECK (ttl > interval '0'),
    max_attempts        int NOT NULL DEFAULT 5 CHECK (max_attempts BETWEEN 1 AND 50),
    backoff_base        interval NOT NULL DEFAULT '2 seconds' CHECK (backoff_base > interval '0'),
    backoff_cap         interval NOT NULL DEFAULT '10 minutes' CHECK (backoff_cap >= backoff_base),
    sound               text,
    interruption_level  text CHECK (interruption_level IN ('passive', 'active', 'time-sensitive', 'critical')),
    apns_category       text,
    android_channel     text,
    default_route       text,
    silent              boolean NOT NULL DEFAULT false,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- ---------------------------------------------------------------------------------------------
-- Devices: one row per push target. (provider, token) is unique; a token that moves to another
-- user (re-login on a shared phone) follows the newest registration.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE herald.devices (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id         text NOT NULL,
    provider        text NOT NULL CHECK (provider IN ('apns', 'fcm', 'expo', 'webpush', 'local')),
    token           text NOT NULL,
    app_id          text NOT NULL DEFAULT 'default',
    environment     text NOT NULL DEFAULT 'production' CHECK (environment IN ('sandbox', 'production')),
    p256dh          text,
    auth            text,
    locale          text,
    time_zone       text,
    attributes      jsonb NOT NULL DEFAULT '{}',
    active          boolean NOT NULL DEFAULT true,
    disabled_reason text,
    disabled_at     timestamptz,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, token)
);
CREATE INDEX devices_active_user ON herald.devices (user_id) WHERE active;

-- ---------------------------------------------------------------------------------------------
-- The outbox: the hot table. It only ever holds pending and running rows; a finished job leaves
-- it in the same statement that acknowledges it (history lives in delivery_log / dead_letters).
-- ---------------------------------------------------------------------------------------------
CREATE TABLE herald.outbox (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id           text NOT NULL,
    category          text NOT NULL,
    priority          smallint NOT NULL,
    payload           jsonb NOT NULL,
    options           jsonb NOT NULL DEFAULT '{}',
    dedup_key         text,
    state             text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running')),
    run_at            timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz NOT NULL,
    attempt           int NOT NULL DEFAULT 0,
    max_attempts      int NOT NULL,
    lease_owner       text,
    lease_expires_at  timestamptz,
    accepted_devices  bigint[] NOT NULL DEFAULT '{}',
    last_error        text,
    replay_of         bigint,
    created_at        timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000,
        autovacuum_vacuum_cost_delay = 0, vacuum_truncate = false);
-- Every claim and ack leaves dead tuples at the front of the claim index; vacuum must keep up
-- (docs/benchmarks.md). vacuum_truncate = false: truncating the table's empty tail takes an
-- ACCESS EXCLUSIVE lock that stalls every claim while vacuum waits for it.

-- Claim order: most urgent first, then oldest due. Partial, so only claimable rows are indexed.
CREATE INDEX outbox_claim ON herald.outbox (priority, run_at, id) WHERE state = 'pending';
-- The lease reaper and lease extension only look at running rows.
CREATE INDEX outbox_running ON herald.outbox (lease_expires_at) WHERE state = 'running';
-- cancel(dedup_key) and dedup lookups.
CREATE INDEX outbox_dedup_key ON herald.outbox (dedup_key) WHERE dedup_key IS NOT NULL;

-- Dedup reservations: (user, key) is sent once within the category's window.
CREATE TABLE herald.dedup_keys (
    user_id     text NOT NULL,
    dedup_key   text NOT NULL,
    category    text NOT NULL,
    job_id      bigint,
    expires_at  timestamptz,            -- NULL: forever
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, dedup_key)
);

-- ---------------------------------------------------------------------------------------------
-- History, inbox, dead letters, local-fallback recordings, presence, preferences.
-- ---------------------------------------------------------------------------------------------
CREATE TABLE herald.delivery_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL,
    user_id     text NOT NULL,
    category    text NOT NULL,
    device_id   bigint,
    provider    text,
    event       text NOT NULL,   -- attempt | suppressed | deferred | dead | cancelled | expired | replayed | released
    outcome     text,            -- accepted | retry | token_invalid | payload_rejected | credentials_broken | ...
    status      text NOT NULL,   -- the job's state after this record: done | pending | dead | cancelled | suppressed | expired
    reason      text,
    attempt     int NOT NULL DEFAULT 0,
    latency_ms  double precision,
    worker      text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_log_job ON herald.delivery_log (job_id);
CREATE INDEX delivery_log_user ON herald.delivery_log (user_id, created_at);
CREATE INDEX delivery_log_created ON herald.delivery_log USING brin (created_at);

CREATE TABLE herald.dead_letters (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          bigint NOT NULL UNIQUE,
    user_id         text NOT NULL,
    category        text NOT NULL,
    payload         jsonb NOT NULL,
    options         jsonb NOT NULL,
    dedup_key       text,
    attempts        int NOT NULL,
    last_error      text NOT NULL,
    enqueued_at     timestamptz NOT NULL,
    failed_at       timestamptz NOT NULL DEFAULT now(),
    replayed_at     timestamptz,
    replay_job_id   bigint
);
CREATE INDEX dead_letters_open ON herald.dead_letters (failed_at) WHERE replayed_at IS NULL;

CREATE TABLE herald.inbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     text NOT NULL,
    job_id      bigint,
    kind        text NOT NULL DEFAULT 'notification' CHECK (kind IN ('notification', 'alert')),
    category    text NOT NULL,
    title       text NOT NULL,
    body        text NOT NULL,
    route       text,
    metadata    jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    read_at     timestamptz,
    deleted_at  timestamptz
);
CREATE INDEX inbox_user ON herald.inbox (user_id, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX inbox_unread ON herald.inbox (user_id) WHERE read_at IS NULL AND deleted_at IS NULL;

-- What the local-fallback provider "showed": apps poll it, developers inspect it.
CREATE TABLE herald.local_notifications (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL,
    device_id   bigint NOT NULL,
    user_id     text NOT NULL,
    title       text NOT NULL,
    body        text NOT NULL,
    subtitle    text,
    route       text,
    data        jsonb NOT NULL DEFAULT '{}',
    collapse_id text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX local_notifications_user ON herald.local_notifications (user_id, created_at DESC);

CREATE TABLE herald.preferences (
    user_id      text PRIMARY KEY,
    preferences  jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(preferences) = 'object'),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE herald.presence (
    user_id     text NOT NULL,
    context     text NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (user_id, context)
);
