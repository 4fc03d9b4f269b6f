#!/usr/bin/env bash
# Herald's local PostgreSQL: installs it when missing, runs a private cluster for this checkout.
#   scripts/pg.sh start   -> installs (apt) if needed, initdb + start, prints nothing but errors
#   scripts/pg.sh stop    -> fast shutdown of the cluster
#   scripts/pg.sh restart -> fast restart on the same port (the chaos tests' PostgreSQL restart)
#   scripts/pg.sh env     -> prints the shell exports for the running cluster
#   scripts/pg.sh bin     -> prints the folder of the PostgreSQL binaries the cluster runs (pgbench too)
# The cluster lives in $HERALD_PGDATA (default: .pgdata in the repo) and listens on 127.0.0.1
# on a free port, with its unix socket in the same folder. initdb/postgres refuse to run as
# root, so as root they run as the `postgres` user that Debian's package creates.
# The server runs with PostgreSQL's own defaults, as a user's cluster does (autovacuum every
# minute, 128 MB of shared buffers, durable commits): the tests, the demo and every benchmark
# figure see what a user's PostgreSQL does. The only setting changed is `max_connections`
# (200: the test suite runs several workers and pools at once). HERALD_PG_OPTIONS adds server
# options to a start, e.g. HERALD_PG_OPTIONS="-c autovacuum_naptime=1s" (a running cluster keeps
# its options: `scripts/pg.sh stop` first).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$here/scripts/lib.sh"
state="$here/.run"
mkdir -p "$state"

pgbin() {
    local d
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && { echo "$d"; return; }
    done
    return 1
}

install_pg() {
    if pgbin >/dev/null 2>&1 && [ -f /usr/include/postgresql/libpq-fe.h ] && [ -f /usr/include/zlib.h ]; then return; fi
    echo "herald: installing postgresql, libpq-dev and zlib1g-dev with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql libpq-dev zlib1g-dev >&2
}

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

datadir() {
    local d="${HERALD_PGDATA:-$here/.pgdata}"
    if [ "$(id -u)" = 0 ]; then
        # The postgres user must be able to reach the folder; a clone under a private temp
        # folder may not be reachable, so fall back to a per-checkout folder under /tmp.
        mkdir -p "$d"
        chown postgres:postgres "$d"
        if ! runuser -u postgres -- test -w "$d"; then
            d="/tmp/herald-pgdata-$(echo "$here" | md5sum | cut -c1-12)"
            mkdir -p "$d"; chown postgres:postgres "$d"
        fi
    fi
    echo "$d"
}

start() {
    install_pg
    local bin d port
    bin=$(pgbin)
    d=$(datadir)
    if [ -f "$state/pg.env" ] && . "$state/pg.env" && as_pg "$bin/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; then
        [ -z "${HERALD_PG_OPTIONS:-}" ] || echo "herald: PostgreSQL is already running with its options; HERALD_PG_OPTIONS takes effect after scripts/pg.sh stop" >&2
        return 0
    fi
    if [ ! -f "$d/PG_VERSION" ]; then
        as_pg "$bin/initdb" -D "$d" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    fi
    mkdir -p "$d/sock"; chown postgres:postgres "$d/sock" 2>/dev/null || true
    # The port is free when picked but another process may bind it before PostgreSQL does:
    # then PostgreSQL says it could not bind, and the start is tried again on another port.
    local attempt logged
    for attempt in 1 2 3 4 5; do
        port=$(free_port 54329 200)
        logged=$( (wc -l < "$d/server.log") 2>/dev/null || echo 0)
        if as_pg "$bin/pg_ctl" -D "$d" -l "$d/server.log" -w -t 60 start \
            -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$d/sock -c max_connections=200 ${HERALD_PG_OPTIONS:-}" >/dev/null; then
            break
        fi
        if [ "$attempt" -lt 5 ] && tail -n "+$((logged + 1))" "$d/server.log" | grep -qE 'could not bind|Address already in use'; then
            continue
        fi
        echo "herald: PostgreSQL failed to start; log follows" >&2; tail -n 30 "$d/server.log" >&2; exit 1
    done
    cat > "$state/pg.env" <<ENV
PGDATA_DIR=$d
PGPORT_HERALD=$port
export HERALD_ADMIN_DATABASE_URL=postgresql://postgres@127.0.0.1:$port/postgres
export HERALD_DATABASE_URL=postgresql://postgres@127.0.0.1:$port/herald
export HERALD_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:$port/postgres
ENV
    psql -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='herald'" | grep -q 1 \
        || psql -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE herald" >/dev/null
}

stop() {
    [ -f "$state/pg.env" ] || return 0
    . "$state/pg.env"
    as_pg "$(pgbin)/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >/dev/null 2>&1 || true
    rm -f "$state/pg.env"
}

# Chaos tests: every connection drops, the cluster comes back on the same port and data.
restart() {
    . "$state/pg.env"
    as_pg "$(pgbin)/pg_ctl" -D "$PGDATA_DIR" -l "$PGDATA_DIR/server.log" -m fast -w -t 60 restart >/dev/null
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart) restart ;;
    env) cat "$state/pg.env" ;;
    bin) pgbin ;;
    install) install_pg ;;
    *) echo "usage: scripts/pg.sh start|stop|restart|env|bin|install" >&2; exit 2 ;;
esac
