-- Herald 0003: Expo push tickets waiting for their receipts.
-- The Expo adapter records one row per accepted message; the maintenance leader's receipt
-- poller reads due rows (check_at <= now), asks Expo for their receipts, and settles them:
-- `ok` rows are deleted, errors stay (status 'error') for operators, resends replace the row,
-- and rows without a receipt after Expo's 24 h retention become 'expired'.

CREATE TABLE herald.expo_tickets (
    ticket_id   text PRIMARY KEY,
    device_id   bigint NOT NULL REFERENCES herald.devices (id) ON DELETE CASCADE,
    job_id      bigint NOT NULL,                  -- no FK: finished jobs leave the outbox
    app_id      text NOT NULL,
    message     jsonb NOT NULL,                   -- the message as sent (holds the device token)
    attempt     int NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    sent_at     timestamptz NOT NULL,
    check_at    timestamptz NOT NULL,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'error', 'expired')),
    error       text,
    settled_at  timestamptz
);
-- The poller's scan: pending tickets by due time.
CREATE INDEX expo_tickets_due ON herald.expo_tickets (check_at, ticket_id) WHERE status = 'pending';
-- Retention of settled rows.
CREATE INDEX expo_tickets_settled ON herald.expo_tickets (settled_at) WHERE status <> 'pending';
-- ON DELETE CASCADE from devices.
CREATE INDEX expo_tickets_device ON herald.expo_tickets (device_id);
