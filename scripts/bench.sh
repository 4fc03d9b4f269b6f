#!/usr/bin/env bash
# make bench:        a fresh database `herald_bench`, then `herald-bench` (one JSON line).
#                    then the same through the APNs, FCM and Expo adapters into the simulator
#                    (`herald-bench providers`, one JSON line each).
# make bench-churn:  the benchmark on a fresh database, then 1,000,000 jobs through it, then the
#                    benchmark again on that churned database: fresh, churned, and churned/fresh.
#                    Each measured run starts right after a CHECKPOINT, so both runs face the same
#                    checkpoint phase (a page's first change after a checkpoint writes its full
#                    image to the WAL); the churned run's full-page images are counted per relation
#                    (pg_walinspect, when the server has it).
set -euo pipefail
cd "$(dirname "$0")/.."
. .run/pg.env
psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench" 2>/dev/null
export HERALD_DATABASE_URL="${HERALD_ADMIN_DATABASE_URL%/postgres}/herald_bench"
if [ "${1:-}" = "--churn" ]; then
    shift
    drain() { python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["drain_jobs_per_s"])'; }
    psql -q "$HERALD_ADMIN_DATABASE_URL" -c "CHECKPOINT"
    echo "# fresh database:" >&2
    fresh=$(.build/release/herald-bench "$@" | tee /dev/stderr | drain)
    echo "# 1,000,000 jobs through the outbox:" >&2
    .build/release/herald-bench --jobs 1000000 --latency-samples 0 >&2
    psql -q "$HERALD_DATABASE_URL" -tAc "SELECT '# delivery_log rows after churn: ' || count(*) FROM herald.delivery_log" >&2
    walinspect=$(psql -q "$HERALD_DATABASE_URL" -tAc "CREATE EXTENSION IF NOT EXISTS pg_walinspect; SELECT 1" 2>/dev/null || true)
    psql -q "$HERALD_ADMIN_DATABASE_URL" -c "CHECKPOINT"
    if [ "$walinspect" = 1 ]; then
        # A replication slot keeps the run's WAL from being recycled before it is read.
        psql -q "$HERALD_ADMIN_DATABASE_URL" -c "SELECT pg_drop_replication_slot('herald_bench_churn') FROM pg_replication_slots WHERE slot_name = 'herald_bench_churn'" \
            -c "SELECT pg_create_physical_replication_slot('herald_bench_churn', true)" >/dev/null
    fi
    start=$(psql -tAq "$HERALD_DATABASE_URL" -c "SELECT pg_current_wal_lsn()")
    echo "# the same benchmark on the churned database:" >&2
    churned=$(.build/release/herald-bench "$@" | tee /dev/stderr | drain)
    if [ "$walinspect" = 1 ]; then
        psql -tAq "$HERALD_DATABASE_URL" <<SQL >&2
SELECT '# full-page images in the churned run: ' || coalesce(string_agg(rel || ' ' || n, ', ' ORDER BY n DESC), 'none')
FROM (SELECT coalesce(c.relname, b.node::text) AS rel, count(*) AS n
      FROM (SELECT (regexp_match(block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid AS node
            FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE fpi_length > 0) b
      LEFT JOIN pg_class c ON c.relfilenode = b.node
      GROUP BY 1 ORDER BY 2 DESC LIMIT 4) t
SQL
        psql -q "$HERALD_ADMIN_DATABASE_URL" -c "SELECT pg_drop_replication_slot('herald_bench_churn')" >/dev/null
    fi
    python3 -c "print('{\"bench\":\"churn\",\"fresh_drain_jobs_per_s\":%s,\"churned_drain_jobs_per_s\":%s,\"churned_over_fresh\":%.2f}' % ($fresh, $churned, $churned / $fresh))"
    exit 0
fi
.build/release/herald-bench "$@"

# Through the live adapters into the provider simulator, a separate process on the same two
# cores (loopback TLS; HTTP/2 for APNs). BENCH_PROVIDERS="" skips; PROVIDER_ARGS go to each run.
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
