#!/usr/bin/env bash
# long.sh — fuzz each harness for a while (what `make fuzz` runs).
# Usage: tests/fuzz/long.sh BINDIR [NAME...]   (default: every harness in BINDIR)
# Each harness runs, one after the other, until FUZZ_RUNS (10M) inputs ran,
# FUZZ_SECONDS (60) of wall time passed or, if set, FUZZ_CPU_SECONDS of its
# own CPU time were spent (for "10M or one CPU-hour" on a shared machine),
# whichever comes first. New inputs go to BINDIR/work/NAME (the seed corpus
# in the tree is only read); crashing or leaking inputs to BINDIR/artifacts/;
# each run's log is BINDIR/NAME.log. After fixing what it found, add the
# input to tests/fuzz/corpus/NAME/ (README.md).
set -u
bin=${1:?usage: long.sh BINDIR [NAME...]}; shift
here=$(cd "$(dirname "$0")" && pwd)
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$bin"/*; do [ -f "$f" ] && [ -x "$f" ] && names+=("$(basename "$f")"); done
fi
tck=$(getconf CLK_TCK)
cpu_of() { awk -v t="$tck" '{ sub(/^.*\) /, ""); printf "%d\n", ($12 + $13) / t }' "/proc/$1/stat" 2>/dev/null; }

fail=0
for n in "${names[@]}"; do
    mkdir -p "$bin/work/$n" "$bin/artifacts"
    echo "=== fuzz $n: ${FUZZ_RUNS:-10000000} runs, ${FUZZ_SECONDS:-60} s${FUZZ_CPU_SECONDS:+ or $FUZZ_CPU_SECONDS CPU s} (log $bin/$n.log)"
    "$bin/$n" -runs="${FUZZ_RUNS:-10000000}" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=30 \
        -print_final_stats=1 -artifact_prefix="$bin/artifacts/$n-" \
        "$bin/work/$n" "$here/corpus/$n" > "$bin/$n.log" 2>&1 &
    pid=$! cpu=0 stopped=0
    while kill -0 $pid 2>/dev/null; do
        c=$(cpu_of $pid); cpu=${c:-$cpu}
        if [ -n "${FUZZ_CPU_SECONDS:-}" ] && [ "$cpu" -ge "$FUZZ_CPU_SECONDS" ] && [ $stopped = 0 ]; then
            kill -INT $pid; stopped=1   # libFuzzer prints its final stats and exits 72
        fi
        sleep 2
    done
    rc=0; wait $pid || rc=$?
    [ $stopped = 1 ] && [ $rc = 72 ] && rc=0
    grep -E '^(Done|stat::number_of_executed_units)|ERROR|SUMMARY' "$bin/$n.log" | sed "s/^/$n: /"
    echo "$n: about $cpu s of CPU"
    [ $rc -eq 0 ] || { echo "$n: FAILED (exit $rc), see $bin/$n.log"; fail=1; }
done
exit $fail
