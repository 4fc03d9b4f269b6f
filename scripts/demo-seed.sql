-- Demo data: one category per kind of notification from the five seed apps, and devices.
-- Everything goes through Herald's public SQL interface, as a backend would.
INSERT INTO herald.categories (name, app_id, priority, mandatory, max_attempts, backoff_base, backoff_cap, sound,
                               interruption_level, apns_category, android_channel, default_route)
VALUES
    ('new_message',        'foodshare', 'high',     false, 5, '1 second', '10 seconds', 'message.caf', 'time-sensitive', 'MESSAGE_REPLY', 'messages', '/conversations'),
    ('new_listing',        'foodshare', 'normal',   false, 5, '1 second', '10 seconds', 'listing.caf', NULL,             NULL,            'listings', '/listings'),
    ('admin_announcement', 'club',      'normal',   false, 5, '1 second', '10 seconds', NULL,          'active',         NULL,            'general',  '/'),
    ('announcement',       'nhs',       'normal',   false, 5, '1 second', '10 seconds', NULL,          'active',         NULL,            'general',  '/announcements'),
    ('sep_failure',        'dsober',    'critical', true,  2, '1 second', '2 seconds',  'critical.caf','critical',       NULL,            'safety',   '/admin/alerts'),
    ('ride_request',       'dsober',    'high',     false, 3, '1 second', '5 seconds',  'ride.caf',    'time-sensitive', NULL,            'rides',    '/rides/queue'),
    ('departure_alert',    'transit',   'high',     false, 3, '1 second', '5 seconds',  NULL,          'time-sensitive', 'START_JOURNEY', 'departures', '/journeys')
ON CONFLICT (name) DO NOTHING;

-- Devices: `local` devices are recorded in herald.local_notifications; apns/fcm/expo/webpush
-- go through the real adapters to the provider simulator (scripts/demo.sh starts it, injects
-- the faults that drive the failure paths, and registers dave's browser subscription).
SELECT herald.register_device('alice', 'local', 'alice-tablet');
SELECT herald.register_device('alice', 'apns',  repeat('a1', 32), '{"environment": "sandbox"}');
SELECT herald.register_device('bob',   'fcm',   'bob-pixel-fcm-registration-token');
SELECT herald.register_device('bob',   'expo',  'ExponentPushToken[bob-old-phone]');
SELECT herald.register_device('carol', 'apns',  repeat('ca', 32));
SELECT herald.register_device('member-' || g, 'local', 'member-device-' || g) FROM generate_series(1, 20) g;

-- Policy: more than 3 listings within the window become one summary.
UPDATE herald.categories SET quiet_hours = 'bypass' WHERE name IN ('ride_request', 'sep_failure');
UPDATE herald.categories SET preview_chars = 100 WHERE name = 'new_message';
-- Delivery deadlines (seed 003: a failed SEP alert reaches the admins within 5 s; seed 000:
-- messages 5 s, listings 30 s): a critical job not accepted by then gets its in-app alert.
UPDATE herald.categories SET deadline = interval '5 seconds' WHERE name IN ('sep_failure', 'new_message');
UPDATE herald.categories SET deadline = interval '30 seconds' WHERE name = 'new_listing';
UPDATE herald.categories SET coalesce = '{"mode": "leading", "count": 3, "windowSeconds": 5,
    "summaryTitle": "New listings", "summaryBody": "{count} new listings near you", "summaryRoute": "/listings"}'
WHERE name = 'new_listing';
SELECT herald.register_device('frank', 'local', 'frank-phone');
SELECT herald.register_device('gina', 'local', 'gina-phone');
-- Preferences, as the apps store them (seed 001 model, extended).
INSERT INTO herald.preferences (user_id, preferences) VALUES
    ('frank', '{"location": {"lat": 59.913, "lon": 10.752, "radiusKm": 5}}'),
    ('gina', '{"location": {"lat": 63.430, "lon": 10.395, "radiusKm": 5}}'),
    ('member-3', '{"eventToggles": {"announcement": false}}'),
    ('bob', jsonb_build_object('timeZone', 'UTC', 'quietHours', jsonb_build_object('enabled', true,
        'start', to_char(now() AT TIME ZONE 'UTC' - interval '1 hour', 'HH24:MI'),
        'end', to_char(now() AT TIME ZONE 'UTC' + interval '2 hours', 'HH24:MI'))))
ON CONFLICT (user_id) DO UPDATE SET preferences = EXCLUDED.preferences;
