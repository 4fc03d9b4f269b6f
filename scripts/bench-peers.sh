#!/usr/bin/env bash
# make bench-peers: Herald against PgQueuer 1.6 on the same PostgreSQL (this checkout's cluster),
# in one run. Per round: PgQueuer (pip, in a throwaway venv; 2 worker processes x batch 100,
# ANALYZE after the bulk enqueue) drains PEER_JOBS no-op jobs on a fresh database
# `herald_peers_pgq`; then `herald-bench` (sink) and `herald-bench --policy` drain as many jobs,
# each on a fresh `herald_bench`. Prints one JSON line per measurement, the top statements of
# pg_stat_statements for each (whole run: schema, enqueue, drain), then a summary line with the
# ratios and the targets: sink >= 1.5x PgQueuer, policy >= 0.9x sink, statements per job
# <= 0.01, bench peak RSS <= 64 MiB. Throughput is the median over the rounds; statements per
# job and RSS the worst round; the worker's CPU a job (the bench process's, during the sink drains) the median.
# Each measurement starts on a quiet cluster: the one before it dropped, a CHECKPOINT, no
# autovacuum worker running (fresh_db).
# Each round also measures the floor: the rows Herald must write per job (lease the job and hold
# its recipient; delete it, an inbox row, a delivery-log row, free the recipient), as two bare
# SQL statements per batch of 500 in pgbench (scripts/peers/floor.*) at 2 and 4 clients, with
# no reads, no policy and no worker. What Herald's drain cannot pass on this machine; when it is
# below 1.5x PgQueuer, so is every Herald.
#   PEER_JOBS (50000)  ROUNDS (1)  HERALD_BENCH_BIN (.build/release/herald-bench)
#   PEERS_VENV (.run/peers-venv)  PEERS_HERALD_DB (herald_bench)
#   PEER_STRICT=1: exit 1 when a target is missed
#   PEERS_RESTART_PG=0: never restart the cluster to load pg_stat_statements
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
. .run/pg.env

jobs=${PEER_JOBS:-50000}
rounds=${ROUNDS:-1}
bench_bin=${HERALD_BENCH_BIN:-.build/release/herald-bench}
venv=${PEERS_VENV:-.run/peers-venv}
herald_db=${PEERS_HERALD_DB:-herald_bench}
pgqueuer_version=1.6.0
admin=${HERALD_ADMIN_DATABASE_URL:?run scripts/pg.sh start first}
base=${admin%/*}
out=.run/bench-peers.jsonl
log=.run/bench-peers.log
: > "$out"; : > "$log"

[ -x "$bench_bin" ] || { echo "bench-peers: no $bench_bin (make build-release)" >&2; exit 1; }

sql() { PGOPTIONS="-c client_min_messages=warning ${PGOPTIONS:-}" psql -X -q -t -A -v ON_ERROR_STOP=1 "$admin" -c "$1"; }
note() { echo "# $*" >&2; }
emit() { tee -a "$out"; }
measured_dbs=(herald_peers_pgq herald_peers_floor "$herald_db")
drop_measured() { local db; for db in "${measured_dbs[@]}"; do sql "DROP DATABASE IF EXISTS $db" >/dev/null; done; }
# DB, new and empty, on a quiet cluster whoever ran before: every measured database dropped (else
# autovacuum cleans the previous measurement's tens of thousands of dead rows during the next
# drain, on the same two cores), its dirty pages written (CHECKPOINT), no autovacuum worker left.
fresh_db() {
    local n i
    drop_measured
    sql "CHECKPOINT" >/dev/null
    for i in $(seq 1 300); do
        n=$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
        [ "$n" = 0 ] && break
        [ "$i" = 1 ] && note "waiting for $n autovacuum worker(s) before the next measurement"
        sleep 0.2
    done
    sql "CREATE DATABASE $1" >/dev/null
}

# --- PgQueuer in a throwaway venv, reused while it holds the pinned version -------------------
if ! "$venv/bin/python" -c "import asyncpg, importlib.metadata as m; assert m.version('pgqueuer') == '$pgqueuer_version'" 2>/dev/null; then
    note "installing pgqueuer==$pgqueuer_version and asyncpg into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "pgqueuer==$pgqueuer_version" asyncpg >&2
fi

# --- pg_stat_statements: loaded at server start, so it may need one restart of this cluster ----
others=$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
preloaded() { sql "SHOW shared_preload_libraries" | tr ',' '\n' | tr -d ' "' | grep -v '^$' || true; }
pgss_loaded() { local libs; libs=$(preloaded); grep -qx pg_stat_statements <<< "$libs"; }
if ! pgss_loaded; then
    how="add pg_stat_statements to shared_preload_libraries and restart PostgreSQL (for this checkout's cluster: psql \"\$HERALD_ADMIN_DATABASE_URL\" -c \"ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'\" && scripts/pg.sh restart)"
    if [ "$(sql "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_stat_statements'")" = 0 ]; then
        note "pg_stat_statements is not installed with this PostgreSQL (Debian: postgresql-contrib); no statement figures"
    elif [ "${PEERS_RESTART_PG:-1}" != 1 ] || [ -z "${PGDATA_DIR:-}" ] || [ "$others" != 0 ]; then
        note "pg_stat_statements is not loaded and the cluster is not restarted ($others other sessions); no statement figures."
        note "To enable: $how"
    else
        # Keep whatever else is preloaded; the list form, as one string would become one name.
        libs=$(preloaded | sed "s/.*/'&'/" | paste -sd, -)
        note "loading pg_stat_statements: ALTER SYSTEM SET shared_preload_libraries, then scripts/pg.sh restart"
        sql "ALTER SYSTEM SET shared_preload_libraries = ${libs:+$libs, }'pg_stat_statements'" >/dev/null
        scripts/pg.sh restart || { note "restart failed: see $PGDATA_DIR/server.log and $PGDATA_DIR/postgresql.auto.conf"; exit 1; }
    fi
fi
pgss=0
if pgss_loaded; then
    # In the admin database only: the view covers every database, and the measured ones stay untouched.
    sql "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
    pgss=1
fi

pgss_reset() {  # DB: forget that database's statements
    [ "$pgss" = 1 ] || return 0
    sql "SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database WHERE datname = '$1'" >/dev/null
}

pgss_report() {  # DB WHO LABEL ROUND: top 5 statements by total time, one JSON line each
    [ "$pgss" = 1 ] || return 0
    sql "WITH s AS (
           SELECT s.* FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$1'),
         t AS (SELECT sum(total_exec_time) AS ms FROM s)
         SELECT row_to_json(r) FROM (
           SELECT '$2 $3' AS pg_stat_statements, $4 AS round,
                  row_number() OVER (ORDER BY total_exec_time DESC) AS rank, calls,
                  round(total_exec_time::numeric, 1) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
                  round((100 * total_exec_time / nullif(t.ms, 0))::numeric, 1) AS share_pct, rows,
                  left(regexp_replace(query, '\s+', ' ', 'g'), 80) AS query
           FROM s, t ORDER BY total_exec_time DESC LIMIT 5) r" | emit
}

pgss_totals() {  # DB: {"pg_calls":..,"pg_exec_ms":..} for the whole run on that database
    if [ "$pgss" = 1 ]; then
        sql "SELECT json_build_object('pg_calls', coalesce(sum(calls), 0), 'pg_exec_ms', round(coalesce(sum(total_exec_time), 0)::numeric, 1))
             FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$1'"
    else
        echo '{}'
    fi
}

after() {  # what else ran: other sessions on the cluster and the load, as the run ends
    printf '{"other_sessions_after": %s, "loadavg_1m_after": %s}' \
        "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" \
        "$(cut -d' ' -f1 /proc/loadavg)"
}

annotate() {  # WHO LABEL ROUND JSON... < one JSON line -> that line with the objects' fields added
    python3 -c '
import json, sys
who, label, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
totals = {k: v for extra in sys.argv[4:] for k, v in json.loads(extra).items()}
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
if not lines:
    sys.exit(f"bench-peers: {who} {label} printed no JSON line")
d = json.loads(lines[-1])
d.pop("who", None)
if "jobs_per_s" not in d:
    d["jobs_per_s"] = d.get("drain_jobs_per_s")
print(json.dumps({"who": who, "label": label, "round": rnd, **d, **totals}))
' "$@"
}

run_pgqueuer() {  # ROUND
    local db=herald_peers_pgq line
    fresh_db "$db"; pgss_reset "$db"
    line=$(timeout 1200 "$venv/bin/python" scripts/peers/pgqueuer_drain.py "$base/$db" --jobs "$jobs" --procs 2 --batch 100 2>>"$log") \
        || { note "pgqueuer run failed; $log follows"; tail -n 30 "$log" >&2; exit 1; }
    annotate pgqueuer "pgqueuer $pgqueuer_version" "$1" "$(pgss_totals "$db")" "$(after)" <<< "$line" | emit
    pgss_report "$db" pgqueuer "$pgqueuer_version" "$1"
}

pgbench_bin="$(scripts/pg.sh bin || true)/pgbench"  # the cluster's own version

run_floor() {  # ROUND CLIENTS
    local round=$1 clients=$2 db=herald_peers_floor per start end acked
    [ -x "$pgbench_bin" ] || { note "no pgbench: the floor is not measured"; return 0; }
    fresh_db "$db"
    psql -X -q -v ON_ERROR_STOP=1 -v jobs="$jobs" -v users=10000 -f scripts/peers/floor-schema.sql "$base/$db" >>"$log" 2>&1 \
        || { note "floor schema failed; $log follows"; tail -n 30 "$log" >&2; exit 1; }
    pgss_reset "$db"
    per=$(( (jobs + 500 * clients - 1) / (500 * clients) ))
    start=$(date +%s.%N)
    timeout 1200 "$pgbench_bin" -n -c "$clients" -j "$clients" -t "$per" -D lease=1 -f scripts/peers/floor.pgbench "$base/$db" >>"$log" 2>&1 \
        || { note "floor pgbench failed; $log follows"; tail -n 30 "$log" >&2; exit 1; }
    end=$(date +%s.%N)
    acked=$(psql -X -q -t -A "$base/$db" -c "SELECT count(*) FROM delivery_log")
    [ "$acked" = "$jobs" ] || { note "floor: $acked of $jobs jobs acknowledged"; exit 1; }
    python3 -c 'import json, sys; j, c, a, b = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]); print(json.dumps({"jobs": j, "clients": c, "batch_size": 500, "drain_seconds": round(b - a, 2), "jobs_per_s": round(j / (b - a))}))' \
        "$jobs" "$clients" "$start" "$end" \
        | annotate floor "herald writes, $clients clients" "$round" "$(pgss_totals "$db")" "$(after)" | emit
    pgss_report "$db" floor "$clients clients" "$round"
}

run_herald() {  # ROUND LABEL [herald-bench args...]
    local round=$1 label=$2 db=$herald_db line
    shift 2
    fresh_db "$db"; pgss_reset "$db"
    line=$(HERALD_DATABASE_URL="$base/$db" timeout 1200 "$bench_bin" --jobs "$jobs" --latency-samples 0 "$@" 2>>"$log") \
        || { note "herald-bench $label failed; $log follows"; tail -n 30 "$log" >&2; exit 1; }
    annotate herald "$label" "$round" "$(pgss_totals "$db")" "$(after)" <<< "$line" | emit
    pgss_report "$db" herald "$label" "$round"
}

load=$(cut -d' ' -f1 /proc/loadavg)
note "bench-peers: $jobs jobs, $rounds round(s), PostgreSQL $(sql "SHOW server_version"), load $load, $others other session(s) on the cluster"
[ "$others" = 0 ] || note "other sessions share this PostgreSQL: the figures below are not from a quiet machine"
for round in $(seq 1 "$rounds"); do
    run_pgqueuer "$round"
    run_herald "$round" sink
    run_herald "$round" policy --policy
    run_floor "$round" 2
    run_floor "$round" 4
done
drop_measured || true

python3 - "$out" "$jobs" "$rounds" "$others" "$load" "${PEER_STRICT:-0}" <<'PY'
import json, statistics, sys
path, jobs, rounds, others, load, strict = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.startswith("{")]
runs = [r for r in rows if "who" in r]
def med(who, label=None, key="jobs_per_s"):
    xs = [r[key] for r in runs if r["who"] == who and (label is None or r["label"] == label) and r.get(key) is not None]
    return statistics.median(xs) if xs else None
def worst(key):
    xs = [r[key] for r in runs if r["who"] == "herald" and r.get(key) is not None]
    return max(float(x) for x in xs) if xs else None
pq, sink, policy = med("pgqueuer"), med("herald", "sink"), med("herald", "policy")
floor2, floor4 = med("floor", "herald writes, 2 clients"), med("floor", "herald writes, 4 clients")
ratio = lambda a, b: round(a / b, 3) if a and b else None
spj, rss = worst("statements_per_job"), worst("peak_rss_mib")
worker_cpu = med("herald", "sink", "worker_cpu_us_per_job")
checks = {
    "sink_vs_pgqueuer >= 1.5": (ratio(sink, pq), 1.5, ">="),
    "policy_vs_sink >= 0.9": (ratio(policy, sink), 0.9, ">="),
    "statements_per_job <= 0.01": (spj, 0.01, "<="),
    "peak_rss_mib <= 64": (rss, 64.0, "<="),
}
targets = {k: (None if v is None else (v >= lim if op == ">=" else v <= lim)) for k, (v, lim, op) in checks.items()}
ok = all(t is True for t in targets.values())
company = max([int(others)] + [r.get("other_sessions_after", 0) for r in runs])
print(json.dumps({
    "summary": "bench-peers", "jobs": int(jobs), "rounds": int(rounds),
    "pgqueuer_jobs_per_s": pq, "herald_sink_jobs_per_s": sink, "herald_policy_jobs_per_s": policy,
    "sink_vs_pgqueuer": ratio(sink, pq), "policy_vs_sink": ratio(policy, sink),
    "policy_vs_pgqueuer": ratio(policy, pq), "statements_per_job": spj, "peak_rss_mib": rss,
    "sink_worker_cpu_us_per_job": worker_cpu,
    "floor_2_clients_jobs_per_s": floor2, "floor_4_clients_jobs_per_s": floor4,
    "floor_2_vs_pgqueuer": ratio(floor2, pq), "floor_4_vs_pgqueuer": ratio(floor4, pq),
    "sink_vs_floor_2": ratio(sink, floor2),
    "targets": targets, "pass": ok, "other_sessions_seen": company, "loadavg_1m_at_start": float(load),
}), flush=True)
word = lambda t: "n/a" if t is None else ("ok" if t else "MISSED")
n = lambda x: "n/a" if x is None else f"{x:,.0f}"
print(f"# PgQueuer {n(pq)}/s  Herald sink {n(sink)}/s ({ratio(sink, pq)}x)  policy {n(policy)}/s"
      f" ({ratio(policy, sink)}x of sink)  statements/job {spj}  peak RSS {rss} MiB"
      f"  worker CPU {worker_cpu} us/job (sink)", file=sys.stderr)
if floor2:
    print(f"# floor (Herald's writes alone, pgbench, no reads, no worker): 2 clients {n(floor2)}/s"
          f" ({ratio(floor2, pq)}x PgQueuer), 4 clients {n(floor4)}/s ({ratio(floor4, pq)}x); sink is"
          f" {ratio(sink, floor2)}x of the 2-client floor", file=sys.stderr)
print("# targets: " + ", ".join(f"{k} {word(t)}" for k, t in targets.items()), file=sys.stderr)
if company:
    print(f"# other sessions were seen on this PostgreSQL ({company}): rerun on a quiet machine before quoting these", file=sys.stderr)
sys.exit(1 if strict == "1" and not ok else 0)
PY
