#!/usr/bin/env bash
# run.sh — run every test binary given, each one its own process, and close
# with one plain summary line "N passed, N failed" (binaries, not cases).
# A binary passes when it exits 0. Output of each is shown as it runs.
set -u
pass=0; fail=0; failed=()
for t in "$@"; do
    echo "=== $t"
    if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed+=("$t"); fi
done
if [ $fail -ne 0 ]; then echo "failed: ${failed[*]}"; fi
echo "tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
