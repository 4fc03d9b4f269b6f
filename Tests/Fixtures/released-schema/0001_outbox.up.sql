-- Herald 0001: the outbox, devices, categories and the public SQL interface.
-- Applied by `herald migrate` inside one transaction under an advisory lock.
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

-- Priority rank used by the claim order: smaller is more urgent.
CREATE FUNCTION herald.priority_rank(p text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p WHEN 'critical' THEN 0 WHEN 'high' THEN 1 WHEN 'normal' THEN 2 WHEN 'low' THEN 3 END::smallint
$$;

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
-- (README "Benchmark"). vacuum_truncate = false: truncating the table's empty tail takes an
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

-- ---------------------------------------------------------------------------------------------
-- Validation helpers. Errors carry SQLSTATEs from the 22xxx (data) and 23xxx (integrity) classes.
-- ---------------------------------------------------------------------------------------------

-- Largest serialized payload accepted: the smallest provider body limit is 4096 bytes (APNs,
-- FCM, Expo, Web Push); 3,584 leaves room for the envelope each adapter adds (aps, data keys,
-- sentAtIso, collapse ids, encryption padding).
CREATE FUNCTION herald.max_payload_bytes() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 3584 $$;

CREATE FUNCTION herald.check_payload(payload jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k text;
    v jsonb;
    size int;
BEGIN
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' THEN
        RAISE EXCEPTION 'herald: payload must be a JSON object with "title" and "body"'
            USING ERRCODE = '22023';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(payload) LOOP
        IF k NOT IN ('title', 'body', 'subtitle', 'route', 'metadata', 'imageUrl', 'sound',
                     'threadId', 'actions', 'eventType', 'sentAtIso') THEN
            RAISE EXCEPTION 'herald: unknown payload key "%"', left(k, 64)
                USING ERRCODE = '22023',
                      HINT = 'allowed: title, body, subtitle, route, metadata, imageUrl, sound, threadId, actions, eventType, sentAtIso; put app data in metadata';
        END IF;
        IF k = 'metadata' THEN
            IF jsonb_typeof(v) <> 'object' THEN
                RAISE EXCEPTION 'herald: payload.metadata must be an object of string values'
                    USING ERRCODE = '22023';
            END IF;
            IF EXISTS (SELECT 1 FROM jsonb_each(v) m WHERE jsonb_typeof(m.value) <> 'string') THEN
                RAISE EXCEPTION 'herald: payload.metadata must map keys to strings (found a non-string value)'
                    USING ERRCODE = '22023';
            END IF;
        ELSIF k = 'actions' THEN
            IF jsonb_typeof(v) <> 'array' THEN
                RAISE EXCEPTION 'herald: payload.actions must be an array' USING ERRCODE = '22023';
            END IF;
        ELSIF jsonb_typeof(v) <> 'string' THEN
            RAISE EXCEPTION 'herald: payload.% must be a string', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF NOT (payload ? 'title') OR NOT (payload ? 'body') THEN
        RAISE EXCEPTION 'herald: payload must have "title" and "body"' USING ERRCODE = '22023';
    END IF;
    IF length(btrim(payload->>'title')) = 0 THEN
        RAISE EXCEPTION 'herald: payload.title must not be empty' USING ERRCODE = '22023';
    END IF;
    size := octet_length(payload::text);
    IF size > herald.max_payload_bytes() THEN
        RAISE EXCEPTION 'herald: payload is % bytes; the limit is % bytes (providers accept 4096 including their envelope)',
            size, herald.max_payload_bytes()
            USING ERRCODE = '22001';
    END IF;
END
$$;

-- Validates enqueue options and returns them normalized (timestamps as ISO-8601 text).
CREATE FUNCTION herald.check_options(options jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    k text;
    v jsonb;
    out jsonb := '{}';
    ts timestamptz;
BEGIN
    IF options IS NULL THEN
        RETURN '{}';
    END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'herald: options must be a JSON object' USING ERRCODE = '22023';
    END IF;
    FOR k, v IN SELECT * FROM jsonb_each(options) LOOP
        CASE k
        WHEN 'priority' THEN
            IF jsonb_typeof(v) <> 'string' OR (v #>> '{}') NOT IN ('critical', 'high', 'normal', 'low') THEN
                RAISE EXCEPTION 'herald: options.priority must be one of critical, high, normal, low'
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'deliverAt', 'expiresAt' THEN
            IF jsonb_typeof(v) <> 'string' THEN
                RAISE EXCEPTION 'herald: options.% must be an ISO-8601 timestamp string', k USING ERRCODE = '22007';
            END IF;
            BEGIN
                ts := (v #>> '{}')::timestamptz;
            EXCEPTION WHEN others THEN
                RAISE EXCEPTION 'herald: options.% is not a valid timestamp', k USING ERRCODE = '22007';
            END;
            IF ts < '2000-01-01'::timestamptz OR ts > '2200-01-01'::timestamptz OR ts IN ('infinity', '-infinity') THEN
                RAISE EXCEPTION 'herald: options.% is out of range (2000..2200)', k USING ERRCODE = '22008';
            END IF;
            v := to_jsonb(ts);
        WHEN 'dedupKey', 'coalesceKey', 'context', 'scope' THEN
            IF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') = 0 OR octet_length(v #>> '{}') > 256
               OR (v #>> '{}') ~ '[[:cntrl:]]' THEN
                RAISE EXCEPTION 'herald: options.% must be a non-empty string of at most 256 bytes without control characters', k
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'collapseId' THEN
            IF jsonb_typeof(v) <> 'string' OR length(v #>> '{}') = 0 OR octet_length(v #>> '{}') > 64 THEN
                RAISE EXCEPTION 'herald: options.collapseId must be a non-empty string of at most 64 bytes (APNs limit)'
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'silent', 'mandatory' THEN
            IF jsonb_typeof(v) <> 'boolean' THEN
                RAISE EXCEPTION 'herald: options.% must be a boolean', k USING ERRCODE = '22023';
            END IF;
        WHEN 'excludeDevice' THEN
            IF jsonb_typeof(v) <> 'number' THEN
                RAISE EXCEPTION 'herald: options.excludeDevice must be a device id' USING ERRCODE = '22023';
            END IF;
        WHEN 'geo' THEN
            IF jsonb_typeof(v) <> 'object' OR jsonb_typeof(v->'lat') IS DISTINCT FROM 'number'
               OR jsonb_typeof(v->'lon') IS DISTINCT FROM 'number'
               OR (v->>'lat')::float8 NOT BETWEEN -90 AND 90 OR (v->>'lon')::float8 NOT BETWEEN -180 AND 180 THEN
                RAISE EXCEPTION 'herald: options.geo must be {"lat": -90..90, "lon": -180..180}'
                    USING ERRCODE = '22023';
            END IF;
        WHEN 'requires' THEN
            IF jsonb_typeof(v) <> 'object' THEN
                RAISE EXCEPTION 'herald: options.requires must be an object of device attributes'
                    USING ERRCODE = '22023';
            END IF;
        ELSE
            RAISE EXCEPTION 'herald: unknown option "%"', left(k, 64)
                USING ERRCODE = '22023',
                      HINT = 'allowed: priority, dedupKey, coalesceKey, context, deliverAt, expiresAt, silent, collapseId, geo, requires, scope, mandatory, excludeDevice';
        END CASE;
        out := out || jsonb_build_object(k, v);
    END LOOP;
    RETURN out;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Public functions.
-- ---------------------------------------------------------------------------------------------

-- The shared body of enqueue and enqueue_many: validates once, inserts set-based, returns the
-- new job ids. Users whose dedup key is still reserved are skipped.
CREATE FUNCTION herald.enqueue_rows(user_ids text[], category text, payload jsonb, options jsonb)
RETURNS TABLE (job_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    cat herald.categories;
    opts jsonb;
    prio smallint;
    run_at_ timestamptz;
    expires_at_ timestamptz;
    key text;
BEGIN
    SELECT * INTO cat FROM herald.categories c WHERE c.name = enqueue_rows.category;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald: unknown category "%"', left(coalesce(enqueue_rows.category, 'NULL'), 64)
            USING ERRCODE = '23503', HINT = 'insert a row into herald.categories first';
    END IF;
    PERFORM herald.check_payload(payload);
    opts := herald.check_options(options);
    IF user_ids IS NULL THEN
        RAISE EXCEPTION 'herald: user_ids must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(user_ids) u WHERE u IS NULL OR length(u) = 0 OR octet_length(u) > 256) THEN
        RAISE EXCEPTION 'herald: every user id must be a non-empty string of at most 256 bytes'
            USING ERRCODE = '22023';
    END IF;
    prio := herald.priority_rank(coalesce(opts->>'priority', cat.priority));
    run_at_ := greatest(now(), coalesce((opts->>'deliverAt')::timestamptz, now()));
    expires_at_ := coalesce((opts->>'expiresAt')::timestamptz, run_at_ + cat.ttl);
    IF expires_at_ <= now() THEN
        RAISE EXCEPTION 'herald: options.expiresAt is already in the past' USING ERRCODE = '22008';
    END IF;
    key := opts->>'dedupKey';

    IF key IS NULL THEN
        RETURN QUERY
        INSERT INTO herald.outbox AS o (user_id, category, priority, payload, options, run_at, expires_at, max_attempts)
        SELECT DISTINCT u, cat.name, prio, payload, opts, run_at_, expires_at_, cat.max_attempts
        FROM unnest(user_ids) AS u
        RETURNING o.id;
        RETURN;
    END IF;

    -- Reserve the key per user; an expired reservation is taken over, a live one skips the user.
    RETURN QUERY
    WITH reserved AS (
        INSERT INTO herald.dedup_keys AS d (user_id, dedup_key, category, expires_at)
        SELECT DISTINCT u, key, cat.name, now() + cat.dedup_window FROM unnest(user_ids) AS u
        ON CONFLICT (user_id, dedup_key) DO UPDATE
            SET category = EXCLUDED.category, expires_at = EXCLUDED.expires_at,
                created_at = now(), job_id = NULL
            WHERE d.expires_at IS NOT NULL AND d.expires_at <= now()
        RETURNING d.user_id
    ), inserted AS (
        INSERT INTO herald.outbox AS o (user_id, category, priority, payload, options, dedup_key, run_at, expires_at, max_attempts)
        SELECT r.user_id, cat.name, prio, payload, opts, key, run_at_, expires_at_, cat.max_attempts
        FROM reserved r
        RETURNING o.id, o.user_id
    ), linked AS (
        UPDATE herald.dedup_keys d SET job_id = i.id
        FROM inserted i WHERE d.user_id = i.user_id AND d.dedup_key = key
    )
    SELECT i.id FROM inserted i;
END
$$;

-- Enqueues one notification per user in one set-based insert; returns how many were enqueued.
CREATE FUNCTION herald.enqueue_many(user_ids text[], category text, payload jsonb, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE sql AS $$
    SELECT count(*) FROM herald.enqueue_rows(user_ids, category, payload, options)
$$;

-- Enqueues one notification; returns the job id, or NULL when a dedup key already covers it.
CREATE FUNCTION herald.enqueue(user_id text, category text, payload jsonb, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    job bigint;
BEGIN
    IF user_id IS NULL OR length(user_id) = 0 THEN
        RAISE EXCEPTION 'herald: user_id must be a non-empty string' USING ERRCODE = '22004';
    END IF;
    SELECT r.job_id INTO job FROM herald.enqueue_rows(ARRAY[user_id], category, payload, options) r;
    RETURN job;
END
$$;

-- Cancels pending jobs with this dedup key and frees their reservations; returns how many.
CREATE FUNCTION herald.cancel(dedup_key text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    n int;
BEGIN
    WITH gone AS (
        DELETE FROM herald.outbox o
        WHERE o.dedup_key = cancel.dedup_key AND o.state = 'pending'
        RETURNING o.id, o.user_id, o.category, o.attempt
    ), logged AS (
        INSERT INTO herald.delivery_log (job_id, user_id, category, event, status, reason, attempt)
        SELECT id, user_id, category, 'cancelled', 'cancelled', 'cancelled_by_key', attempt FROM gone
    ), freed AS (
        DELETE FROM herald.dedup_keys d USING gone g
        WHERE d.user_id = g.user_id AND d.dedup_key = cancel.dedup_key
    )
    SELECT count(*) INTO n FROM gone;
    RETURN n;
END
$$;

CREATE FUNCTION herald.register_device(user_id text, provider text, token text, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    k text;
    id_ bigint;
    env text;
BEGIN
    IF user_id IS NULL OR length(user_id) = 0 OR octet_length(user_id) > 256 THEN
        RAISE EXCEPTION 'herald: user_id must be a non-empty string of at most 256 bytes' USING ERRCODE = '22023';
    END IF;
    IF provider IS NULL OR provider NOT IN ('apns', 'fcm', 'expo', 'webpush', 'local') THEN
        RAISE EXCEPTION 'herald: unknown provider "%"', left(coalesce(provider, 'NULL'), 32)
            USING ERRCODE = '22023', HINT = 'one of apns, fcm, expo, webpush, local';
    END IF;
    IF token IS NULL OR length(token) = 0 OR octet_length(token) > 4096 THEN
        RAISE EXCEPTION 'herald: device token must be a non-empty string of at most 4096 bytes' USING ERRCODE = '22023';
    END IF;
    IF options IS NULL THEN options := '{}'; END IF;
    IF jsonb_typeof(options) <> 'object' THEN
        RAISE EXCEPTION 'herald: register_device options must be a JSON object' USING ERRCODE = '22023';
    END IF;
    FOR k IN SELECT jsonb_object_keys(options) LOOP
        IF k NOT IN ('appId', 'environment', 'p256dh', 'auth', 'locale', 'timeZone', 'attributes') THEN
            RAISE EXCEPTION 'herald: unknown device option "%"', left(k, 64) USING ERRCODE = '22023',
                HINT = 'allowed: appId, environment, p256dh, auth, locale, timeZone, attributes';
        END IF;
        IF k = 'attributes' AND jsonb_typeof(options->k) <> 'object' THEN
            RAISE EXCEPTION 'herald: device option attributes must be an object' USING ERRCODE = '22023';
        ELSIF k <> 'attributes' AND jsonb_typeof(options->k) <> 'string' THEN
            RAISE EXCEPTION 'herald: device option % must be a string', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    env := coalesce(options->>'environment', 'production');
    IF env NOT IN ('sandbox', 'production') THEN
        RAISE EXCEPTION 'herald: environment must be sandbox or production' USING ERRCODE = '22023';
    END IF;
    IF options ? 'timeZone' AND NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = options->>'timeZone') THEN
        RAISE EXCEPTION 'herald: unknown time zone "%"', left(options->>'timeZone', 64) USING ERRCODE = '22023';
    END IF;
    IF provider = 'webpush' AND (NOT options ? 'p256dh' OR NOT options ? 'auth') THEN
        RAISE EXCEPTION 'herald: a webpush subscription needs options.p256dh and options.auth' USING ERRCODE = '22023';
    END IF;
    INSERT INTO herald.devices AS d (user_id, provider, token, app_id, environment, p256dh, auth, locale, time_zone, attributes)
    VALUES (user_id, provider, token, coalesce(options->>'appId', 'default'), env, options->>'p256dh',
            options->>'auth', options->>'locale', options->>'timeZone', coalesce(options->'attributes', '{}'))
    ON CONFLICT ON CONSTRAINT devices_provider_token_key DO UPDATE
        SET user_id = EXCLUDED.user_id, app_id = EXCLUDED.app_id, environment = EXCLUDED.environment,
            p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth, locale = EXCLUDED.locale,
            time_zone = EXCLUDED.time_zone, attributes = EXCLUDED.attributes,
            active = true, disabled_reason = NULL, disabled_at = NULL, registered_at = now()
    RETURNING d.id INTO id_;
    RETURN id_;
END
$$;

CREATE FUNCTION herald.unregister_device(provider text, token text) RETURNS boolean
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM herald.devices d WHERE d.provider = unregister_device.provider AND d.token = unregister_device.token
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

CREATE FUNCTION herald.set_presence(user_id text, context text, ttl interval) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF user_id IS NULL OR context IS NULL THEN
        RAISE EXCEPTION 'herald: set_presence needs a user_id and a context' USING ERRCODE = '22004';
    END IF;
    IF ttl IS NULL OR ttl <= interval '0' THEN
        DELETE FROM herald.presence p WHERE p.user_id = set_presence.user_id AND p.context = set_presence.context;
        RETURN;
    END IF;
    INSERT INTO herald.presence AS p (user_id, context, expires_at)
    VALUES (user_id, context, now() + least(ttl, interval '1 day'))
    ON CONFLICT ON CONSTRAINT presence_pkey DO UPDATE SET expires_at = EXCLUDED.expires_at;
END
$$;

-- One NOTIFY per inserting statement (never per row: NOTIFY takes a global lock at commit).
CREATE FUNCTION herald.notify_outbox() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('herald_outbox', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_notify AFTER INSERT ON herald.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION herald.notify_outbox();
