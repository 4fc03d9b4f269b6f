#!/usr/bin/env bash
# make bench: a fresh database `herald_bench` each run, then `herald bench` (one JSON line).
set -euo pipefail
cd "$(dirname "$0")/.."
. .run/pg.env
psql -q "$HERALD_ADMIN_DATABASE_URL" -c "DROP DATABASE IF EXISTS herald_bench" -c "CREATE DATABASE herald_bench" 2>/dev/null
export HERALD_DATABASE_URL="${HERALD_ADMIN_DATABASE_URL%/postgres}/herald_bench"
exec .build/release/herald bench "$@"
