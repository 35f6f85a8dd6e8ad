#!/usr/bin/env bash
# long.sh — fuzz each harness for a while (what `make fuzz` runs).
# Usage: tests/fuzz/long.sh BINDIR [NAME...]   (default: every harness in BINDIR)
# Each harness runs until FUZZ_SECONDS (60) pass or FUZZ_RUNS (10M) inputs
# ran, whichever comes first, one after the other. New inputs go to
# BINDIR/work/NAME (the seed corpus in the tree is only read), crashing or
# leaking inputs to BINDIR/artifacts/; each run's log is BINDIR/NAME.log.
# Add what it finds to tests/fuzz/corpus/NAME/ after fixing (README.md).
set -u
bin=${1:?usage: long.sh BINDIR [NAME...]}; shift
here=$(cd "$(dirname "$0")" && pwd)
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$bin"/*; do [ -f "$f" ] && [ -x "$f" ] && names+=("$(basename "$f")"); done
fi
fail=0
for n in "${names[@]}"; do
    mkdir -p "$bin/work/$n" "$bin/artifacts"
    echo "=== fuzz $n: ${FUZZ_SECONDS:-60} s or ${FUZZ_RUNS:-10000000} runs (log $bin/$n.log)"
    rc=0
    "$bin/$n" -max_total_time="${FUZZ_SECONDS:-60}" -runs="${FUZZ_RUNS:-10000000}" -timeout=30 \
        -print_final_stats=1 -artifact_prefix="$bin/artifacts/$n-" \
        "$bin/work/$n" "$here/corpus/$n" > "$bin/$n.log" 2>&1 || rc=$?
    grep -E '^(Done|stat::number_of_executed_units)|ERROR|SUMMARY' "$bin/$n.log" | sed "s/^/$n: /"
    [ $rc -eq 0 ] || { echo "$n: FAILED (exit $rc), see $bin/$n.log"; fail=1; }
done
exit $fail
