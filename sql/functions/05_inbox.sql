-- The in-app inbox: read, dismiss, history and actions, synced to the user's other devices.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

-- Adds `deltas[i]` to the unread count (the badge, `recipients.unread`, migration 0009) of
-- `users[i]`, summed per user, creating missing recipient rows. The one writer of the counter
-- besides TRUNCATE: rows are locked in user order, so two statements changing the same users'
-- counts cannot deadlock here.
CREATE OR REPLACE FUNCTION herald.add_unread(users text[], deltas integer[])
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
    INSERT INTO herald.recipients AS r (user_id, unread)
    SELECT d.user_id, sum(d.n) FROM unnest(users, deltas) AS d(user_id, n)
    GROUP BY d.user_id HAVING sum(d.n) <> 0 ORDER BY d.user_id
    ON CONFLICT (user_id) DO UPDATE SET unread = r.unread + excluded.unread
$$;

-- A recipient's recent sends (`recipients.sends`, migration 0016) with `more` appended, cut to
-- those of the last day, the newest 100, oldest first. The claim reads the same window
-- (`OutboxStatements.historyWindow`, `historyLimit`).
CREATE OR REPLACE FUNCTION herald.trim_sends(sends herald.recent_send[], more herald.recent_send[])
RETURNS herald.recent_send[]
LANGUAGE sql STABLE SET search_path = pg_catalog, herald, pg_temp AS $$
    SELECT coalesce(array_agg(ROW(k.category, k.coalesce_key, k.scope, k.at)::herald.recent_send ORDER BY k.at, k.ord), '{}')
    FROM (SELECT * FROM unnest(sends || more) WITH ORDINALITY AS x(category, coalesce_key, scope, at, ord)
          WHERE x.at > now() - interval '1 day'
          ORDER BY x.at DESC, x.ord DESC LIMIT 100) k
$$;

-- `sends` (oldest first) with `more` (within the day, oldest first) appended. While the oldest
-- send is within the day and `more` is not older than the newest send, the list stays sorted by
-- appending, and past 100 it is cut to its newest 100 by a slice; otherwise (an ack that
-- committed out of time order, a send that has left the day) trim_sends sorts and cuts it. An
-- append is what an ack does for every user it served, and a heavy user's list is full:
-- trim_sends on every ack cost 40 µs per user, a third of the ack's time once every user had 100
-- sends (`make bench-churn`). PL/pgSQL, not SQL: the stored list is compressed, and the SQL
-- version, inlined into the trigger's upsert, named the column seven times and so decompressed
-- it seven times per user (LZ4 decompression was the churned benchmark's largest cost beyond the
-- fresh one); PL/pgSQL turns an array argument into its expanded form once, on entry. 10,000
-- full lists: 8.5 µs a user before, 5 µs after. It names only pg_catalog's functions and
-- operators and herald's, qualified; no SET clause (its cost per call is most of the function's).
CREATE OR REPLACE FUNCTION herald.append_sends(sends herald.recent_send[], more herald.recent_send[])
RETURNS herald.recent_send[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n integer := pg_catalog.cardinality(sends);
    m integer := pg_catalog.cardinality(more);
BEGIN
    IF m = 0 THEN
        RETURN sends;
    END IF;
    IF n = 0 OR ((sends[1]).at > pg_catalog.now() - interval '1 day' AND (sends[n]).at <= (more[1]).at) THEN
        IF n + m <= 100 THEN
            RETURN sends || more;
        END IF;
        RETURN (sends || more)[n + m - 99:];
    END IF;
    RETURN herald.trim_sends(sends, more);
END
$$;

-- The user's recent sends as the inbox holds them now (after a statement deleted some).
CREATE OR REPLACE FUNCTION herald.sends_from_inbox(user_id text)
RETURNS herald.recent_send[]
LANGUAGE sql STABLE SET search_path = pg_catalog, herald, pg_temp AS $$
    SELECT coalesce(array_agg(ROW(n.category, n.coalesce_key, n.scope, n.created_at)::herald.recent_send
                              ORDER BY n.created_at, n.id), '{}')
    FROM (SELECT * FROM herald.inbox i
          WHERE i.user_id = sends_from_inbox.user_id AND i.kind = 'notification'
            AND i.created_at > now() - interval '1 day'
          ORDER BY i.created_at DESC, i.id DESC LIMIT 100) n
$$;

-- Reads the recent sends of `users` again from the inbox (a delete or an update changed them),
-- creating the recipient row of a user who has sends but no row yet; rows locked in user order.
CREATE OR REPLACE FUNCTION herald.reread_sends(users text[])
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
    INSERT INTO herald.recipients AS r (user_id, sends)
    SELECT u.user_id, u.sends
    FROM (SELECT d.user_id, herald.sends_from_inbox(d.user_id) AS sends
          FROM (SELECT DISTINCT x AS user_id FROM unnest(users) AS x) d) u
    WHERE u.sends <> '{}' OR EXISTS (SELECT 1 FROM herald.recipients r0 WHERE r0.user_id = u.user_id)
    ORDER BY u.user_id
    ON CONFLICT (user_id) DO UPDATE SET sends = excluded.sends WHERE r.sends IS DISTINCT FROM excluded.sends
$$;

-- Keeps `recipients.unread` equal to the user's unread inbox rows (read_at and deleted_at NULL):
-- each statement that inserts, updates or deletes inbox rows adds its net change per user,
-- once, after the statement, whoever runs it. TRUNCATE leaves none unread. Keeps
-- `recipients.sends` too (migration 0016): an insert appends its `notification` rows, in the
-- same upsert as the count (one new row version per user); a delete, or an update that changes
-- what a send is (not reading or dismissing: those keep it a send), reads the user's sends
-- again from the inbox. The worker's acknowledgement adds its own inserts itself (see
-- `herald_ack` in OutboxStatements.swift) and sets `herald.inbox_counted` for its transaction.
CREATE OR REPLACE FUNCTION herald.inbox_unread()
RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    users text[];
    deltas integer[];
    changed text[];
BEGIN
    -- One query per event: each names only the transition tables its event has.
    IF TG_OP = 'INSERT' THEN
        -- The worker's acknowledgement counts its own inserts in the same update that releases
        -- the batch's recipients (one row version per user instead of two) and says so for its
        -- transaction, which is that one statement.
        IF pg_catalog.current_setting('herald.inbox_counted', true) = 'on' THEN
            RETURN NULL;
        END IF;
        -- Rows locked in user order, as add_unread does.
        INSERT INTO herald.recipients AS r (user_id, unread, sends)
        SELECT n.user_id, n.unread, herald.append_sends('{}', n.sends)
        FROM (SELECT a.user_id, count(*) FILTER (WHERE a.read_at IS NULL AND a.deleted_at IS NULL) AS unread,
                     coalesce(array_agg(ROW(a.category, a.coalesce_key, a.scope, a.created_at)::herald.recent_send
                                        ORDER BY a.created_at, a.id)
                              FILTER (WHERE a.kind = 'notification' AND a.created_at > now() - interval '1 day'),
                              '{}') AS sends
              FROM added a GROUP BY a.user_id) n
        WHERE n.unread <> 0 OR n.sends <> '{}'
        ORDER BY n.user_id
        ON CONFLICT (user_id) DO UPDATE SET
            unread = r.unread + excluded.unread,
            sends = herald.append_sends(r.sends, excluded.sends);
        RETURN NULL;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT array_agg(c.user_id), array_agg(c.n) INTO users, deltas FROM (
            SELECT a.user_id, 1 AS n FROM added a WHERE a.read_at IS NULL AND a.deleted_at IS NULL
            UNION ALL
            SELECT g.user_id, -1 FROM gone g WHERE g.read_at IS NULL AND g.deleted_at IS NULL) c;
        -- Reading or dismissing changes no send; a statement that changed what a send is
        -- (its time, category, key, scope, kind or user) reads those users' sends again.
        -- Each row's old and new version, by id: the user of either side that is a send.
        SELECT array_agg(DISTINCT side.user_id) INTO changed
        FROM added a FULL JOIN gone g ON g.id = a.id
        CROSS JOIN LATERAL (VALUES (a.user_id, a.kind), (g.user_id, g.kind)) AS side(user_id, kind)
        WHERE (a.user_id, a.kind, a.category, a.coalesce_key, a.scope, a.created_at)
              IS DISTINCT FROM (g.user_id, g.kind, g.category, g.coalesce_key, g.scope, g.created_at)
          AND side.kind = 'notification';
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(g.user_id), array_agg(-1) INTO users, deltas
        FROM gone g WHERE g.read_at IS NULL AND g.deleted_at IS NULL;
        SELECT array_agg(DISTINCT g.user_id) INTO changed
        FROM gone g WHERE g.kind = 'notification' AND g.created_at > now() - interval '1 day';
    ELSE
        UPDATE herald.recipients SET unread = 0, sends = '{}' WHERE unread <> 0 OR sends <> '{}';
        RETURN NULL;
    END IF;
    IF users IS NOT NULL THEN
        PERFORM herald.add_unread(users, deltas);
    END IF;
    IF changed IS NOT NULL THEN
        PERFORM herald.reread_sends(changed);
    END IF;
    RETURN NULL;
END
$$;

-- The inbox's counter triggers, created once each (a transition table takes one event per
-- trigger); re-creating them on every migrate would lock the inbox against writes.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('inbox_unread_insert', 'INSERT', 'NEW TABLE AS added'),
        ('inbox_unread_update', 'UPDATE', 'OLD TABLE AS gone NEW TABLE AS added'),
        ('inbox_unread_delete', 'DELETE', 'OLD TABLE AS gone')) AS v(name, event, tables)
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'herald.inbox'::regclass AND tgname = t.name) THEN
            EXECUTE format('CREATE TRIGGER %I AFTER %s ON herald.inbox REFERENCING %s '
                           'FOR EACH STATEMENT EXECUTE FUNCTION herald.inbox_unread()', t.name, t.event, t.tables);
        END IF;
    END LOOP;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'herald.inbox'::regclass AND tgname = 'inbox_unread_truncate') THEN
        CREATE TRIGGER inbox_unread_truncate AFTER TRUNCATE ON herald.inbox
            FOR EACH STATEMENT EXECUTE FUNCTION herald.inbox_unread();
    END IF;
END
$$;

-- Locks the user's recipient row before a function changes their inbox rows, creating it when
-- missing. The counter trigger locks it after the rows, at the end of the statement; taking it
-- first makes a user's inbox functions (two devices reading at once) and the ack (which holds the
-- row while it resolves alerts) queue on one row instead of locking the same inbox rows in
-- different orders and deadlocking. Always a row to lock: a user's first inbox rows and their
-- recipient row may be committing meanwhile (the inbox trigger creates the row), and a function
-- that found no row to lock then changed those rows once they committed and met, at its
-- trigger, the row another function had locked first while waiting for those very rows (40P01,
-- seen in `UnreadCounterTests`). The insert waits for such an uncommitted row instead. A new
-- row's counts (none unread, no sends) are right: the trigger creates the row with any inbox
-- row that is unread or a send.
CREATE OR REPLACE FUNCTION herald.lock_recipient(user_id text)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
    INSERT INTO herald.recipients (user_id)
    SELECT lock_recipient.user_id
    WHERE NOT EXISTS (SELECT 1 FROM herald.recipients r WHERE r.user_id = lock_recipient.user_id)
    ON CONFLICT (user_id) DO NOTHING;
    SELECT NULL::void FROM herald.recipients r WHERE r.user_id = lock_recipient.user_id FOR NO KEY UPDATE;
$$;

-- The one body behind mark_read, mark_all_read, dismiss and dismiss_all (0002), now checking
-- the caller may act for `user_id` first.
CREATE OR REPLACE FUNCTION herald.change_inbox(user_id text, ids bigint[], dismiss boolean, from_device bigint)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    PERFORM herald.authorize_user(user_id);
    PERFORM herald.lock_recipient(user_id);
    WITH r AS (
        UPDATE herald.inbox i
        SET read_at = coalesce(i.read_at, now()), deleted_at = CASE WHEN dismiss THEN now() ELSE i.deleted_at END
        WHERE i.user_id = change_inbox.user_id AND (ids IS NULL OR i.id = ANY (ids)) AND i.deleted_at IS NULL
          AND (dismiss OR i.read_at IS NULL)
        RETURNING i.id
    )
    SELECT array_agg(r.id ORDER BY r.id) INTO changed FROM r;
    IF changed IS NOT NULL THEN
        PERFORM herald.enqueue_sync(
            user_id,
            CASE WHEN dismiss THEN 'dismiss' ELSE 'read' END || CASE WHEN ids IS NULL THEN '_all' ELSE '' END,
            CASE WHEN ids IS NULL THEN '{}' ELSE changed END, from_device);
    END IF;
    RETURN coalesce(cardinality(changed), 0);
END
$$;

-- Marks inbox rows read; the badge follows and the user's other devices get a silent sync.
-- `from_device` (optional) is the device the user read them on: it is not synced.
CREATE OR REPLACE FUNCTION herald.mark_read(user_id text, ids bigint[], from_device bigint DEFAULT NULL::bigint)
RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$ SELECT herald.change_inbox(user_id, coalesce(ids, '{}'), false, from_device) $$;

CREATE OR REPLACE FUNCTION herald.mark_all_read(user_id text, from_device bigint DEFAULT NULL::bigint)
RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$ SELECT herald.change_inbox(user_id, NULL, false, from_device) $$;

-- Deletes inbox rows from the history (seed 000 8.5) and dismisses them on the other devices.
CREATE OR REPLACE FUNCTION herald.dismiss(user_id text, ids bigint[], from_device bigint DEFAULT NULL::bigint)
RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$ SELECT herald.change_inbox(user_id, coalesce(ids, '{}'), true, from_device) $$;

-- Clears the whole history (seed 000 8.5 "clear all") and dismisses it on the other devices.
CREATE OR REPLACE FUNCTION herald.dismiss_all(user_id text, from_device bigint DEFAULT NULL::bigint)
RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$ SELECT herald.change_inbox(user_id, NULL, true, from_device) $$;

-- The user's latest notifications, newest first: `delivered` (a device took it), `fallback`
-- (no push device took it; the app's notification center shows it) or `failed` (a critical
-- notification that could not be delivered: its in-app alert; `delivered` once push succeeded
-- after all), and what the user did with it (`opened` or an action id, NULL if nothing).
CREATE OR REPLACE FUNCTION herald.history(user_id text, lim integer DEFAULT 50)
RETURNS TABLE(inbox_id bigint, created_at timestamp with time zone, category text, title text, status text, action text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
BEGIN
    PERFORM herald.authorize_user(history.user_id);
    IF lim IS NULL OR lim < 1 OR lim > 500 THEN
        RAISE EXCEPTION 'herald: history limit must be between 1 and 500' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT i.id, i.created_at, i.category, i.title,
           CASE WHEN i.kind = 'alert' AND i.resolved_at IS NULL THEN 'failed'
                WHEN i.kind = 'alert' THEN 'delivered'
                WHEN i.job_id IS NOT NULL AND EXISTS (
                    SELECT 1 FROM herald.delivery_log l WHERE l.job_id = i.job_id AND l.event = 'fallback')
                    THEN 'fallback'
                ELSE 'delivered' END,
           i.action
    FROM herald.inbox i
    WHERE i.user_id = history.user_id AND i.deleted_at IS NULL
    ORDER BY i.created_at DESC, i.id DESC
    LIMIT lim;
END
$$;

-- Records what the user did with one of their notifications: `opened` or the id of the action
-- they tapped. The notification is read from then on (other devices' badges follow). Returns
-- false when the user has no such notification.
CREATE OR REPLACE FUNCTION herald.record_action(user_id text, inbox_id bigint, action text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    was_unread boolean;
BEGIN
    PERFORM herald.authorize_user(record_action.user_id);
    IF action IS NULL OR action !~ '^[A-Za-z0-9_.:-]{1,64}$' THEN
        RAISE EXCEPTION 'herald: action must be "opened" or an action id (1 to 64 letters, digits, _ . : -)'
            USING ERRCODE = '22023';
    END IF;
    PERFORM herald.lock_recipient(record_action.user_id);
    UPDATE herald.inbox i SET action = record_action.action, acted_at = now()
    WHERE i.id = record_action.inbox_id AND i.user_id = record_action.user_id AND i.deleted_at IS NULL
    RETURNING i.read_at IS NULL INTO was_unread;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF was_unread THEN
        PERFORM herald.change_inbox(record_action.user_id, ARRAY[record_action.inbox_id], false, NULL);
    END IF;
    RETURN true;
END
$$;
