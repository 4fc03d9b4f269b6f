-- What happened to each job of the demo, from herald.delivery_log (the "why" of every send).
\pset footer off
\echo
\echo '== Every job: final state and why =='
SELECT l.job_id AS job, l.user_id AS "user", l.category,
       (array_agg(l.status ORDER BY l.id DESC))[1] AS state,
       string_agg(DISTINCT coalesce(l.provider || ':' || l.outcome || '(' || l.reason || ')', l.event || '(' || l.reason || ')'), ', ') AS detail,
       max(l.attempt) AS attempts
FROM herald.delivery_log l
GROUP BY l.job_id, l.user_id, l.category
ORDER BY l.job_id;
\echo '== Still queued (scheduled, deferred by quiet hours) =='
SELECT id AS job, user_id AS "user", category, to_char(run_at, 'HH24:MI:SS') AS due_at, last_error AS why FROM herald.outbox ORDER BY id;
\echo '== What users saw (herald.inbox: the history screen; summaries included) =='
SELECT user_id AS "user", category, title, body, summary_count AS folded FROM herald.inbox WHERE kind = 'notification' AND user_id IN ('alice', 'frank') ORDER BY id;
\echo '== Dead letters (herald dlq list) =='
SELECT id, job_id, user_id, category, attempts, last_error FROM herald.dead_letters ORDER BY id;
\echo '== In-app alerts for critical notifications that could not be delivered =='
SELECT user_id, kind, title, body FROM herald.inbox WHERE kind = 'alert' ORDER BY id;
\echo '== Devices disabled because the provider said the token is dead =='
SELECT user_id, provider, disabled_reason FROM herald.devices WHERE NOT active;
\echo '== Recorded by the local-fallback provider (herald.local_notifications) =='
SELECT count(*) AS local_notifications, count(DISTINCT user_id) AS users FROM herald.local_notifications;
