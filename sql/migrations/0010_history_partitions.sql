-- Herald 0010: history partitioned by day, so retention drops whole days.
--
-- `delivery_log`, `inbox` and `local_notifications` grow with every job and were pruned by
-- deleting rows, which left the tables and their indexes bloated and cost vacuum as much as
-- the deletes. Each becomes a table partitioned by `created_at` (range, one partition per UTC
-- day: `<table>_pYYYYMMDD`), plus:
--   * `<table>_legacy`: the table as it was, attached without copying as the partition of
--     everything before the first day (it goes whole once its last day is past retention;
--     until then retention deletes its rows in batches as before);
--   * `<table>_default`: rows no day partition takes (a day the maintenance pass did not
--     create in time, or a date far in the past or future); pruned row by row.
-- Day partitions are created ahead by every `herald migrate` and by the maintenance leader
-- (herald.prune_history, sql/functions/09_history.sql), which also drops the days past
-- retention. The primary keys become `(id, created_at)`: a partitioned table's unique keys
-- include its partition key. Ids still come from one identity sequence per table.
DO $$
DECLARE
    t text;
    first_day timestamptz;
    has_rows boolean;
    next_id bigint;
    worker text := (SELECT s.role_name FROM herald.security_roles s WHERE s.kind = 'worker');
    admin text := (SELECT s.role_name FROM herald.security_roles s WHERE s.kind = 'admin');
    r record;
BEGIN
    -- The badge is recipients.unread now (0009); listing a user's inbox uses inbox_recent.
    -- Each index a hot insert maintains at a random place costs more as the history grows.
    DROP INDEX herald.inbox_unread, herald.inbox_user;
    FOREACH t IN ARRAY ARRAY['delivery_log', 'inbox', 'local_notifications'] LOOP
        EXECUTE format('ALTER TABLE herald.%I RENAME TO %I', t, t || '_legacy');
        -- The old table's indexes keep their definitions under new names; attaching matches them
        -- to the new table's indexes instead of building them again.
        FOR r IN SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                 WHERE x.indrelid = format('herald.%I', t || '_legacy')::regclass AND NOT x.indisprimary LOOP
            EXECUTE format('ALTER INDEX herald.%I RENAME TO %I', r.relname, r.relname || '_legacy');
        END LOOP;
        -- The key and the identity move to the new table (their names with them).
        EXECUTE format('SELECT coalesce(max(id), 0) + 1 FROM herald.%I', t || '_legacy') INTO next_id;
        EXECUTE format('ALTER TABLE herald.%I DROP CONSTRAINT %I, ALTER COLUMN id DROP IDENTITY', t || '_legacy', t || '_pkey');
        EXECUTE format('CREATE TABLE herald.%I (LIKE herald.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE, '
                       'PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)', t, t || '_legacy');
        EXECUTE format('ALTER TABLE herald.%I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)', t, next_id);

        -- Row-level security as on every table apps read (0004).
        IF t <> 'delivery_log' THEN
            EXECUTE format('ALTER TABLE herald.%I ENABLE ROW LEVEL SECURITY', t);
            EXECUTE format('CREATE POLICY own_rows ON herald.%I FOR ALL TO PUBLIC '
                           'USING (user_id = (SELECT herald.current_user_id())) '
                           'WITH CHECK (user_id = (SELECT herald.current_user_id()))', t);
            EXECUTE format('CREATE POLICY worker_all ON herald.%I FOR ALL TO %I USING (true) WITH CHECK (true)', t, worker);
            EXECUTE format('CREATE POLICY admin_all ON herald.%I FOR ALL TO %I USING (true) WITH CHECK (true)', t, admin);
        END IF;
        -- Apps reach the history through the partitioned table only.
        FOR r IN SELECT s.role_name FROM herald.security_roles s
                 WHERE s.kind IN ('backend', 'app') AND EXISTS (SELECT 1 FROM pg_roles p WHERE p.rolname = s.role_name) LOOP
            EXECUTE format('REVOKE ALL ON herald.%I FROM %I', t || '_legacy', r.role_name);
        END LOOP;

        -- Whatever the old table holds stays where it is, as the partition before the first day.
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM herald.%I)', t || '_legacy') INTO has_rows;
        IF has_rows THEN
            EXECUTE format('SELECT date_trunc(''day'', greatest(now(), max(created_at)), ''UTC'') + interval ''1 day'' FROM herald.%I',
                           t || '_legacy') INTO first_day;
            EXECUTE format('ALTER TABLE herald.%I ATTACH PARTITION herald.%I FOR VALUES FROM (MINVALUE) TO (%L)',
                           t, t || '_legacy', first_day);
        ELSE
            EXECUTE format('DROP TABLE herald.%I', t || '_legacy');
        END IF;
        EXECUTE format('CREATE TABLE herald.%I PARTITION OF herald.%I DEFAULT', t || '_default', t);
    END LOOP;

    CREATE INDEX delivery_log_job ON herald.delivery_log (job_id);
    CREATE INDEX delivery_log_user ON herald.delivery_log (user_id, created_at);
    CREATE INDEX delivery_log_created ON herald.delivery_log USING brin (created_at);
    CREATE INDEX inbox_recent ON herald.inbox (user_id, created_at DESC);
    CREATE INDEX inbox_alert_job ON herald.inbox (job_id) WHERE kind = 'alert' AND resolved_at IS NULL;
    CREATE INDEX local_notifications_user ON herald.local_notifications (user_id, created_at DESC);
END
$$;
