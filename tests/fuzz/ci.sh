#!/usr/bin/env bash
# ci.sh — the fuzz step of `make test`: every harness replays its seed
# corpus (tests/fuzz/corpus/NAME/, where fixed crashes stay as regression
# inputs) and then fuzzes with a fixed -seed and -runs, so the step does the
# same work on every landing and never passes or fails by luck. Two
# harnesses at a time (CI has two cores); about a minute in all.
# Needs FUZZ_BIN, the folder `make fuzz-build` fills (build-fuzz/fuzz).
set -u
bin=${FUZZ_BIN:?FUZZ_BIN: the folder of the fuzz harnesses (make fuzz-build)}
here=$(cd "$(dirname "$0")" && pwd)
# Inputs per harness after the replay: about 10 s each on one CI core.
runs() {
    case $1 in
        size) echo 300000 ;;  set) echo 40000 ;;  ini) echo 6000 ;;
        plan_json) echo 60000 ;;  profile_json) echo 30000 ;;
        ckpt|ckpt_crc) echo 30000 ;;  db) echo 2500 ;;  bridge_events) echo 8000 ;;  undo) echo 2000000 ;;
        *) echo "ci.sh: no run count for harness '$1'" >&2; return 1 ;;
    esac
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

one() {
    local n=$1 r
    r=$(runs "$n") || return 1
    if [ ! -x "$bin/$n" ]; then echo "fuzz $n: no harness at $bin/$n"; return 1; fi
    mkdir -p "$tmp/$n"   # new inputs land here, never in the tree
    local t0=$SECONDS rc=0
    "$bin/$n" -seed=1 -runs="$r" -timeout=30 -artifact_prefix="$tmp/$n-" "$tmp/$n" "$here/corpus/$n" \
        > "$tmp/$n.log" 2>&1 || rc=$?
    local seeds
    seeds=$(find "$here/corpus/$n" -type f | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz $n: $seeds seeds replayed, $r runs (seed 1), $((SECONDS - t0)) s: ok"
    else
        echo "fuzz $n: FAILED (exit $rc); the end of its log:"
        tail -n 40 "$tmp/$n.log"
        for a in "$tmp/$n"-*; do [ -e "$a" ] && echo "fuzz $n: input: $(od -An -c "$a" | head -n 8)"; done
    fi
    return $rc
}

names=()
for f in "$here"/fuzz_*.c; do
    n=$(basename "$f" .c); n=${n#fuzz_}
    [ "$n" = util ] || names+=("$n")
done
fail=0
for ((i = 0; i < ${#names[@]}; i += 2)); do
    one "${names[i]}" > "$tmp/out.a" & a=$!
    b=
    if [ $((i + 1)) -lt ${#names[@]} ]; then one "${names[i + 1]}" > "$tmp/out.b" & b=$!; fi
    wait $a || fail=1
    cat "$tmp/out.a"
    if [ -n "$b" ]; then wait $b || fail=1; cat "$tmp/out.b"; fi
done
[ $fail -eq 0 ] && echo "fuzz: ${#names[@]} harnesses, no crash, no leak"
exit $fail
