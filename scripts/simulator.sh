#!/usr/bin/env bash
# The provider simulator for `make run` and `make bench`:
#   scripts/simulator.sh start [state-dir]  -> starts `herald simulate` on a free port with generated
#       credentials, waits until it listens, writes <state-dir>/herald.env (HERALD_* settings that
#       point every push provider of app `default` at it), prints the path of that file
#   scripts/simulator.sh stop [state-dir]   -> stops it
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${2:-.run/simulator}
# The newest build of herald (make run and make bench build release; tests build debug).
bin=${HERALD_BIN:-$(ls -t .build/release/herald .build/debug/herald 2>/dev/null | head -1)}

start() {
    stop
    mkdir -p "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
    "$bin" simulate --port "$port" --state-dir "$dir" --generate-credentials > "$dir/simulator.log" 2>&1 &
    echo $! > "$dir/simulator.pid"
    for _ in $(seq 1 100); do
        grep -q "listening on" "$dir/simulator.log" 2>/dev/null && [ -f "$dir/herald-providers.json" ] && break
        sleep 0.1
    done
    grep -q "listening on" "$dir/simulator.log" || { echo "herald: the simulator did not start:" >&2; cat "$dir/simulator.log" >&2; exit 1; }
    python3 - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "herald-providers.json")))
vapid = json.load(open(m["webpush"]["vapidFile"]))
base = m["simulator"]["baseURL"]
env = {
    "HERALD_PROVIDERS_APNS": "live", "HERALD_PROVIDERS_FCM": "live", "HERALD_PROVIDERS_EXPO": "live",
    "HERALD_PROVIDERS_WEBPUSH": "live", "HERALD_APP_IDS": "default",
    "HERALD_APP_DEFAULT_APNS_TEAM_ID": m["apns"]["teamID"], "HERALD_APP_DEFAULT_APNS_KEY_ID": m["apns"]["keyID"],
    "HERALD_APP_DEFAULT_APNS_TOPIC": m["apns"]["topic"], "HERALD_APP_DEFAULT_APNS_PRIVATE_KEY_FILE": m["apns"]["keyFile"],
    "HERALD_APP_DEFAULT_FCM_SERVICE_ACCOUNT_FILE": m["fcm"]["serviceAccountFile"],
    "HERALD_APP_DEFAULT_WEBPUSH_SUBJECT": m["webpush"]["subject"],
    "HERALD_APP_DEFAULT_WEBPUSH_PUBLIC_KEY": m["webpush"]["publicKey"],
    "HERALD_APP_DEFAULT_WEBPUSH_PRIVATE_KEY_FILE": os.path.join(d, "vapid-private-key.txt"),
    "HERALD_ENDPOINTS_APNS_PRODUCTION": base, "HERALD_ENDPOINTS_APNS_SANDBOX": base,
    "HERALD_ENDPOINTS_FCM": base, "HERALD_ENDPOINTS_EXPO": base,
    "HERALD_TLS_EXTRA_CA_FILES": m["simulator"]["caFile"],
    "HERALD_SIMULATOR_URL": base,
}
key = os.path.join(d, "vapid-private-key.txt")
with open(key, "w") as f:
    f.write(vapid["privateKey"])
os.chmod(key, 0o600)
with open(os.path.join(d, "herald.env"), "w") as f:
    for k, v in env.items():
        f.write(f"export {k}='{v}'\n")
PY
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
