#!/usr/bin/env bash
# Lints every Swift file in git with the toolchain's swift-format (`swift format lint --strict`,
# .swift-format: Hummingbird's settings at 120 columns); a finding fails `make test`.
# `make format` rewrites the files in place.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! swift format --version >/dev/null 2>&1; then
    echo "swift-format: not in this Swift toolchain (it ships with Swift 6); install the toolchain's swift-format" >&2
    exit 1
fi
mode=${1:-lint}
if [ "$mode" = format ]; then
    git ls-files -z '*.swift' | xargs -0 swift format format --parallel --in-place
    echo "swift-format: formatted"
else
    git ls-files -z '*.swift' | xargs -0 swift format lint --strict --parallel
    echo "swift-format: clean ($(git ls-files '*.swift' | wc -l) files, .swift-format)"
fi
