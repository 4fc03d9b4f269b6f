-- Diagnose: why a user did or did not get a notification.
--
-- Applied by every `herald migrate` after the migrations, in file-name order, as CREATE OR
-- REPLACE: this file is the one live definition of each function in it. Who may call them:
-- herald.apply_grants (02_security.sql), run last by 99_grants.sql.

-- Why a user did or did not get their notifications, as JSON: devices (provider, permission,
-- active or why disabled, last outcome — never a token), the last delivery attempts with their
-- reasons, what the policy decided (held, folded, suppressed, expired, dead), pending jobs, live
-- presence, and troubleshooting suggestions ({"code", "text"}).
CREATE OR REPLACE FUNCTION herald.diagnose(user_id text)
RETURNS jsonb
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
