-- History partitions (migration 0010): day partitions created ahead, days past retention
-- dropped whole. Run by the maintenance leader's retention pass, one table per transaction,
-- and by every `herald migrate` (the last statement of this file).

-- The partitions of the three history tables with their bounds (NULL: unbounded or default).
CREATE OR REPLACE FUNCTION herald.history_partitions()
RETURNS TABLE(parent text, partition text, lower_bound timestamptz, upper_bound timestamptz, is_default boolean)
LANGUAGE sql STABLE SET search_path = pg_catalog, herald, pg_temp AS $$
    SELECT p.relname::text, c.relname::text,
           nullif(trim(both '''' FROM b.m[1]), 'MINVALUE')::timestamptz,
           nullif(trim(both '''' FROM b.m[2]), 'MAXVALUE')::timestamptz,
           b.m IS NULL
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    CROSS JOIN LATERAL (SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \((.*)\) TO \((.*)\)') AS m) b
    WHERE p.relnamespace = 'herald'::regnamespace AND p.relname IN ('delivery_log', 'inbox', 'local_notifications')
$$;

-- Creates the day partitions of `tbl` from today (UTC) to `days` days ahead that no partition
-- covers yet. A day whose rows already sit in the default partition is left to it (warning):
-- PostgreSQL refuses a partition that the default partition's rows would belong to.
-- Returns how many it created.
CREATE OR REPLACE FUNCTION herald.add_history_partitions(tbl text, days integer DEFAULT 3)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    day timestamptz;
    part text;
    unsampled text;
    created integer := 0;
BEGIN
    IF tbl IS NULL OR tbl NOT IN ('delivery_log', 'inbox', 'local_notifications') THEN
        RAISE EXCEPTION 'herald: % is not a history table', coalesce(tbl, 'NULL') USING ERRCODE = '22023';
    END IF;
    -- A new partition starts with default statistics targets: it takes the parent's zeros
    -- (migration 0018), so autovacuum's ANALYZE skips the same columns. Read once, one ALTER
    -- per partition.
    SELECT string_agg(format('ALTER COLUMN %I SET STATISTICS 0', a.attname), ', ' ORDER BY a.attnum) INTO unsampled
    FROM pg_attribute a
    WHERE a.attrelid = format('herald.%I', tbl)::regclass AND a.attnum > 0 AND NOT a.attisdropped
      AND a.attstattarget = 0;
    FOR day IN SELECT generate_series(date_trunc('day', now(), 'UTC'), date_trunc('day', now(), 'UTC') + make_interval(days => days),
                                      interval '1 day') LOOP
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM herald.history_partitions() h
            WHERE h.parent = tbl AND NOT h.is_default
              AND (h.lower_bound IS NULL OR h.lower_bound <= day) AND (h.upper_bound IS NULL OR h.upper_bound > day));
        BEGIN
            part := tbl || '_p' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD');
            EXECUTE format('CREATE TABLE herald.%I PARTITION OF herald.%I FOR VALUES FROM (%L) TO (%L)',
                           part, tbl, day, day + interval '1 day');
            IF unsampled IS NOT NULL THEN
                EXECUTE format('ALTER TABLE herald.%I ', part) || unsampled;
            END IF;
            created := created + 1;
        EXCEPTION WHEN check_violation THEN
            RAISE WARNING 'herald: rows of % for % are in %_default; that day stays there', tbl, day::date, tbl;
        END;
    END LOOP;
    RETURN created;
END
$$;

-- Retention for one history table: creates the coming days' partitions, drops the partitions
-- whose every row is older than `keep_seconds`, and deletes at most `lim` rows older than that
-- from the partitions that span many days (default and legacy). An inbox partition's unread
-- rows leave the users' badges (recipients.unread) before it goes; the table is locked first,
-- so no statement changes those rows in between (and the lock order, table then recipients,
-- is the one every inbox writer follows). One replica at a time per table; the others return
-- zeros. Returns rows deleted, partitions dropped, partitions created.
CREATE OR REPLACE FUNCTION herald.prune_history(tbl text, keep_seconds double precision, lim integer)
RETURNS TABLE(deleted bigint, dropped integer, created integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    cutoff timestamptz := now() - make_interval(secs => keep_seconds);
    part record;
    n bigint;
    users text[];
    deltas integer[];
BEGIN
    deleted := 0; dropped := 0; created := 0;
    IF tbl IS NULL OR tbl NOT IN ('delivery_log', 'inbox', 'local_notifications') THEN
        RAISE EXCEPTION 'herald: % is not a history table', coalesce(tbl, 'NULL') USING ERRCODE = '22023';
    END IF;
    -- Creating and dropping partitions locks the table against every reader and writer: wait
    -- for them at most 5 s (the next pass tries again), so the queue never stalls behind it.
    PERFORM set_config('lock_timeout', '5s', true);
    IF NOT pg_try_advisory_xact_lock(72630002, hashtext(tbl)) THEN
        RETURN NEXT;
        RETURN;
    END IF;
    created := herald.add_history_partitions(tbl);

    FOR part IN SELECT h.partition FROM herald.history_partitions() h
                WHERE h.parent = tbl AND h.upper_bound <= cutoff ORDER BY h.upper_bound LOOP
        IF tbl = 'inbox' THEN
            LOCK TABLE herald.inbox IN ACCESS EXCLUSIVE MODE;
            EXECUTE format(
                'SELECT array_agg(g.user_id), array_agg(-g.n) FROM ('
                '    SELECT user_id, count(*)::int AS n FROM herald.%I'
                '    WHERE read_at IS NULL AND deleted_at IS NULL GROUP BY user_id) g', part.partition)
                INTO users, deltas;
            IF users IS NOT NULL THEN
                PERFORM herald.add_unread(users, deltas);
            END IF;
        END IF;
        EXECUTE format('DROP TABLE herald.%I', part.partition);
        dropped := dropped + 1;
    END LOOP;

    FOR part IN SELECT h.partition FROM herald.history_partitions() h
                WHERE h.parent = tbl AND (h.is_default OR h.lower_bound IS NULL) LOOP
        -- Every history table has user_id; the inbox's unread rows also leave the badges.
        EXECUTE format(
            'WITH gone AS ('
            '    DELETE FROM herald.%1$I WHERE ctid = ANY (ARRAY(SELECT ctid FROM herald.%1$I WHERE created_at < $1 LIMIT $2))'
            '    RETURNING %2$s AS unread, user_id'
            ') SELECT count(*), array_agg(user_id) FILTER (WHERE unread), array_agg(-1) FILTER (WHERE unread) FROM gone',
            part.partition, CASE WHEN tbl = 'inbox' THEN 'read_at IS NULL AND deleted_at IS NULL' ELSE 'false' END)
            USING cutoff, lim INTO n, users, deltas;
        IF users IS NOT NULL THEN
            PERFORM herald.add_unread(users, deltas);
        END IF;
        deleted := deleted + n;
    END LOOP;
    RETURN NEXT;
END
$$;

SELECT herald.add_history_partitions(t) FROM unnest(ARRAY['delivery_log', 'inbox', 'local_notifications']) t;
