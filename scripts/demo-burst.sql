-- A burst of notifications from the seed scenarios, written the way a backend writes them.
\set ON_ERROR_STOP off
\set VERBOSITY terse
-- Foodshare: alice has conversation 42 open on screen, so its message is suppressed; one from
-- conversation 7 is delivered (high priority, Reply action).
SELECT herald.set_presence('alice', 'conversation:42', '2 minutes');
SELECT herald.enqueue('alice', 'new_message', '{"title": "Sam", "body": "On my way!", "route": "/conversations/42", "metadata": {"conversationId": "42"}}', '{"context": "conversation:42"}') AS message_job_open_conversation;
SELECT herald.enqueue('alice', 'new_message', '{"title": "Kim", "body": "Is the bread still available?", "route": "/conversations/7", "metadata": {"conversationId": "7"}}', '{"context": "conversation:7"}') AS message_job;
-- Five listings near frank in a burst: three go out, the rest become one summary 5 s later.
-- gina lives 390 km away: outside her radius. bob is in his quiet hours: deferred to their end.
SELECT herald.enqueue_many(ARRAY['frank', 'gina', 'bob'], 'new_listing',
       jsonb_build_object('title', 'Fresh bread #' || g, 'body', 'Pick up before 18:00 ({distanceKm} away)',
                          'metadata', jsonb_build_object('listingId', 'l-' || g)),
       '{"geo": {"lat": 59.92, "lon": 10.76}}') AS listing_jobs
FROM generate_series(1, 5) g;
-- NHS: an announcement fanned out to 20 members in one statement, with a dedup key; the
-- second call is a duplicate and enqueues nothing.
SELECT herald.enqueue_many(ARRAY(SELECT 'member-' || g FROM generate_series(1, 20) g), 'announcement',
       '{"title": "Chapter meeting", "body": "Tonight 19:00 in room 4"}', '{"dedupKey": "announcement:2026-11-22"}') AS announcement_jobs;
SELECT herald.enqueue_many(ARRAY(SELECT 'member-' || g FROM generate_series(1, 20) g), 'announcement',
       '{"title": "Chapter meeting", "body": "Tonight 19:00 in room 4"}', '{"dedupKey": "announcement:2026-11-22"}') AS duplicate_jobs;
-- DSober: a critical SEP failure alert to an admin whose only phone keeps failing (retries,
-- dead letter, in-app alert), and one to an admin with no device at all (in-app alert).
SELECT herald.enqueue('carol', 'sep_failure', '{"title": "SEP check failed", "body": "Driver Max failed verification at Spring Social"}') AS sep_job;
SELECT herald.enqueue('erin', 'sep_failure', '{"title": "SEP check failed", "body": "Driver Max failed verification at Spring Social"}') AS sep_no_device_job;
SELECT herald.enqueue('bob', 'ride_request', '{"title": "Ride request", "body": "Jo needs a ride from Main St", "metadata": {"rideId": "r-9"}}') AS ride_job;
-- Transit: a departure alert scheduled 3 s from now, and one cancelled before it is due.
SELECT herald.enqueue('dave', 'departure_alert', '{"title": "Leave now", "body": "Your 08:14 train departs in 10 minutes"}',
       jsonb_build_object('deliverAt', now() + interval '3 seconds')) AS scheduled_job;
SELECT herald.enqueue('dave', 'departure_alert', '{"title": "Leave now", "body": "Old plan"}',
       jsonb_build_object('deliverAt', now() + interval '1 hour', 'dedupKey', 'journey:old')) AS to_cancel_job;
SELECT herald.cancel('journey:old') AS cancelled;
-- Bad input is refused in the caller's transaction, with a clear error:
SELECT herald.enqueue('alice', 'no_such_category', '{"title": "x", "body": "y"}');
SELECT herald.enqueue('alice', 'new_message', '{"title": "no body"}');
SELECT herald.enqueue('alice', 'new_message', '{"title": "x", "body": "y", "metadata": {"n": 1}}');
