#!/usr/bin/env bash
# run.sh — run every test binary given, each one its own process, and close
# with one plain summary line "N passed, N failed" (binaries, not cases).
# A binary passes when it exits 0. Output of each is shown as it runs.
# Each gets at most TEST_TIMEOUT_S seconds (1200): a hang fails that binary
# and the others still run.
set -u
pass=0; fail=0; failed=()
limit=${TEST_TIMEOUT_S:-1200}
for t in "$@"; do
    echo "=== $t"
    rc=0
    timeout -k 10 "$limit" "$t" || rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then echo "$t: TIMED OUT after $limit s"; fi
    if [ $rc = 0 ]; then pass=$((pass+1)); else fail=$((fail+1)); failed+=("$t"); fi
done
if [ $fail -ne 0 ]; then echo "failed: ${failed[*]}"; fi
echo "tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
