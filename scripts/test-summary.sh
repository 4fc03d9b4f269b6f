#!/usr/bin/env bash
# Prints the plain closing line "tests: N passed, N failed" from a `swift test` log, after a
# "failed: <test>" line for each failed test (so the last lines of a long log name them).
log=${1:?log file}
# One "Test run with N tests" line per `swift test` run (make test runs four): add them up.
total=$(grep -Eo 'Test run with [0-9]+ tests?' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
# A failed test ends with "✘ Test <name or "display name"> [with N test cases] failed after …"
# (its "recorded an issue" lines do not count).
failures=$(grep -E '^✘ Test .* failed after ' "$log" | sed -E 's/ (with [0-9]+ test cases? )?failed after .*//; s/^✘ Test /failed: /')
failed=0
[ -z "$failures" ] || { failed=$(printf '%s\n' "$failures" | wc -l); printf '%s\n' "$failures"; }
[ -n "$total" ] || total=0
passed=$(( total - failed ))
[ "$passed" -ge 0 ] || passed=0
echo "tests: $passed passed, $failed failed"
