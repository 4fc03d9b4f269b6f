#!/usr/bin/env bash
# Installs Debian's Chromium when missing: the console's page tests load every page in it,
# headless (`make test` calls this before the tests; nothing is skipped without it).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
echo "herald: installing chromium with apt-get (the console's page tests)" >&2
export DEBIAN_FRONTEND=noninteractive
{ apt-get install -y -qq chromium || { apt-get update -qq && apt-get install -y -qq chromium; }; } >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "herald: chromium could not be installed" >&2; exit 1; }
