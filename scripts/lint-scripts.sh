#!/usr/bin/env bash
# Lints scripts/ with ShellCheck (errors fail `make test`); installs it with apt when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v shellcheck >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -qq shellcheck || { apt-get update -qq && apt-get install -y -qq shellcheck; }; } >/dev/null 2>&1 || true
fi
if ! command -v shellcheck >/dev/null 2>&1; then
    echo "shellcheck: not available here, scripts/ not checked" >&2
    exit 0
fi
shellcheck -S error scripts/*.sh
echo "shellcheck: scripts/ clean (severity error)"
