#!/usr/bin/env bash
# A new user's first command, as they meet it: a fresh clone of this checkout's HEAD runs
# `make run` with no terminal (PostgreSQL, a release build from scratch and nothing else, the
# simulator, the worker, the demo). It must exit 0, print the report, and leave none of its
# processes running. `make test` runs it last; NEWCOMER_CHECK=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${NEWCOMER_CHECK:-1}" = 0 ]; then
    echo "newcomer: skipped (NEWCOMER_CHECK=0)"
    exit 0
fi
root=$(mktemp -d /tmp/herald-newcomer.XXXXXX)
chmod 755 "$root"  # PostgreSQL runs as its own user and keeps its data inside the clone
clone="$root/herald"
cleanup() {
    pkill -KILL -f "$clone/" 2>/dev/null || true
    rm -rf "$root"
}
trap cleanup EXIT
git clone -q . "$clone"
log="$root/make-run.log"
start=$(date +%s)
if ! (cd "$clone" && make run </dev/null >"$log" 2>&1); then
    echo "newcomer: make run failed on a fresh clone; its last lines:" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
if ! grep -q "What the providers received" "$log"; then
    echo "newcomer: make run exited 0 without the demo report; its last lines:" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
if [ -d "$clone/.build/debug" ]; then
    echo "newcomer: the clone has a debug build, so this did not check a release-only clone" >&2
    exit 1
fi
sleep 1
if left=$(pgrep -af "$clone/"); then
    echo "newcomer: make run left processes running:" >&2
    echo "$left" >&2
    exit 1
fi
echo "newcomer: fresh clone, make run without a terminal: exit 0, report printed, nothing left running ($(( $(date +%s) - start )) s)"
