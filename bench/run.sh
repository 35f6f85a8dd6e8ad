#!/usr/bin/env bash
# bench/run.sh — memsplit's training benchmark beside PyTorch, in one call.
#
#   bench/run.sh path/to/memsplit [--quick]
#   bench/run.sh path/to/memsplit --programs   (only bench/programs.sh)
#
# On a machine with a GPU: the matrix rate of the GPU (gemm_rate, the MFU
# ceiling), then each model of BENCH_MODELS (memsplit presets: gpt2-small,
# seed17) trained by memsplit, by PyTorch eager and by torch.compile
# (bench/torch_ref.py builds the same model from `memsplit config`), on the
# same data from the same initial weights; each run also traces a few extra
# steps for the per-kernel-family breakdown. bench/report.py prints the
# table, the breakdown and the issue's targets, and writes every run's raw
# JSON to ${OUT:-bench/out}/bench.json. Also runs the planner benchmark
# (plan_bench beside the memsplit binary) if it was built. Without a GPU only
# the planner benchmark runs. Durations and caps: bench/README.md.
#
# Environment:
#   OUT                 where bench.json and the per-run logs go (bench/out)
#   PYTHON              the Python with torch (python3)
#   BENCH_MODELS        presets, in order ("gpt2-small seed17")
#   BENCH_PRECISIONS    precisions, in order ("bf16 fp32"); runs go precision
#                       by precision, each over the models
#   BENCH_SEED17_PRECISIONS  the precisions seed17 runs in ("bf16")
#   BENCH_IMPLS         which implementations ("memsplit torch-eager torch-compile")
#   BENCH_KERNEL_STEPS  extra steps traced per run for the breakdown (3; 0: none)
#   BENCH_BUDGET_S      seconds for the whole call (560): each run gets at most
#                       what is left, so a hang cannot eat the call
#   BENCH_MS_ARGS       extra arguments for memsplit train (word-split)
#   BENCH_TORCH_ARGS    extra arguments for torch_ref.py (word-split)
#   BENCH_PROGRAMS      1: then bench/programs.sh too (users' PyTorch programs
#                       alone and under memsplit), in what the budget leaves
set -u -o pipefail

usage() { echo "usage: bench/run.sh path/to/memsplit [--quick | --programs]" >&2; exit 2; }
[ $# -ge 1 ] || usage
MS=$1
shift
QUICK=0
PROGRAMS_ONLY=0
for a in "$@"; do
    case $a in
    --quick) QUICK=1 ;;
    --programs) PROGRAMS_ONLY=1 ;;
    *) usage ;;
    esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
TOOLS=$(dirname "$MS")
OUTDIR=${OUT:-bench/out}
RAW=$OUTDIR/raw
PY=${PYTHON:-python3}
BUDGET=${BENCH_BUDGET_S:-560}
MODELS=${BENCH_MODELS:-gpt2-small seed17}
PRECISIONS=${BENCH_PRECISIONS:-bf16 fp32}
SEED17_PRECISIONS=${BENCH_SEED17_PRECISIONS:-bf16}
IMPLS=${BENCH_IMPLS:-memsplit torch-eager torch-compile}
KSTEPS=${BENCH_KERNEL_STEPS:-3}
export PYTHONUNBUFFERED=1
mkdir -p "$RAW" || exit 1
START=$SECONDS

# run_capped CAP NAME CMD...: stdout to $RAW/NAME.json, stderr to $RAW/NAME.log,
# at most CAP seconds and never past the budget. Says how it went on stderr.
run_capped() {
    local cap=$1 name=$2
    shift 2
    local left=$((BUDGET - (SECONDS - START) - 15)) # 15: timeout's grace before KILL
    local limit=$((cap < left ? cap : left))
    if [ "$limit" -lt 15 ]; then
        echo "bench: $name skipped: the ${BUDGET} s budget is spent" >&2
        echo "skipped: budget spent" >"$RAW/$name.log"
        return 124
    fi
    local t0=$SECONDS rc=0
    timeout -k 15 "$limit" "$@" >"$RAW/$name.json" 2>"$RAW/$name.log" || rc=$?
    if [ $rc = 0 ]; then
        echo "bench: $name ok ($((SECONDS - t0)) s, at $((SECONDS - START)) s of ${BUDGET})" >&2
    else
        if [ $rc = 124 ] || [ $rc = 137 ]; then echo "timed out after ${limit} s" >>"$RAW/$name.log"; fi
        echo "bench: $name FAILED (exit $rc, $((SECONDS - t0)) s); last lines of $RAW/$name.log:" >&2
        tail -n 8 "$RAW/$name.log" | sed 's/^/    /' >&2
    fi
    return $rc
}

plan_bench() { # last, in what the budget leaves (+30 s: it takes a second or two)
    local pb="$TOOLS/plan_bench" left=$((BUDGET + 30 - (SECONDS - START)))
    [ -x "$pb" ] || return 0
    [ $left -ge 5 ] || { echo "bench: plan_bench skipped: the budget is spent"; return 0; }
    echo "== planner benchmark ($pb) =="
    local rc=0
    timeout -k 5 $((left < 120 ? left : 120)) "$pb" || rc=$?
    [ $rc = 0 ] || echo "bench: plan_bench exited $rc (1 = its time target missed)"
    return 0
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "bench: no GPU on this machine; the training benchmark needs one"
    plan_bench
    exit 0
fi
[ -x "$MS" ] || { echo "bench: $MS is not an executable (build it with make)" >&2; exit 1; }
[ $PROGRAMS_ONLY = 1 ] && exec bash "$HERE/programs.sh" "$MS"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$RAW/gpu.txt" 2>&1 || true
echo "bench: $(head -n 1 "$RAW/gpu.txt"); models: $MODELS; precisions: $PRECISIONS; raw output in $RAW" >&2
: >"$RAW/manifest.txt"

# Steps and caps (seconds) per model: W warm-up and S timed steps for torch;
# memsplit runs W + S (+ the traced ones) and times all but its first. The
# caps are a run's own limit; the budget above bounds the call.
plan_model() { # MODEL -> W S CAP_MEMSPLIT CAP_EAGER CAP_COMPILE
    case $1 in
    seed17) if [ $QUICK = 1 ]; then echo 2 4 150 150 300; else echo 2 8 200 200 360; fi ;;
    *) if [ $QUICK = 1 ]; then echo 2 6 120 150 240; else echo 5 20 240 240 360; fi ;;
    esac
}

# The GPU's matrix rate for the precisions asked (the MFU ceiling).
if [ -x "$TOOLS/gemm_rate" ]; then
    run_capped 90 gemm_rate "$TOOLS/gemm_rate" --types "${PRECISIONS// /,}"
else
    echo "bench: no $TOOLS/gemm_rate: no MFU column (make gpu-pack builds it)" >&2
fi

# The same data for every run: English-like text, bytes as tokens (memsplit's
# text format), ~1 MiB, deterministic. It lives outside $OUT (not worth copying).
SCRATCH=$(mktemp -d) || exit 1
trap 'rm -rf "$SCRATCH"' EXIT
DATA=$SCRATCH/bench_data.txt
"$PY" - "$DATA" <<'EOF' || { echo "bench: cannot write the data file" >&2; exit 1; }
import random, sys
rng = random.Random(1337)
nouns = "cat dog bird fox horse girl boy child farmer teacher river tree house garden apple owl".split()
adjs = "small big old young red green quiet happy clever angry".split()
verbs = "sees likes finds chases watches helps follows carries paints remembers".split()
out, n = [], 0
while n < (1 << 20):
    s = f"the {rng.choice(adjs)} {rng.choice(nouns)} {rng.choice(verbs)} a {rng.choice(nouns)}. "
    out.append(s[0].upper() + s[1:])
    n += len(s)
open(sys.argv[1], "w").write("".join(out))
EOF

# torch_ref.py's model flags from memsplit's own configuration of the preset,
# so both build the same model (refused where torch_ref cannot follow).
torch_shape() { # MODEL -> flags, or exit 1
    "$MS" config --preset "$1" | "$PY" -c '
import configparser, sys
c = configparser.ConfigParser()
c.read_string("[top]\n" + sys.stdin.read())
m, t = c["model"], c["train"]
if (m["mlp_ratio"], m["norm"], m["tied"], t["accum"]) != ("4", "layernorm", "0", "1"):
    sys.exit("torch_ref.py builds untied layernorm GPTs with mlp_ratio 4 and no accumulation")
flags = [("n-layer", m["n_layer"]), ("d-model", m["d_model"]), ("n-head", m["n_head"]),
         ("seq-len", m["seq_len"]), ("vocab", m["vocab"]), ("batch", t["batch"]), ("lr", t["lr"])]
print(" ".join("--" + k + " " + v for k, v in flags))'
}

for P in $PRECISIONS; do
    for M in $MODELS; do
        if [ "$M" = seed17 ] && [[ " $SEED17_PRECISIONS " != *" $P "* ]]; then continue; fi
        read -r W S CAP_MS CAP_EAGER CAP_COMPILE <<<"$(plan_model "$M")"
        SHAPE=$(torch_shape "$M") || { echo "bench: no torch shape for $M; its torch runs are skipped" >&2; SHAPE=; }
        for IMPL in $IMPLS; do
            NAME=$IMPL-$M-$P
            echo "$NAME $IMPL $M $P $W $S $KSTEPS" >>"$RAW/manifest.txt"
            KT=()
            if [ "$IMPL" = memsplit ]; then
                [ "$KSTEPS" -gt 0 ] && KT=(--kernel-times "$RAW/$NAME.kernels.json" --kernel-steps "$KSTEPS")
                # --gpu-mem 0: the whole device (seed17's preset emulates a 40 GiB one)
                # shellcheck disable=SC2086  # the extra arguments are meant to split
                run_capped "$CAP_MS" "$NAME" "$MS" train --preset "$M" --precision "$P" --gpu-mem 0 \
                    --steps $((W + S + (KSTEPS > 0 ? KSTEPS : 0))) --data "$DATA" --json --quiet ${KT[@]+"${KT[@]}"} \
                    ${BENCH_MS_ARGS:-}
                continue
            fi
            [ -n "$SHAPE" ] || continue
            MODE=${IMPL#torch-}
            CAP=$CAP_EAGER
            [ "$MODE" = compile ] && CAP=$CAP_COMPILE
            [ "$KSTEPS" -gt 0 ] && KT=(--kernel-times "$RAW/$NAME.events.json" --kernel-steps "$KSTEPS")
            # shellcheck disable=SC2086
            run_capped "$CAP" "$NAME" "$PY" "$HERE/torch_ref.py" --mode "$MODE" --precision "$P" \
                --steps "$S" --warmup "$W" $SHAPE --data "$DATA" --init memsplit ${KT[@]+"${KT[@]}"} ${BENCH_TORCH_ARGS:-}
            if [ -s "$RAW/$NAME.events.json" ] && [ -x "$TOOLS/kernel_times" ]; then
                "$TOOLS/kernel_times" "$RAW/$NAME.events.json" >"$RAW/$NAME.kernels.json" 2>>"$RAW/$NAME.log" ||
                    echo "bench: kernel_times could not sum $RAW/$NAME.events.json" >&2
            fi
        done
    done
done
echo "bench: the runs took $((SECONDS - START)) s of the ${BUDGET} s budget" >&2

"$PY" "$HERE/report.py" "$RAW" "$OUTDIR/bench.json"
TABLE_RC=$?
if [ "${BENCH_PROGRAMS:-0}" = 1 ]; then
    echo
    BENCH_BUDGET_S=$((BUDGET - (SECONDS - START))) bash "$HERE/programs.sh" "$MS" || TABLE_RC=1
fi
echo
plan_bench
exit $TABLE_RC
