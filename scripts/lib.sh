#!/usr/bin/env bash
# What the scripts share; sourced (`. scripts/lib.sh`) from the repository's root.

# free_port [FIRST [COUNT]]: prints a TCP port nothing listens on.
#   free_port 0          -> any free port (the kernel's pick)
#   free_port 8080       -> 8080 when it is free, else any free port
#   free_port 54329 200  -> a free port in 54329..54528, from a random offset (two callers in the
#                           same instant, a CI clone beside a `make run` clone, would otherwise
#                           both pick the first); nothing printed when all are taken
free_port() {
    python3 - "${1:-0}" "${2:-0}" <<'PY'
import random, socket, sys
first, count = int(sys.argv[1]), int(sys.argv[2])
def free(port):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
        return s.getsockname()[1]
    except OSError:
        return None
    finally:
        s.close()
if count > 0:
    start = random.randrange(count)
    port = next((p for p in (first + (start + i) % count for i in range(count)) if free(p)), None)
else:
    port = (free(first) if first else None) or free(0)
if port:
    print(port)
PY
}
