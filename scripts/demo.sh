#!/usr/bin/env bash
# make run: migrate, seed demo data, start the worker, enqueue a burst, report what happened.
# The worker keeps running afterwards (Ctrl-C stops it and PostgreSQL); DEMO_EXIT=1, or no
# terminal, stops right after the report.
set -euo pipefail
cd "$(dirname "$0")/.."
. .run/pg.env
bin=.build/release/herald
[ -x "$bin" ] || bin=.build/debug/herald
psqlq() { psql -X -q -v ON_ERROR_STOP=1 "$HERALD_DATABASE_URL" "$@"; }

echo "== herald migrate"
"$bin" migrate
psqlq -c "TRUNCATE herald.outbox, herald.delivery_log, herald.dead_letters, herald.inbox, herald.local_notifications, herald.dedup_keys, herald.devices, herald.preferences, herald.presence RESTART IDENTITY"
psqlq -f scripts/demo-seed.sql >/dev/null

# Until the real provider adapters land, every push provider is served by the sink adapter.
export HERALD_PROVIDERS_APNS=sink HERALD_PROVIDERS_FCM=sink HERALD_PROVIDERS_EXPO=sink HERALD_PROVIDERS_WEBPUSH=sink
export HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS=1
echo "== herald run (log: .run/worker.log)"
"$bin" run > .run/worker.log 2>&1 &
worker=$!
stop() { kill -TERM "$worker" 2>/dev/null || true; wait "$worker" 2>/dev/null || true; }
trap 'stop; scripts/pg.sh stop; exit 0' INT TERM
sleep 1

echo "== enqueue the demo burst (scripts/demo-burst.sql)"
psql -X -q "$HERALD_DATABASE_URL" -f scripts/demo-burst.sql 2>&1 | sed -e 's/^psql:[^ ]* //' | grep -v '^$' || true

echo "== waiting until nothing is due in the next 15 s (coalescing summaries included)"
for _ in $(seq 1 60); do
    left=$(psql -X -tA "$HERALD_DATABASE_URL" -c "SELECT count(*) FROM herald.outbox WHERE run_at < now() + interval '15 seconds'")
    [ "$left" = 0 ] && break
    sleep 0.5
done
"$bin" status
psqlq -f scripts/demo-report.sql

if [ "${DEMO_EXIT:-0}" = 1 ] || [ ! -t 0 ]; then
    stop
    echo "== worker stopped (exit $?)"
    exit 0
fi
echo
echo "Worker still running (pid $worker). Try: $bin enqueue --user alice --category new_message --title Hi --body There"
echo "Ctrl-C stops the worker and PostgreSQL."
wait "$worker"
