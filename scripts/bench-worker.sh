#!/usr/bin/env bash
# make bench-worker: worker CPU per message and peak RSS of one real `herald run` (release build,
# default settings) draining JOBS jobs through each live adapter into the provider simulator (a
# separate process on the same cores). CPU is the worker process's own user + system time
# (/proc/<pid>/stat) from when it idles on an empty outbox to when the outbox is empty again,
# divided by the jobs: it does not depend on what else shares the machine. One JSON line per
# provider. BENCH_WORKER_PROVIDERS (default "apns fcm expo webpush"; `sink` sends the APNs
# devices to the sink adapter: Herald's own work without any HTTP), JOBS (default 20000).
# TRACE_PERCENT=N turns tracing on (every job traced at 100) into a stand-in OTLP/HTTP collector
# on loopback, to measure what tracing costs per job. BENCH_WORKER_RUNS=N (default 1) runs each
# provider N times, each on a fresh database, and adds a line with the median CPU per message
# (one run's figure moves by ±10 % on this machine). BENCH_WORKER_BURSTS=N (default 1) enqueues
# and drains the JOBS N times into the same database and worker, 2 s apart (a long-lived database:
# does the drain drift as vacuum falls behind?): one line per burst on stderr, and the run's line
# over all of them (drain time and CPU summed over the drains).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
. .run/pg.env
jobs=${JOBS:-20000}
providers=${BENCH_WORKER_PROVIDERS:-apns fcm expo webpush}
bin=.build/release/herald
db_url="${HERALD_ADMIN_DATABASE_URL%/postgres}/herald_bench_worker"
env_file=$(HERALD_SIMULATOR_BIN=$bin-simulator scripts/simulator.sh start .run/bench-worker-simulator)
worker=""
collector=""
cleanup() {
    [ -n "$worker" ] && kill -TERM "$worker" 2>/dev/null && wait "$worker" 2>/dev/null
    [ -n "$collector" ] && kill "$collector" 2>/dev/null
    scripts/simulator.sh stop .run/bench-worker-simulator
}
trap cleanup EXIT
# shellcheck disable=SC1090
. "$env_file"
export HERALD_DATABASE_URL=$db_url HERALD_SECURITY_ALLOW_SUPERUSER=true HERALD_HTTP_PORT=0 HERALD_LOG_LEVEL=warning

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

trace=${TRACE_PERCENT:-}
if [ -n "$trace" ]; then
    # A collector that accepts every export (200, empty protobuf answer) and counts the bytes.
    collector_port=$(free_port 0)
    python3 - "$collector_port" > .run/bench-worker-collector.log 2>&1 <<'PY' &
import http.server, sys
class Collector(http.server.BaseHTTPRequestHandler):
    received = 0
    def do_POST(self):
        Collector.received += len(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
        print(Collector.received, flush=True)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Collector).serve_forever()
PY
    collector=$!
    export HERALD_TRACING_OTLP_ENDPOINT="http://127.0.0.1:$collector_port/v1/traces" HERALD_TRACING_SAMPLE_PERCENT=$trace
fi

runs=${BENCH_WORKER_RUNS:-1}
bursts=${BENCH_WORKER_BURSTS:-1}
for p in $providers; do
    lines=""
    for _ in $(seq 1 "$runs"); do
        psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench_worker" -c "CREATE DATABASE herald_bench_worker" 2>/dev/null
        $bin migrate >/dev/null
        psql -q "$db_url" -c "INSERT INTO herald.categories (name, priority, max_attempts) VALUES ('bench', 'high', 3)"
        case $p in
            apns|sink) users=10000; psql -q "$db_url" -c "SELECT herald.register_device('w-' || g, 'apns', lpad(to_hex(g), 64, '0')) FROM generate_series(0, $((users - 1))) g" >/dev/null ;;
            fcm) users=10000; psql -q "$db_url" -c "SELECT herald.register_device('w-' || g, 'fcm', 'bench-fcm-' || g) FROM generate_series(0, $((users - 1))) g" >/dev/null ;;
            expo) users=10000; psql -q "$db_url" -c "SELECT herald.register_device('w-' || g, 'expo', 'ExponentPushToken[bench-' || g || ']') FROM generate_series(0, $((users - 1))) g" >/dev/null ;;
            webpush)
                # Subscriptions the simulator can decrypt for, made by its control route.
                users=500
                for i in $(seq 0 $((users - 1))); do
                    curl -sk -X POST "$HERALD_SIMULATOR_URL/_sim/webpush/subscriptions" | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(\"SELECT herald.register_device('w-$i', 'webpush', '%s', '{\\\"p256dh\\\": \\\"%s\\\", \\\"auth\\\": \\\"%s\\\"}');\" % (s['endpoint'], s['p256dh'], s['auth']))"
                done | psql -q "$db_url" >/dev/null ;;
            *) echo "unknown provider $p" >&2; exit 2 ;;
        esac
        psql -q "$db_url" -c "ANALYZE"
        if [ "$p" = sink ]; then export HERALD_PROVIDERS_APNS=sink; else export HERALD_PROVIDERS_APNS=live; fi
        $bin run > ".run/bench-worker-$p.log" 2>&1 &
        worker=$!
        sleep 3  # started, migrated check done, idle
        ticks=0; seconds=0
        for burst in $(seq 1 "$bursts"); do
            [ "$burst" = 1 ] || sleep 2  # the worker idles between bursts
            before=$(cpu_ticks "$worker")
            start=$(date +%s.%N)
            psql -q "$db_url" >/dev/null <<SQL
SELECT herald.enqueue_many(ARRAY(SELECT 'w-' || g FROM generate_series(0, $((users - 1))) g), 'bench',
           '{"title":"Bench","body":"A notification body of a typical length for a push message.","route":"/bench"}')
FROM generate_series(1, $((jobs / users)));
SQL
            while [ "$(psql -tAq "$db_url" -c 'SELECT count(*) FROM herald.outbox')" != 0 ]; do sleep 0.1; done
            end=$(date +%s.%N)
            after=$(cpu_ticks "$worker")
            ticks=$((ticks + after - before))
            seconds=$(python3 -c "print($seconds + $end - $start)")
            if [ "$bursts" -gt 1 ]; then
                python3 -c "print('{\"provider\":\"$p\",\"burst\":$burst,\"drain_jobs_per_s\":%d}' % ($(( (jobs / users) * users )) / ($end - $start)))" >&2
            fi
        done
        rss=$(awk '/VmHWM/ {print $2}' "/proc/$worker/status")
        kill -TERM "$worker"; wait "$worker" || true
        worker=""
        done_jobs=$(psql -tAq "$db_url" -c "SELECT count(*) FROM herald.delivery_log WHERE event = 'attempt' AND outcome = 'accepted'")
        line=$(python3 -c "
jobs = $(( (jobs / users) * users * bursts )); cpu = $ticks / $hz
print('{\"worker\":\"herald run\",\"provider\":\"$p\",\"trace_percent\":\"${trace:-off}\",\"jobs\":%d,\"accepted\":$done_jobs,\"drain_jobs_per_s\":%d,\"cpu_us_per_job\":%.0f,\"peak_rss_mib\":%.1f}' % (jobs, jobs / $seconds, cpu / jobs * 1e6, $rss / 1024))")
        echo "$line"
        lines+="$line"$'\n'
    done
    if [ "$runs" -gt 1 ]; then
        printf '%s' "$lines" | python3 -c "
import json, statistics, sys
cpus = [json.loads(l)['cpu_us_per_job'] for l in sys.stdin if l.strip()]
print(json.dumps({'worker': 'herald run', 'provider': '$p', 'runs': len(cpus), 'cpu_us_per_job_each': cpus,
                      'cpu_us_per_job_median': statistics.median(cpus)}, separators=(',', ':')))"
    fi
done
