-- Herald 0013: the last statements that bound parallel arrays take arrays of composite rows.
--
-- Like the acknowledgement's rows (0012), each batch a statement writes is one array of one of
-- these types, read by field name; nothing is stored in them.

-- A message the local-fallback provider showed (a herald.local_notifications row).
CREATE TYPE herald.local_record AS (
    job_id bigint, device_id bigint, user_id text, title text, body text, subtitle text, route text,
    data jsonb, collapse_id text);

-- An accepted Expo push ticket to check the receipt of (a herald.expo_tickets row); times in
-- epoch seconds.
CREATE TYPE herald.expo_ticket_record AS (
    ticket_id text, device_id bigint, job_id bigint, app_id text, message jsonb, attempt int,
    sent_at float8, check_at float8);

-- What the receipt poller decided for one ticket: `kind` ok, resent, error, disable, recheck or
-- expired, with its reason and, for a recheck, when (epoch s).
CREATE TYPE herald.expo_receipt_decision AS (ticket_id text, kind text, reason text, recheck_at float8);
