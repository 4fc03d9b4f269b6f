-- Herald 0007: the kill switch and the operators' audit trail.
--
-- A pause holds a category, an app's categories, or everything (both NULL) until it is resumed
-- or its `until` passes. Held jobs stay in the outbox as pending with `run_at = 'infinity'`,
-- their due time kept in `paused_run_at`, so the claim index never walks them; resuming puts
-- the due time back. The functions are in sql/functions/08_control.sql.

CREATE TABLE herald.pauses (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    category    text REFERENCES herald.categories (name) ON DELETE CASCADE,
    app_id      text,
    until       timestamptz,
    paused_by   text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (category IS NULL OR app_id IS NULL)
);
-- One pause per target (a category, an app, or everything); pausing again moves its `until`.
CREATE UNIQUE INDEX pauses_target ON herald.pauses (category, app_id) NULLS NOT DISTINCT;

ALTER TABLE herald.outbox ADD COLUMN paused_run_at timestamptz;
-- Resume and the leader's sweep find held jobs without reading the outbox.
CREATE INDEX outbox_held ON herald.outbox (category) WHERE paused_run_at IS NOT NULL;

-- What operators did (pause, resume, cancel_pending, dead-letter actions): who, when, to what,
-- how many jobs it touched.
CREATE TABLE herald.audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text NOT NULL,
    action      text NOT NULL,
    target      jsonb NOT NULL DEFAULT '{}',
    jobs        bigint NOT NULL DEFAULT 0
);
CREATE INDEX audit_log_at ON herald.audit_log USING brin (at);
