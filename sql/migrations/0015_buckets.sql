-- Herald 0015: a bucket per user, the key every per-user table shares (docs/scaling.md).
--
-- Past one PostgreSQL the engine is Citus, which runs `FOR UPDATE … SKIP LOCKED` only in a
-- query that stays on one shard: an equality on the distribution column. A claim takes many
-- users at once, so `user_id` cannot be that column; `bucket` can: a hash of the user id
-- modulo the number of buckets, fixed at install, stored on every table a hot-path statement
-- reads or writes per user. Every hot-path statement names one bucket (`bucket = $n` on every
-- scan of these tables, checked by SchemaTests) and a worker's claims rotate through them
-- (Outbox). On one PostgreSQL the default is one bucket: every row's bucket is 0 and the
-- condition costs an equality on a constant.
--
-- The number comes from `herald migrate` (`database.buckets`, the session setting
-- `herald.buckets`), a power of two from 1 to 1024, and is kept in `herald.layout`; it cannot
-- change afterwards (every stored bucket would move). `herald.bucket_of` is created here with
-- the mask written into its body, so it is truly immutable for this database, as a stored
-- generated column requires.
DO $$
DECLARE
    n int := coalesce(nullif(current_setting('herald.buckets', true), '')::int, 1);
    t text;
BEGIN
    IF n < 1 OR n > 1024 OR (n & (n - 1)) <> 0 THEN
        RAISE EXCEPTION 'herald: database.buckets must be a power of two from 1 to 1024, not %', n
            USING ERRCODE = '22023';
    END IF;
    CREATE TABLE herald.layout (
        one     boolean PRIMARY KEY DEFAULT true CHECK (one),
        buckets int NOT NULL
    );
    INSERT INTO herald.layout (buckets) VALUES (n);
    EXECUTE format('CREATE FUNCTION herald.bucket_of(user_id text) RETURNS smallint '
                   'LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE '
                   'RETURN (hashtext(user_id) & %s)::smallint', n - 1);
    -- Every table with rows per user. Partitioned ones (the history) pass the column on to
    -- every partition, the one holding rows from before 0010 included.
    FOREACH t IN ARRAY ARRAY['outbox', 'recipients', 'devices', 'preferences', 'presence', 'inbox',
                             'delivery_log', 'local_notifications', 'dead_letters', 'dedup_keys'] LOOP
        EXECUTE format('ALTER TABLE herald.%I ADD COLUMN bucket smallint NOT NULL '
                       'GENERATED ALWAYS AS (herald.bucket_of(user_id)) STORED', t);
    END LOOP;
END
$$;

-- The claim walks one bucket's section of the queue: the bucket leads both claim indexes.
DROP INDEX herald.outbox_claim, herald.outbox_claim_scope;
CREATE INDEX outbox_claim ON herald.outbox (bucket, app_id, priority, run_at, id) WHERE state = 'pending';
CREATE INDEX outbox_claim_scope ON herald.outbox (bucket, app_id, (coalesce(options->>'scope', '')), priority, run_at, id)
    WHERE state = 'pending';
