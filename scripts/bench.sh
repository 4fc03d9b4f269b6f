#!/usr/bin/env bash
# make bench:        a fresh database `herald_bench`, then `herald-bench` (one JSON line).
#                    then the same through the APNs, FCM and Expo adapters into the simulator
#                    (`herald-bench providers`, one JSON line each).
# make bench-churn:  1,000,000 jobs through a fresh database first, then the same benchmark
#                    again on that database, to show claim cost stays flat after heavy churn.
set -euo pipefail
cd "$(dirname "$0")/.."
. .run/pg.env
psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench" 2>/dev/null
export HERALD_DATABASE_URL="${HERALD_ADMIN_DATABASE_URL%/postgres}/herald_bench"
if [ "${1:-}" = "--churn" ]; then
    shift
    CHURN=1
    echo "# 1,000,000 jobs through the outbox first:" >&2
    .build/release/herald-bench --jobs 1000000 --latency-samples 0
    psql -q "$HERALD_DATABASE_URL" -tAc "SELECT '# delivery_log rows after churn: ' || count(*) FROM herald.delivery_log" >&2
    echo "# the same benchmark on the churned database:" >&2
fi
.build/release/herald-bench "$@"

# Through the live adapters into the provider simulator, a separate process on the same two
# cores (loopback TLS; HTTP/2 for APNs). BENCH_PROVIDERS="" skips; PROVIDER_ARGS go to each run.
[ "${CHURN:-0}" = 1 ] && exit 0
providers=${BENCH_PROVIDERS-apns fcm expo}
[ -n "$providers" ] || exit 0
env_file=$(HERALD_SIMULATOR_BIN=.build/release/herald-simulator scripts/simulator.sh start .run/bench-simulator)
trap 'scripts/simulator.sh stop .run/bench-simulator' EXIT
. "$env_file"
for p in $providers; do
    psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench" 2>/dev/null
    .build/release/herald-bench providers --provider "$p" ${PROVIDER_ARGS:-}
done

# One real worker process (`herald run`, default settings) draining 50,000 APNs jobs: its
# throughput and its own peak RSS (VmHWM), without the benchmark's enqueuer in the process.
psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench" 2>/dev/null
.build/release/herald migrate >/dev/null
psql -q "$HERALD_DATABASE_URL" >/dev/null <<'SQL'
INSERT INTO herald.categories (name, priority, max_attempts) VALUES ('bench', 'high', 3);
SELECT herald.register_device('w-' || g, 'apns', lpad(to_hex(g), 64, '0')) FROM generate_series(0, 9999) g;
SELECT herald.enqueue_many(ARRAY(SELECT 'w-' || g FROM generate_series(0, 9999) g), 'bench',
       '{"title":"Bench","body":"A notification body of a typical length for a push message."}') FROM generate_series(1, 5);
ANALYZE;
SQL
HERALD_SECURITY_ALLOW_SUPERUSER=true HERALD_HTTP_PORT=0 HERALD_LOG_LEVEL=warning .build/release/herald run > .run/bench-worker.log 2>&1 &
worker=$!
start=$(date +%s.%N)
while [ "$(psql -tAq "$HERALD_DATABASE_URL" -c 'SELECT count(*) FROM herald.outbox')" != 0 ]; do sleep 0.2; done
end=$(date +%s.%N)
rss=$(awk '/VmHWM/ {print $2}' /proc/$worker/status)
kill -TERM $worker; wait $worker || true
python3 -c "print('{\"worker\":\"herald run\",\"provider\":\"apns\",\"jobs\":50000,\"drain_jobs_per_s\":%d,\"peak_rss_mib\":%.1f}' % (50000/($end-$start), $rss/1024))"
