-- Herald 0016: a recipient's recent sends on its row.
--
-- Rate limits, quotas and coalescing windows read what a recipient was sent lately. The claim
-- read it from the inbox: up to 100 rows of the last day per recipient, one index probe and a
-- row per send, which was most of what a claim with policy cost beyond one without (about
-- 0.05 ms per user, 24 ms of a 60 ms claim of 500). `recipients.sends` holds the same list —
-- each `notification` row's category, coalesce key, scope and time, the newest 100 of the last
-- day, in the order they were written — kept by the inbox's statement triggers
-- (sql/functions/05_inbox.sql) in the same transaction as the rows, whoever writes them; the
-- claim reads it from the recipient row it holds and updates anyway, and sorts it by time.
--
-- Invariant: for every user, `sends` holds the user's `notification` inbox rows of the day
-- before its last change, newest 100 (the claim drops those that have since left the day).
-- The backfill below and the triggers' new bodies (the functions step of the same migrate
-- transaction) happen under a lock that keeps writers out of the inbox meanwhile.
LOCK TABLE herald.inbox IN SHARE ROW EXCLUSIVE MODE;

CREATE TYPE herald.recent_send AS (category text, coalesce_key text, scope text, at timestamptz);

ALTER TABLE herald.recipients ADD COLUMN sends herald.recent_send[] NOT NULL DEFAULT '{}';

INSERT INTO herald.recipients AS r (user_id, sends)
SELECT u.user_id, s.sends
FROM (SELECT DISTINCT i.user_id FROM herald.inbox i
      WHERE i.kind = 'notification' AND i.created_at > now() - interval '1 day') u
CROSS JOIN LATERAL (
    SELECT array_agg(ROW(n.category, n.coalesce_key, n.scope, n.created_at)::herald.recent_send
                     ORDER BY n.created_at, n.id) AS sends
    FROM (SELECT * FROM herald.inbox i
          WHERE i.user_id = u.user_id AND i.kind = 'notification' AND i.created_at > now() - interval '1 day'
          ORDER BY i.created_at DESC, i.id DESC LIMIT 100) n) s
ON CONFLICT (user_id) DO UPDATE SET sends = excluded.sends;
