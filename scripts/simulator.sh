#!/usr/bin/env bash
# The provider simulator for `make run` and `make bench`:
#   scripts/simulator.sh start [state-dir]  -> starts `herald-simulator` on a free port with generated
#       credentials, waits until it listens and has written <state-dir>/herald.env (HERALD_* settings
#       that point every push provider of app `default` at it), prints the path of that file
#   scripts/simulator.sh stop [state-dir]   -> stops it
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
dir=${2:-.run/simulator}
# The newest build of herald-simulator (make run and make bench build release; tests build
# debug). A fresh clone that only ran `make run` has no debug build: a missing one is skipped.
newest_simulator() {
    local b newest=""
    for b in .build/release/herald-simulator .build/debug/herald-simulator; do
        if [ -x "$b" ] && { [ -z "$newest" ] || [ "$b" -nt "$newest" ]; }; then newest=$b; fi
    done
    echo "$newest"
}

start() {
    stop
    local bin=${HERALD_SIMULATOR_BIN:-$(newest_simulator)}
    [ -n "$bin" ] || { echo "herald: no build of herald-simulator found (run make build-release)" >&2; exit 1; }
    mkdir -p "$dir"
    rm -f "$dir/herald.env"
    port=$(free_port 0)
    "$bin" --port "$port" --state-dir "$dir" --generate-credentials > "$dir/simulator.log" 2>&1 &
    echo $! > "$dir/simulator.pid"
    for _ in $(seq 1 100); do
        grep -q "listening on" "$dir/simulator.log" 2>/dev/null && [ -f "$dir/herald.env" ] && break
        sleep 0.1
    done
    grep -q "listening on" "$dir/simulator.log" || { echo "herald: the simulator did not start:" >&2; cat "$dir/simulator.log" >&2; exit 1; }
    echo "$dir/herald.env"
}

stop() {
    if [ -f "$dir/simulator.pid" ]; then
        kill -TERM "$(cat "$dir/simulator.pid")" 2>/dev/null || true
        rm -f "$dir/simulator.pid"
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: scripts/simulator.sh start|stop [state-dir]" >&2; exit 2 ;;
esac
