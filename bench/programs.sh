#!/usr/bin/env bash
# bench/programs.sh — what memsplit costs a user's own PyTorch program (issue 40).
#
#   bench/programs.sh path/to/memsplit
#
# For each program of BENCH_PROGRAM_LIST, the program's own step times
# (its `step N loss X ms Y` lines) in four runs:
#   alone     the program, nothing else
#   diagnose  memsplit profile --diagnose-only --steps N   (target ≤ 3%)
#   trace     memsplit profile --steps N, the tensor-level trace (target ≤ 25%)
#   plan      memsplit train --plan P, a one-stage plan on one real device made
#             by memsplit plan --gpus 1 from the trace run's profile (target ≤ 2%)
#   split2    (not in the default modes; needs two GPUs) memsplit train --plan P
#             with a two-stage plan over cuda:0 and cuda:1, made from the trace
#             run's profile with each GPU's capacity at the reserve plus 75% of
#             the tensors' peak, so that one GPU cannot hold it: the step time
#             of the program split over two real GPUs against the same program
#             alone on one, and each GPU's peak against its prediction (no
#             target: the sequential schedule adds the crossings' copies)
# The overhead is the median of steps 4..N-2 (the steps every run has: a
# profile stops inside step N-1) against the alone run's; the first-step
# cost is step 0's ms against the alone run's step 0. The four runs are made
# BENCH_PROGRAM_ROUNDS times, each round in the order opposite to the one
# before (alone diagnose trace plan, then plan trace diagnose alone), every
# program's first round before any program's second (a budget that runs out
# leaves each mode of each program measured once), and
# each mode's figure is its round with the lowest median: on a GPU that
# another job shares, or whose clocks drop, a run is only ever slowed, and a
# drift over the call weighs on every mode alike. A table, one line per
# target (PROGRAM MODE overhead +X.X% (target ≤ Y%) MET|MISSED) and
# ${OUT:-bench/out}/programs.json with every figure; each run's output in
# ${OUT:-bench/out}/programs/. Exit 1 when a run gave no step lines or a
# target was missed. Durations: bench/README.md ("Programs").
#
# Environment:
#   OUT                    where programs.json and programs/ go (bench/out)
#   PYTHON                 the Python with torch (python3)
#   BENCH_PROGRAM_LIST     programs, in order ("llama gpt2 ref resnet152")
#   BENCH_PROGRAM_<NAME>   the command of program NAME (upper case, - as _),
#                          word-split; --steps N is appended. Overrides the
#                          built-in ones, and names new ones
#   BENCH_PROGRAM_STEPS    the program's steps, and the profile's (16)
#   BENCH_PROGRAM_MODES    which runs ("alone diagnose trace plan"; split2 too
#                          on a machine of two GPUs)
#   BENCH_PROGRAM_ROUNDS   how many times each (2)
#   BENCH_PROGRAM_RUN_S    one run's cap in seconds (150)
#   BENCH_PROGRAM_WARMUP   1 (the default): each program first runs alone for
#                          2 steps, untimed, so that no timed run is the first
#                          on the machine to load its files and kernels (on an
#                          H100 a program's first run paid 2 to 3.4 times the
#                          later runs' step 0, memsplit's or not); 0: none
#   BENCH_SPLIT_DEVICES    split2's two devices (cuda:0,cuda:1; cpu,cpu runs the
#                          mode on the CPU, for a test of the script itself)
#   BENCH_BUDGET_S         seconds for the whole call (540): each run gets at
#                          most what is left, so a hang cannot eat the call
set -u -o pipefail

[ $# -eq 1 ] || { echo "usage: bench/programs.sh path/to/memsplit" >&2; exit 2; }
MS=$1
[ -x "$MS" ] || { echo "bench/programs: $MS is not an executable (build it with make)" >&2; exit 1; }
case $MS in /*) ;; *) MS=$PWD/$MS ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
OUTDIR=${OUT:-bench/out}
RAW=$OUTDIR/programs
PY=${PYTHON:-python3}
BUDGET=${BENCH_BUDGET_S:-540}
STEPS=${BENCH_PROGRAM_STEPS:-16}
LIST=${BENCH_PROGRAM_LIST:-llama gpt2 ref resnet152}
MODES=${BENCH_PROGRAM_MODES:-alone diagnose trace plan}
RUN_S=${BENCH_PROGRAM_RUN_S:-150}
ROUNDS=${BENCH_PROGRAM_ROUNDS:-2}
WARMUP=${BENCH_PROGRAM_WARMUP:-1}
# no PYTHONUNBUFFERED: print() would write a line and its newline apart, and
# memsplit's own lines could land between them (the programs flush each line)
mkdir -p "$RAW" || exit 1
START=$SECONDS
case $ROUNDS in '' | *[!0-9]* | 0) echo "bench/programs: BENCH_PROGRAM_ROUNDS must be a whole number from 1" >&2; exit 2 ;; esac
case $WARMUP in 0 | 1) ;; *) echo "bench/programs: BENCH_PROGRAM_WARMUP must be 0 or 1" >&2; exit 2 ;; esac
[ "$STEPS" -ge 7 ] || { echo "bench/programs: BENCH_PROGRAM_STEPS must be at least 7 (steps 4..N-2 are timed)" >&2; exit 2; }

program() { # NAME -> the command, one word a line
    local var
    var=BENCH_PROGRAM_$(echo "$1" | tr 'a-z-' 'A-Z_')
    if [ -n "${!var:-}" ]; then
        # word-split on purpose
        # shellcheck disable=SC2086
        printf '%s\n' ${!var}
        return
    fi
    local G=$REPO/tests/gpu/bridge
    case $1 in
    llama) printf '%s\n' "$PY" "$G/hf_llama_lightning.py" --batch 4 --seq 2048 ;;
    gpt2) printf '%s\n' "$PY" "$G/hf_gpt2_lightning.py" ;;
    # the overhead section's reference model (tests/gpu/bridge.sh)
    ref) printf '%s\n' "$PY" "$REPO/tests/bridge/ref_model.py" --blocks 8 --dim 2048 --heads 16 --seq 2048 --batch 8 \
        --vocab 32000 --amp ;;
    resnet152) printf '%s\n' "$PY" "$G/tv_resnet_amp.py" --model resnet152 --batch 128 ;;
    *) return 1 ;;
    esac
}

# run NAME.MODE CMD...: stdout to $RAW/NAME.MODE.out, stderr to .log, capped
# by RUN_S and the budget; its exit status and seconds to .rc
run() {
    local tag=$1
    shift
    local left=$((BUDGET - (SECONDS - START) - 15)) # 15: timeout's grace before KILL
    local limit=$((RUN_S < left ? RUN_S : left)) t0=$SECONDS rc=0
    if [ "$limit" -lt 15 ]; then
        echo "bench/programs: $tag skipped: the ${BUDGET} s budget is spent" | tee "$RAW/$tag.log" >&2
        echo "skipped 0" >"$RAW/$tag.rc"
        return 124
    fi
    timeout -k 15 "$limit" "$@" >"$RAW/$tag.out" 2>"$RAW/$tag.log" || rc=$?
    [ $rc = 124 ] || [ $rc = 137 ] && echo "timed out after ${limit} s" >>"$RAW/$tag.log"
    echo "$rc $((SECONDS - t0))" >"$RAW/$tag.rc"
    echo "bench/programs: $tag exit $rc ($((SECONDS - t0)) s, at $((SECONDS - START)) s of ${BUDGET})" >&2
    return $rc
}

# make_plan NAME: $RAW/NAME.plan.json, a one-stage plan from the first profile a trace (else a
# diagnose) run of NAME left, made once; 1 when there is none (said once, NAME.noplan kept)
make_plan() {
    [ -e "$RAW/$1.plan.json" ] && return 0
    [ -e "$RAW/$1.noplan" ] && return 1
    local f prof="" mem
    for f in "$RAW/$1".trace.*.out "$RAW/$1".diagnose.*.out; do
        [ -s "$f" ] && { prof=$f; break; }
    done
    # a profile made on the CPU records no capacity: the CPU stage gets one
    mem=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print('' if d.get('device','').startswith('cuda') else '64GiB')" \
        "$prof" 2>/dev/null)
    if [ -n "$prof" ] && "$MS" plan --profile "$prof" --gpus 1 ${mem:+--gpu-mem "$mem"} -o "$RAW/$1.plan.json" \
        >"$RAW/$1.plan.txt" 2>&1; then
        return 0
    fi
    echo "bench/programs: $1: no one-stage plan from ${prof:-a profile (no trace or diagnose run gave one)}; last lines:" >&2
    tail -n 4 "$RAW/$1.plan.txt" 2>/dev/null | sed 's/^/    /' >&2
    : >"$RAW/$1.noplan"
    return 1
}

# the split2 mode's devices: two GPUs; BENCH_SPLIT_DEVICES=cpu,cpu runs the same mode on the CPU
SPLIT_DEVICES=${BENCH_SPLIT_DEVICES:-cuda:0,cuda:1}
# make_split NAME: $RAW/NAME.split2.json, a two-stage plan over cuda:0 and cuda:1 from a profile
# of NAME of its own, each GPU too small for the whole program; 1 when there is none (said
# once, NAME.nosplit kept): fewer than two GPUs, no profile, or no such plan
make_split() {
    [ -e "$RAW/$1.split2.json" ] && return 0
    [ -e "$RAW/$1.nosplit" ] && return 1
    local prof="$RAW/$1.split2prof.out" cap why="" P
    if [ "$SPLIT_DEVICES" = cuda:0,cuda:1 ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
        why="this machine has fewer than two GPUs"
    else
        # a profile of its own, with the record pass (the timed trace runs have none), so that each
        # stage's prediction comes from the program's record, as doctor's do
        mapfile -t P <<<"${CMD[$1]}"
        run "$1.split2prof" "$MS" profile --json --quiet --steps 3 -- "${P[@]}" --steps 4 || why="its profile failed"
    fi
    if [ -n "$why" ]; then
        :
    else
        cap=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['reserve_bytes']; print(int(r + 0.75 * (d['peak_bytes'] - r)))" \
            "$prof" 2>/dev/null)
        if [ -n "$cap" ] && "$MS" plan --profile "$prof" --gpus 2 --devices "$SPLIT_DEVICES" --gpu-mem "$cap" \
            -o "$RAW/$1.split2.json" >"$RAW/$1.split2.txt" 2>&1; then
            [ "$("$PY" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['stages']))" "$RAW/$1.split2.json")" = 2 ] && return 0
            why="the plan has not two stages"
        else
            why="memsplit plan failed: $(tail -n 2 "$RAW/$1.split2.txt" 2>/dev/null | tr '\n' ' ')"
        fi
        rm -f "$RAW/$1.split2.json"
    fi
    echo "bench/programs: $1: no split over two GPUs: $why" >&2
    echo "$why" >"$RAW/$1.nosplit"
    return 1
}

: >"$RAW/list.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$RAW/gpu.txt" 2>/dev/null || : >"$RAW/gpu.txt"
NAMES=()
declare -A CMD
for NAME in $LIST; do
    mapfile -t P < <(program "$NAME") || true
    if [ ${#P[@]} = 0 ]; then
        echo "bench/programs: no program $NAME (built in: llama gpt2 ref resnet152; or set BENCH_PROGRAM_$(echo "$NAME" | tr 'a-z-' 'A-Z_'))" >&2
        echo "$NAME -" >>"$RAW/list.txt"
        continue
    fi
    printf '%s\t%s\n' "$NAME" "${P[*]} --steps $STEPS" >>"$RAW/list.txt"
    rm -f "$RAW/$NAME".*
    NAMES+=("$NAME")
    CMD[$NAME]=$(printf '%s\n' "${P[@]}")
done
# round by round over every program, so that a budget that runs out leaves every program's
# first round (each mode measured once) before any program's second
REVERSED=$(printf '%s\n' $MODES | tac | tr '\n' ' ')
for ((R = 1; R <= ROUNDS; R++)); do
    for NAME in "${NAMES[@]}"; do
        mapfile -t P <<<"${CMD[$NAME]}"
        if [ "$R" = 1 ]; then
            echo "== $NAME: ${P[*]} --steps $STEPS" >&2
            # untimed: the program's files and kernels loaded once before any timed run
            [ "$WARMUP" = 1 ] && run "$NAME.warmup" "${P[@]}" --steps 2
        fi
        P+=(--steps "$STEPS")
        ORDER=$MODES
        [ $((R % 2)) = 0 ] && ORDER=$REVERSED
        for M in $ORDER; do
            case $M in
            alone) run "$NAME.alone.$R" "${P[@]}" ;;
            diagnose) run "$NAME.diagnose.$R" "$MS" profile --json --quiet --diagnose-only --steps "$STEPS" -- "${P[@]}" ;;
            trace) run "$NAME.trace.$R" "$MS" profile --json --quiet --no-record-pass --steps "$STEPS" -- "${P[@]}" ;;
            plan)
                if make_plan "$NAME"; then
                    run "$NAME.plan.$R" "$MS" train --plan "$RAW/$NAME.plan.json" --json --quiet -- "${P[@]}"
                else
                    { echo "no plan: memsplit plan failed (see $NAME.plan.txt)"; cat "$RAW/$NAME.plan.txt" 2>/dev/null; } >"$RAW/$NAME.plan.$R.log"
                    echo "noplan 0" >"$RAW/$NAME.plan.$R.rc"
                fi
                ;;
            split2)
                if make_split "$NAME"; then
                    run "$NAME.split2.$R" "$MS" train --plan "$RAW/$NAME.split2.json" --json --quiet -- "${P[@]}"
                else
                    echo "no split: $(cat "$RAW/$NAME.nosplit")" >"$RAW/$NAME.split2.$R.log"
                    # one GPU: a mode this machine cannot run, not a failure
                    how=nosplit; grep -q "fewer than two GPUs" "$RAW/$NAME.nosplit" && how=skipped
                    echo "$how 0" >"$RAW/$NAME.split2.$R.rc"
                fi
                ;;
            esac
        done
    done
done
echo "bench/programs: the runs took $((SECONDS - START)) s of the ${BUDGET} s budget" >&2

"$PY" - "$RAW" "$OUTDIR/programs.json" "$STEPS" "$MODES" "$ROUNDS" "$WARMUP" "$SPLIT_DEVICES" <<'EOF'
import json, os, re, statistics, sys

raw, out, steps, modes, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), int(sys.argv[5])
warmup = sys.argv[6] == "1"
split_devices = sys.argv[7]
TARGET = {"diagnose": 3.0, "trace": 25.0, "plan": 2.0}
LINE = re.compile(r"^step (\d+) loss (\S+) ms ([0-9]+(?:\.[0-9]*)?)")
lo, hi = 4, steps - 2                       # a profile's last printed step is N-2


def read(name, mode, rnd):
    r = {"mode": mode, "round": rnd, "rc": None, "wall_s": None, "steps": {}, "losses": {}}
    p = os.path.join(raw, "%s.%s.%d" % (name, mode, rnd))
    if os.path.exists(p + ".rc"):
        rc, wall = open(p + ".rc").read().split()
        r["rc"], r["wall_s"] = (int(rc) if rc.lstrip("-").isdigit() else rc), int(wall)
    for ext in (".out", ".log"):
        if os.path.exists(p + ext):
            for line in open(p + ext, errors="replace"):
                m = LINE.match(line)
                if m:   # a step printed twice (a restart) counts its last time
                    r["steps"][int(m.group(1))] = float(m.group(3))
                    r["losses"][int(m.group(1))] = m.group(2)
    if mode == "split2" and os.path.exists(p + ".out"):
        try:        # memsplit train --json: each GPU's peak against its prediction
            r["devices"] = [{k: x.get(k) for k in ("name", "predicted_peak_bytes", "measured_peak_bytes", "gap")}
                            for x in json.load(open(p + ".out")).get("devices", [])]
        except (ValueError, OSError, AttributeError):
            r["devices"] = None
    timed = [ms for s, ms in r["steps"].items() if lo <= s <= hi]
    r["timed_steps"] = len(timed)
    r["median_ms"] = statistics.median(timed) if timed else None
    r["step0_ms"] = r["steps"].get(0)
    r["log"] = p + ".log"
    return r


progs, failed, lines = {}, [], []
for row in open(os.path.join(raw, "list.txt")):
    name, _, cmd = row.rstrip("\n").partition("\t")
    name = name.split()[0]
    if not cmd:
        failed.append("%s: no such program" % name)
        lines.append("%-10s %-8s FAILED: no such program" % (name, "-"))
        continue
    runs = {}
    for m in modes:
        # the round with the lowest median (a run is only ever slowed); else the first
        each = [read(name, m, k) for k in range(1, rounds + 1)]
        timed = [r for r in each if r["median_ms"] is not None]
        runs[m] = min(timed, key=lambda r: r["median_ms"]) if timed else each[0]
        runs[m]["round_medians_ms"] = [r["median_ms"] for r in each]
    base = runs.get("alone")
    for m, r in runs.items():
        r["target_pct"] = TARGET.get(m)
        r["overhead_pct"] = r["first_step_extra_ms"] = r["met"] = None
        if r["rc"] == "skipped":
            lines.append("%-10s %-8s skipped: %s" % (name, m, open(r["log"]).read().strip()))
            continue
        if r["median_ms"] is None:
            why = "no step lines" if not r["steps"] else "no step in %d..%d" % (lo, hi)
            r["error"] = "%s (exit %s; %s)" % (why, r["rc"], r["log"])
            failed.append("%s %s: %s" % (name, m, r["error"]))
            lines.append("%-10s %-8s FAILED: %s" % (name, m, r["error"]))
            continue
        if m == "alone" or base is None or base["median_ms"] is None:
            continue
        r["overhead_pct"] = 100.0 * (r["median_ms"] / base["median_ms"] - 1)
        if r["step0_ms"] is not None and base["step0_ms"] is not None:
            r["first_step_extra_ms"] = r["step0_ms"] - base["step0_ms"]
        if m == "split2":
            devs = "; ".join("%s predicted %.1f MiB, measured %s" % (
                x["name"], (x["predicted_peak_bytes"] or 0) / 2**20, "-" if x["measured_peak_bytes"] is None else
                "%.1f MiB (%+.2f%%)" % (x["measured_peak_bytes"] / 2**20, 100 * (x["gap"] or 0)))
                for x in r.get("devices") or [])
            lines.append("%s split2: over %s %.2f ms a step against %.2f ms alone on one (%+.1f%%); %s" % (
                name, split_devices, r["median_ms"], base["median_ms"], r["overhead_pct"], devs or "no devices"))
        if r["target_pct"] is not None:
            r["met"] = r["overhead_pct"] <= r["target_pct"]
            lines.append("%s %s overhead %+.1f%% (target ≤ %g%%) %s" % (name, m, r["overhead_pct"], r["target_pct"],
                                                                         "MET" if r["met"] else "MISSED"))
            if not r["met"]:
                failed.append("%s %s: missed" % (name, m))
    if base is not None and base["median_ms"] is None:
        for m in runs:
            if m != "alone" and runs[m]["median_ms"] is not None:
                lines.append("%-10s %-8s FAILED: no overhead without the alone run's steps" % (name, m))
    progs[name] = {"command": cmd.split(" "), "runs": runs}

print("programs, median ms of steps %d..%d (the program's own lines; the lowest of %d round%s), step 0, and against "
      "the program alone:" % (lo, hi, rounds, "" if rounds == 1 else "s"))
print("%-10s %-8s %5s %6s %10s %10s %9s %20s %6s  %s" % ("program", "mode", "exit", "wall s", "median ms", "step0 ms",
                                                         "overhead", "step 0 against alone", "steps", "each round's median"))
fmt = lambda v, f: "-" if v is None else f % v
for name, p in progs.items():
    for m, r in p["runs"].items():
        x = r["first_step_extra_ms"]
        first = "-" if x is None else "%+.0f ms (x%.2f)" % (x, r["step0_ms"] / p["runs"]["alone"]["step0_ms"])
        print("%-10s %-8s %5s %6s %10s %10s %9s %20s %6s  %s" % (
            name, m, fmt(r["rc"], "%s"), fmt(r["wall_s"], "%d"), fmt(r["median_ms"], "%.2f"), fmt(r["step0_ms"], "%.2f"),
            fmt(r["overhead_pct"], "%+.1f%%"), first, len(r["steps"]),
            " ".join(fmt(v, "%.2f") for v in r["round_medians_ms"])))
print()
for l in lines:
    print(l)
gpu = open(os.path.join(raw, "gpu.txt")).read().strip() if os.path.exists(os.path.join(raw, "gpu.txt")) else ""
json.dump({"gpu": gpu, "steps": steps, "rounds": rounds, "warmup": warmup, "timed_steps": [lo, hi], "targets_pct": TARGET, "programs": progs, "failed": failed},
          open(out, "w"), indent=1)
print("\nbench/programs: %s; figures in %s" % ("all targets met" if not failed else "%d FAILED or MISSED" % len(failed), out))
sys.exit(1 if failed else 0)
EOF
