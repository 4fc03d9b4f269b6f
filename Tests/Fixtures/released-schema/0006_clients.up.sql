-- Herald 0006: what each device receives, in the user's language, and what the app can ask back.
--
-- - Summaries list their items: a summary job remembers the ids and titles of the jobs folded
--   into it (newest first, the latest 50), so its push can list them ({titles}) and carry their
--   ids (summarizedIds).
-- - A payload may carry `localized` variants ({"sv": {"title", "body", "subtitle"}}); each
--   device gets the one for its locale.
-- - The app can ask back: herald.history (the user's last notifications with status and
--   action), herald.record_action (what the user did with one), herald.diagnose (why a user did
--   or did not get a notification); register_device records the permission state.

ALTER TABLE herald.outbox
    ADD COLUMN summarized_ids bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN summarized_titles text[] NOT NULL DEFAULT '{}';
ALTER TABLE herald.devices
    ADD COLUMN permission text CHECK (permission IN ('granted', 'provisional', 'denied'));
ALTER TABLE herald.inbox
    ADD COLUMN action text,
    ADD COLUMN acted_at timestamptz;

-- How many folded items a summary remembers (its count is exact beyond that).
CREATE FUNCTION herald.max_summary_items() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 50 $$;
REVOKE EXECUTE ON FUNCTION herald.max_summary_items() FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Payload check with `localized` variants. A variant replaces title, body and subtitle for
-- devices of its locale; its body is shortened like the payload's own, its other fields count
-- against the same 1,536-byte bound together with the payload's non-body fields. 0005's check
-- stays as it is under another name and judges the payload without its variants.
-- ---------------------------------------------------------------------------------------------
ALTER FUNCTION herald.check_payload(jsonb) RENAME TO check_payload_unlocalized;

CREATE FUNCTION herald.check_payload(payload jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    variants jsonb := CASE WHEN jsonb_typeof(payload) = 'object' THEN payload->'localized' END;
    tag text;
    variant jsonb;
    k text;
    widest int := 0;
    size int;
BEGIN
    PERFORM herald.check_payload_unlocalized(CASE WHEN variants IS NULL THEN payload ELSE payload - 'localized' END);
    -- summarizedIds travels beside Herald's other data keys (FCM data is one flat map).
    IF payload->'metadata' ? 'summarizedIds' THEN
        RAISE EXCEPTION 'herald: payload.metadata key "summarizedIds" is reserved' USING ERRCODE = '22023',
            HINT = 'a summary carries the ids it stands for under summarizedIds';
    END IF;
    IF variants IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(variants) <> 'object' THEN
        RAISE EXCEPTION 'herald: payload.localized must be an object of locales, e.g. {"sv": {"title": "…", "body": "…"}}'
            USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(variants)) > 32 THEN
        RAISE EXCEPTION 'herald: payload.localized has more than 32 locales' USING ERRCODE = '22023';
    END IF;
    FOR tag, variant IN SELECT * FROM jsonb_each(variants) LOOP
        IF tag !~ '^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$' THEN
            RAISE EXCEPTION 'herald: payload.localized key "%" is not a locale', left(tag, 64)
                USING ERRCODE = '22023', HINT = 'a BCP 47 tag such as sv, sv-SE or pt-BR';
        END IF;
        IF jsonb_typeof(variant) <> 'object' THEN
            RAISE EXCEPTION 'herald: payload.localized.% must be an object with title, body or subtitle', tag
                USING ERRCODE = '22023';
        END IF;
        FOR k IN SELECT jsonb_object_keys(variant) LOOP
            IF k NOT IN ('title', 'body', 'subtitle') THEN
                RAISE EXCEPTION 'herald: unknown key "%" in payload.localized.%', left(k, 64), tag
                    USING ERRCODE = '22023', HINT = 'allowed: title, body, subtitle';
            END IF;
            IF jsonb_typeof(variant->k) <> 'string' THEN
                RAISE EXCEPTION 'herald: payload.localized.%.% must be a string', tag, k USING ERRCODE = '22023';
            END IF;
        END LOOP;
        IF variant ? 'title' AND length(btrim(variant->>'title')) = 0 THEN
            RAISE EXCEPTION 'herald: payload.localized.%.title must not be empty', tag USING ERRCODE = '22023';
        END IF;
        IF octet_length(coalesce(variant->>'body', '')) > herald.max_payload_bytes() THEN
            RAISE EXCEPTION 'herald: payload.localized.%.body is % bytes; the limit is % bytes', tag,
                octet_length(variant->>'body'), herald.max_payload_bytes() USING ERRCODE = '22001';
        END IF;
        widest := greatest(widest, octet_length((variant - 'body')::text));
    END LOOP;
    size := octet_length((payload - 'body' - 'localized')::text) + widest;
    IF size > herald.max_payload_fields_bytes() THEN
        RAISE EXCEPTION 'herald: payload fields other than "body" are % bytes with the widest localized variant; the limit is % bytes',
            size, herald.max_payload_fields_bytes()
            USING ERRCODE = '22001',
                  HINT = 'a push shows a preview of the body, shortened to fit each provider; the other fields (title, subtitle, metadata, actions, a variant''s title and subtitle, ...) are sent whole, some twice';
    END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION herald.check_payload(jsonb) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- register_device: the `permission` option (granted, provisional, denied) is stored with the
-- device; each registration states it anew (absent: unknown). Herald still sends to a device
-- whose permission is denied (silent syncs work, and the app may be re-allowed at any time);
-- herald.diagnose says so.
-- ---------------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION herald.register_device(user_id text, provider text, token text, options jsonb DEFAULT '{}')
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    permission_ text;
    id_ bigint;
BEGIN
    IF length(user_id) > 0 AND octet_length(user_id) <= 256 THEN
        PERFORM herald.authorize_user(user_id);
    END IF;
    IF jsonb_typeof(options) = 'object' AND options ? 'permission' THEN
        permission_ := options->>'permission';
        IF jsonb_typeof(options->'permission') <> 'string' OR permission_ NOT IN ('granted', 'provisional', 'denied') THEN
            RAISE EXCEPTION 'herald: device option permission must be granted, provisional or denied'
                USING ERRCODE = '22023';
        END IF;
        options := options - 'permission';
    END IF;
    id_ := herald.register_device_unchecked(user_id, provider, token, options);
    UPDATE herald.devices d SET permission = permission_ WHERE d.id = id_;
    RETURN id_;
END
$$;
ALTER FUNCTION herald.register_device(text, text, text, jsonb) SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp;

-- ---------------------------------------------------------------------------------------------
-- What the app can ask back. Each checks that the caller may act for `user_id` (42501 if not).
-- ---------------------------------------------------------------------------------------------

-- The user's latest notifications, newest first: `delivered` (a device took it), `fallback`
-- (no push device took it; the app's notification center shows it) or `failed` (a critical
-- notification that could not be delivered: its in-app alert; `delivered` once push succeeded
-- after all), and what the user did with it (`opened` or an action id, NULL if nothing).
CREATE FUNCTION herald.history(user_id text, lim int DEFAULT 50)
RETURNS TABLE (inbox_id bigint, created_at timestamptz, category text, title text, status text, action text)
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
CREATE FUNCTION herald.record_action(user_id text, inbox_id bigint, action text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    was_unread boolean;
BEGIN
    PERFORM herald.authorize_user(record_action.user_id);
    IF action IS NULL OR action !~ '^[A-Za-z0-9_.:-]{1,64}$' THEN
        RAISE EXCEPTION 'herald: action must be "opened" or an action id (1 to 64 letters, digits, _ . : -)'
            USING ERRCODE = '22023';
    END IF;
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

-- Why a user did or did not get their notifications, as JSON: devices (provider, permission,
-- active or why disabled, last outcome — never a token), the last delivery attempts with their
-- reasons, what the policy decided (held, folded, suppressed, expired, dead), pending jobs, live
-- presence, and troubleshooting suggestions ({"code", "text"}).
CREATE FUNCTION herald.diagnose(user_id text) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, herald, pg_temp AS $$
DECLARE
    devices_ jsonb;
    attempts_ jsonb;
    decisions_ jsonb;
    suggestions_ jsonb := '[]';
    prefs jsonb;
    active_count int;
    device_count int;
    denied int;
BEGIN
    PERFORM herald.authorize_user(diagnose.user_id);
    SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'id', d.id, 'provider', d.provider, 'appId', d.app_id, 'active', d.active,
               'permission', coalesce(d.permission, 'unknown'), 'locale', d.locale, 'timeZone', d.time_zone,
               'registeredAt', d.registered_at, 'disabledReason', d.disabled_reason, 'disabledAt', d.disabled_at,
               'lastOutcome', (SELECT jsonb_strip_nulls(jsonb_build_object(
                                   'at', l.created_at, 'jobId', l.job_id, 'outcome', l.outcome, 'reason', l.reason))
                               FROM herald.delivery_log l
                               WHERE l.user_id = diagnose.user_id AND l.device_id = d.id AND l.event = 'attempt'
                               ORDER BY l.created_at DESC, l.id DESC LIMIT 1)))
               ORDER BY d.active DESC, d.registered_at DESC), '[]'),
           count(*) FILTER (WHERE d.active), count(*),
           count(*) FILTER (WHERE d.active AND d.permission = 'denied')
    INTO devices_, active_count, device_count, denied
    FROM herald.devices d WHERE d.user_id = diagnose.user_id;

    SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'at', l.created_at, 'jobId', l.job_id, 'category', l.category, 'event', l.event,
               'deviceId', l.device_id, 'provider', l.provider, 'outcome', l.outcome, 'reason', l.reason,
               'attempt', l.attempt, 'latencyMs', round(l.latency_ms::numeric, 1)))
               ORDER BY l.created_at DESC, l.id DESC), '[]')
    INTO attempts_
    FROM (SELECT * FROM herald.delivery_log l
          WHERE l.user_id = diagnose.user_id AND l.event IN ('attempt', 'fallback')
          ORDER BY l.created_at DESC, l.id DESC LIMIT 20) l;

    SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
               'at', l.created_at, 'jobId', l.job_id, 'category', l.category, 'event', l.event,
               'status', l.status, 'reason', l.reason))
               ORDER BY l.created_at DESC, l.id DESC), '[]')
    INTO decisions_
    FROM (SELECT * FROM herald.delivery_log l
          WHERE l.user_id = diagnose.user_id
            AND l.event IN ('suppressed', 'deferred', 'summarized', 'expired', 'dead', 'cancelled', 'alert')
          ORDER BY l.created_at DESC, l.id DESC LIMIT 20) l;

    SELECT p.preferences INTO prefs FROM herald.preferences p WHERE p.user_id = diagnose.user_id;

    IF device_count = 0 THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'no_device',
            'text', 'No device is registered for this user: open the app and allow notifications, or enable web notifications.');
    ELSIF active_count = 0 THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'devices_disabled',
            'text', 'Every registered device was disabled after the push service refused its token: open the app again to register it.');
    END IF;
    IF denied > 0 THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'permission_denied',
            'text', format('Notifications are turned off in the system settings on %s device(s): allow them in Settings to see pushes.', denied));
    END IF;
    IF prefs->>'enabled' = 'false' THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'notifications_off',
            'text', 'Notifications are switched off in this app''s notification settings.');
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(decisions_) e
               WHERE e->>'reason' IN ('category_muted', 'not_opted_in', 'disabled_by_user', 'muted_until')) THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'preferences',
            'text', 'Some notifications were not sent because of this app''s notification settings (a muted or not opted-in category).');
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(decisions_) e WHERE e->>'reason' IN ('quiet_hours', 'quiet_hours_drop')) THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'quiet_hours',
            'text', 'Some notifications were held or dropped during quiet hours.');
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(decisions_) e
               WHERE e->>'event' = 'summarized' OR e->>'reason' IN ('rate_limited', 'scope_quota')) THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'grouped',
            'text', 'Some notifications were grouped into a summary or limited to avoid too many alerts.');
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(attempts_) e
               WHERE e->>'event' = 'attempt' AND e->>'outcome' NOT IN ('accepted')) THEN
        suggestions_ := suggestions_ || jsonb_build_object('code', 'provider_errors',
            'text', 'The push service refused or failed some recent attempts (see attempts); Herald retries what can be retried.');
    END IF;

    RETURN jsonb_build_object(
        'userId', diagnose.user_id,
        'devices', devices_,
        'attempts', attempts_,
        'decisions', decisions_,
        'pending', (SELECT count(*) FROM herald.outbox o WHERE o.user_id = diagnose.user_id),
        'presence', (SELECT coalesce(jsonb_agg(p.context ORDER BY p.context), '[]') FROM herald.presence p
                     WHERE p.user_id = diagnose.user_id AND p.expires_at > now()),
        'preferences', coalesce(prefs, '{}'),
        'suggestions', suggestions_);
END
$$;

-- The app functions now include the three above.
CREATE OR REPLACE FUNCTION herald.app_functions() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[
        'herald.current_user_id()',
        'herald.register_device(text, text, text, jsonb)', 'herald.unregister_device(text, text)',
        'herald.set_presence(text, text, interval)',
        'herald.mark_read(text, bigint[], bigint)', 'herald.mark_all_read(text, bigint)',
        'herald.dismiss(text, bigint[], bigint)', 'herald.dismiss_all(text, bigint)',
        'herald.history(text, int)', 'herald.record_action(text, bigint, text)', 'herald.diagnose(text)']
$$;

SELECT herald.apply_grants();
