#!/usr/bin/env bash
# make run: migrate, seed demo data, start the worker, enqueue a burst, report what happened.
# The worker keeps running afterwards (Ctrl-C stops it and PostgreSQL); DEMO_EXIT=1, or no
# terminal, stops right after the report. However it ends (report, Ctrl-C, an error), the
# worker, the simulator and PostgreSQL are stopped: nothing is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
. .run/pg.env
bin=.build/release/herald
[ -x "$bin" ] || bin=.build/debug/herald
psqlq() { psql -X -q -v ON_ERROR_STOP=1 "$HERALD_DATABASE_URL" "$@"; }

echo "== herald migrate"
"$bin" migrate
psqlq -c "TRUNCATE herald.outbox, herald.delivery_log, herald.dead_letters, herald.inbox, herald.local_notifications, herald.dedup_keys, herald.devices, herald.preferences, herald.presence, herald.expo_tickets RESTART IDENTITY"
psqlq -f scripts/demo-seed.sql >/dev/null

worker=
cleanup() {
    if [ -n "$worker" ]; then
        kill -TERM "$worker" 2>/dev/null || true
        wait "$worker" 2>/dev/null || true
        echo "== worker stopped"
    fi
    scripts/simulator.sh stop .run/simulator || true
    scripts/pg.sh stop || true
}
trap cleanup EXIT
trap 'exit 0' INT TERM

echo "== herald-simulator (APNs, FCM, Expo, Web Push on one loopback TLS port; log: .run/simulator/simulator.log)"
. "$(HERALD_SIMULATOR_BIN="$bin-simulator" scripts/simulator.sh start .run/simulator)"
echo "   $HERALD_SIMULATOR_URL  (credentials generated in .run/simulator)"
sim() {  # the simulator's control API: sim METHOD PATH [JSON]
    curl -sS --cacert .run/simulator/ca.pem -X "$1" "$HERALD_SIMULATOR_URL$2" \
        ${3:+-H content-type:application/json -d "$3"}
}
# Failure paths: bob's old phone was uninstalled (Expo says DeviceNotRegistered); carol's phone
# keeps failing (APNs 500) until her critical alert is dead-lettered.
sim POST /_sim/faults '{"provider":"expo","token":"ExponentPushToken[bob-old-phone]","status":200,"reason":"DeviceNotRegistered"}' >/dev/null
sim POST /_sim/faults "{\"provider\":\"apns\",\"token\":\"$(printf 'ca%.0s' $(seq 32))\",\"status\":500,\"reason\":\"InternalServerError\"}" >/dev/null
# Dave's browser subscribes to Web Push (the simulator plays the browser and decrypts).
subscription=$(sim POST /_sim/webpush/subscriptions '{}')
python3 - "$subscription" > .run/simulator/dave.sql <<'PY'
import json, sys
s = json.loads(sys.argv[1])
q = lambda v: "'" + v.replace("'", "''") + "'"
print(f"SELECT herald.register_device('dave', 'webpush', {q(s['endpoint'])}, "
      f"jsonb_build_object('p256dh', {q(s['p256dh'])}, 'auth', {q(s['auth'])}));")
PY
psqlq -f .run/simulator/dave.sql >/dev/null
export HERALD_MAINTENANCE_REAP_INTERVAL_SECONDS=1
# The demo cluster's only role is the superuser `postgres`; production runs as a login role
# granted herald_worker (docs/security.md), where this setting stays off.
export HERALD_SECURITY_ALLOW_SUPERUSER=true
# /metrics, /healthz and /readyz on 8080 unless something else has it (then a free port): a
# port taken on the newcomer's machine must not stop the demo.
HERALD_HTTP_PORT=$(free_port 8080)
export HERALD_HTTP_PORT
echo "== herald run (log: .run/worker.log; metrics: http://127.0.0.1:$HERALD_HTTP_PORT/metrics)"
"$bin" run > .run/worker.log 2>&1 &
worker=$!
# A worker that stopped (a bad setting, a port taken since) fails the demo with its log's end,
# instead of a report in which nothing was sent.
worker_alive() {
    kill -0 "$worker" 2>/dev/null && return 0
    echo "herald run stopped; the end of .run/worker.log:" >&2
    tail -n 20 .run/worker.log >&2
    worker=
    exit 1
}
sleep 1
worker_alive

echo "== enqueue the demo burst (scripts/demo-burst.sql)"
psql -X -q "$HERALD_DATABASE_URL" -f scripts/demo-burst.sql 2>&1 | sed -e 's/^psql:[^ ]* //' | grep -v '^$' || true

echo "== waiting until nothing is due in the next 15 s (coalescing summaries included)"
for _ in $(seq 1 60); do
    worker_alive
    left=$(psql -X -tA "$HERALD_DATABASE_URL" -c "SELECT count(*) FROM herald.outbox WHERE run_at < now() + interval '15 seconds'")
    [ "$left" = 0 ] && break
    sleep 0.5
done
worker_alive
"$bin" status
psqlq -f scripts/demo-report.sql
echo "== What the providers received (provider simulator /_sim/stats)"
sim GET /_sim/stats; echo

if [ "${DEMO_EXIT:-0}" = 1 ] || [ ! -t 0 ]; then
    exit 0
fi
echo
echo "Worker still running (pid $worker). Try: $bin enqueue --user alice --category new_message --title Hi --body There"
echo "Ctrl-C stops the worker and PostgreSQL."
wait "$worker"
