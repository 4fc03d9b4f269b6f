#!/usr/bin/env bash
# make bench-pair BASE=<checkout>: this checkout's `herald-bench` against another checkout's (a
# commit to compare with, built with `swift build -c release` there), in alternating runs on the
# same PostgreSQL: one warm-up round, then ROUNDS counted rounds, each run on a fresh database,
# for the sink pipeline and for --policy. Prints drain jobs/s per run and each side's median, and
# the worker's CPU a job during the drain (`worker_cpu_us_per_job`; "-" from builds before it).
#   git worktree add /tmp/base <commit> && (cd /tmp/base && swift build -c release)
#   make bench-pair BASE=/tmp/base [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
. .run/pg.env
base=${1:?usage: scripts/bench-pair.sh BASE-CHECKOUT [ROUNDS]}
rounds=${2:-3}
[ -x "$base/.build/release/herald-bench" ] || [ -x "$base/.build/release/herald" ] \
    || { echo "no $base/.build/release/herald-bench: build it with swift build -c release" >&2; exit 1; }
[ -x .build/release/herald-bench ] || { echo "no .build/release/herald-bench: run make build-release" >&2; exit 1; }
bench_url="${HERALD_ADMIN_DATABASE_URL%/postgres}/herald_bench"

run() {  # run SIDE MODE -> "drain-jobs/s cpu-us-a-job"
    local side=$1 mode=$2 dir
    local -a bench
    # Builds before the benchmarks moved out of herald ran them as `herald bench`.
    if [ "$side" = this ]; then bench=(.build/release/herald-bench); dir=sql
    elif [ -x "$base/.build/release/herald-bench" ]; then bench=("$base/.build/release/herald-bench"); dir=$base/sql
    else bench=("$base/.build/release/herald" bench); dir=$base/sql; fi
    psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench" 2>/dev/null
    # Each side migrates with its own sql/ (older builds need the folder; newer ones carry it).
    HERALD_DATABASE_URL=$bench_url HERALD_DATABASE_MIGRATIONS_DIR=$dir \
        "${bench[@]}" --latency-samples 0 $mode 2>/dev/null \
        | python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(int(d["drain_jobs_per_s"]), d.get("worker_cpu_us_per_job", "-"))'
}

for mode in "" "--policy"; do
    label="herald bench${mode:+ $mode}"
    this=(); other=(); this_cpu=(); other_cpu=()
    for round in $(seq 0 "$rounds"); do
        # Alternate which side goes first, so neither always runs on a warmer machine.
        if [ $((round % 2)) = 0 ]; then a=$(run this "$mode"); b=$(run base "$mode"); else b=$(run base "$mode"); a=$(run this "$mode"); fi
        [ "$round" = 0 ] && continue  # warm-up
        this+=("${a% *}"); other+=("${b% *}"); this_cpu+=("${a#* }"); other_cpu+=("${b#* }")
    done
    median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    echo "$label: this ${this[*]} (median $(median "${this[@]}")), base ${other[*]} (median $(median "${other[@]}")) drain jobs/s"
    echo "$label: this ${this_cpu[*]} (median $(median "${this_cpu[@]}")), base ${other_cpu[*]} (median $(median "${other_cpu[@]}")) worker CPU µs a job"
done
psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" 2>/dev/null
