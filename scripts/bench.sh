#!/usr/bin/env bash
# make bench:        a fresh database `herald_bench`, then `herald-bench` (one JSON line).
#                    then the same through the APNs, FCM and Expo adapters into the simulator
#                    (`herald-bench providers`, one JSON line each).
# make bench-churn:  1,000,000 jobs through a fresh database, kept as a template; then
#                    CHURN_PAIRS (default 3) pairs, each the benchmark on a fresh database and on a
#                    copy of the churned one: every run, its pair's ratio, the medians and their
#                    ratio (churned_over_fresh). One run each swung the ratio from 0.76 to 1.02 on
#                    this machine; the pairs take that out. Each measured run starts right after a
#                    CHECKPOINT and checkpoints again between its enqueue and its drain
#                    (--checkpoint-before-drain), so both sides drain at the same checkpoint phase
#                    with the queue's pages already on disk (a page's first change after a
#                    checkpoint writes its full image to the WAL; without the second checkpoint a
#                    fresh database's queue pages are all born after it and never pay that, which
#                    no running database sees); the last churned run's full-page images are
#                    counted per relation (pg_walinspect, when the server has it), and so are its
#                    blocks read into shared buffers (what did not stay cached).
#                    CHURN_COPY_SQL, when set, runs on each churned copy before its drain (e.g.
#                    `VACUUM FULL herald.recipients;`), to measure a change to the churned state.
set -euo pipefail
cd "$(dirname "$0")/.."
. .run/pg.env
# `herald_bench` created anew: empty, or with CREATE DATABASE options (`fresh_db TEMPLATE x`).
fresh_db() {
    PGOPTIONS="-c client_min_messages=warning" psql -q "$HERALD_ADMIN_DATABASE_URL" \
        -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench $*"
}
fresh_db
export HERALD_DATABASE_URL="${HERALD_ADMIN_DATABASE_URL%/postgres}/herald_bench"
if [ "${1:-}" = "--churn" ]; then
    shift
    pairs=${CHURN_PAIRS:-3}
    admin=$HERALD_ADMIN_DATABASE_URL
    drain() { python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["drain_jobs_per_s"])'; }
    measure() { psql -q "$admin" -c "CHECKPOINT"; .build/release/herald-bench --checkpoint-before-drain "$@" | tee -a /dev/stderr | drain; }
    echo "# 1,000,000 jobs through the outbox:" >&2
    .build/release/herald-bench --jobs 1000000 --latency-samples 0 >&2
    psql -q "$HERALD_DATABASE_URL" -tAc "SELECT '# delivery_log rows after churn: ' || count(*) FROM herald.delivery_log" >&2
    walinspect=$(psql -q "$HERALD_DATABASE_URL" -tAc "CREATE EXTENSION IF NOT EXISTS pg_walinspect; SELECT 1" 2>/dev/null || true)
    # The churned database is kept as a template: each churned run gets a copy of the same state.
    psql -q "$admin" -c "DROP DATABASE IF EXISTS herald_bench_churned" -c "ALTER DATABASE herald_bench RENAME TO herald_bench_churned"
    trap 'psql -q "$admin" -c "DROP DATABASE IF EXISTS herald_bench_churned" 2>/dev/null' EXIT
    fresh=()
    churned=()
    for pair in $(seq 1 "$pairs"); do
        fresh_db
        echo "# pair $pair of $pairs, fresh database:" >&2
        fresh+=("$(measure "$@")")
        fresh_db TEMPLATE herald_bench_churned STRATEGY FILE_COPY
        if [ -n "${CHURN_COPY_SQL:-}" ]; then
            # Statements sent one at a time (psql reads them from its input), so VACUUM and
            # REINDEX … CONCURRENTLY, which refuse a transaction block, can be among them.
            echo "# pair $pair of $pairs, CHURN_COPY_SQL on the copy before its drain" >&2
            printf '%s\n' "$CHURN_COPY_SQL" | psql -q -v ON_ERROR_STOP=1 "$HERALD_DATABASE_URL" >&2
        fi
        if [ "$pair" = "$pairs" ]; then
            if [ "$walinspect" = 1 ]; then
                # A replication slot keeps the run's WAL from being recycled before it is read.
                psql -q "$admin" -c "SELECT pg_drop_replication_slot('herald_bench_churn') FROM pg_replication_slots WHERE slot_name = 'herald_bench_churn'" \
                    -c "SELECT pg_create_physical_replication_slot('herald_bench_churn', true)" >/dev/null
                psql -q "$admin" -c "CHECKPOINT"
                start=$(psql -tAq "$HERALD_DATABASE_URL" -c "SELECT pg_current_wal_lsn()")
            fi
            # The last run's blocks read count from here, CHURN_COPY_SQL's own left out.
            psql -q "$HERALD_DATABASE_URL" -c "SELECT pg_stat_reset()" >/dev/null
        fi
        echo "# pair $pair of $pairs, a copy of the churned database:" >&2
        churned+=("$(measure "$@")")
    done
    if [ "$walinspect" = 1 ]; then
        psql -tAq "$HERALD_DATABASE_URL" <<SQL >&2
SELECT '# full-page images in the last churned run: ' || coalesce(string_agg(rel || ' ' || n, ', ' ORDER BY n DESC), 'none')
FROM (SELECT coalesce(c.relname, b.node::text) AS rel, count(*) AS n
      FROM (SELECT (regexp_match(block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid AS node
            FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE fpi_length > 0) b
      LEFT JOIN pg_class c ON c.relfilenode = b.node
      GROUP BY 1 ORDER BY 2 DESC LIMIT 4) t
SQL
        psql -q "$admin" -c "SELECT pg_drop_replication_slot('herald_bench_churn')" >/dev/null
    fi
    # Blocks read into shared buffers (from the OS or the disk): what did not stay cached.
    psql -tAq "$HERALD_DATABASE_URL" <<'SQL' >&2
SELECT '# blocks read in the last churned run: ' || string_agg(rel || ' ' || n, ', ' ORDER BY n DESC)
FROM (SELECT relname AS rel, heap_blks_read AS n FROM pg_statio_user_tables
      UNION ALL SELECT indexrelname, idx_blks_read FROM pg_statio_user_indexes
      ORDER BY 2 DESC LIMIT 6) t
SQL
    python3 - "${fresh[*]}" "${churned[*]}" <<'PY'
import json, statistics, sys
fresh = [float(x) for x in sys.argv[1].split()]
churned = [float(x) for x in sys.argv[2].split()]
f, c = statistics.median(fresh), statistics.median(churned)
print(json.dumps({"bench": "churn", "pairs": len(fresh), "fresh_drain_jobs_per_s": fresh,
                  "churned_drain_jobs_per_s": churned, "pair_ratios": [round(b / a, 2) for a, b in zip(fresh, churned)],
                  "fresh_median": f, "churned_median": c, "churned_over_fresh": round(c / f, 2)}))
PY
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
    fresh_db
    .build/release/herald-bench providers --provider "$p" ${PROVIDER_ARGS:-}
done

# One real worker process (`herald run`, default settings) draining 50,000 APNs jobs: its
# throughput and its own peak RSS (VmHWM), without the benchmark's enqueuer in the process.
fresh_db
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
