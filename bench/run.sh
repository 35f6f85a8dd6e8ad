#!/usr/bin/env bash
# bench/run.sh — memsplit's training benchmark beside PyTorch, in one call.
#
#   bench/run.sh path/to/memsplit [--quick]
#
# On a machine with a GPU: gpt2-small (12 layers, d 768, T 1024, vocab 50304,
# batch 16) trained by memsplit, by PyTorch eager and by torch.compile
# (bench/torch_ref.py, the same model), in bf16 then fp32, on the same data
# (a generated text file, bytes as tokens) from the same initial weights.
# Prints a table and writes every run's raw JSON to ${OUT:-bench/out}/bench.json.
# Also runs the planner benchmark (plan_bench beside the memsplit binary) if
# it was built. Without a GPU only the planner benchmark runs.
#
# Environment:
#   OUT               where bench.json and the per-run logs go (bench/out)
#   PYTHON            the Python with torch (python3)
#   BENCH_BUDGET_S    seconds for the whole call (560): each run gets at most
#                     what is left, so a hang cannot eat the call
#   BENCH_MS_ARGS     extra arguments for memsplit train (word-split)
#   BENCH_TORCH_ARGS  extra arguments for torch_ref.py (word-split)
#   BENCH_PRECISIONS  which precisions, in order ("bf16 fp32")
set -u -o pipefail

usage() { echo "usage: bench/run.sh path/to/memsplit [--quick]" >&2; exit 2; }
[ $# -ge 1 ] || usage
MS=$1
shift
QUICK=0
for a in "$@"; do
    case $a in
    --quick) QUICK=1 ;;
    *) usage ;;
    esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${OUT:-bench/out}
RAW=$OUTDIR/raw
PY=${PYTHON:-python3}
BUDGET=${BENCH_BUDGET_S:-560}
PRECISIONS=${BENCH_PRECISIONS:-bf16 fp32}
export PYTHONUNBUFFERED=1
mkdir -p "$RAW" || exit 1
if [ $QUICK = 1 ]; then STEPS=6 WARMUP=2; else STEPS=20 WARMUP=5; fi
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
        echo "bench: $name ok ($((SECONDS - t0)) s)" >&2
    else
        if [ $rc = 124 ] || [ $rc = 137 ]; then echo "timed out after ${limit} s" >>"$RAW/$name.log"; fi
        echo "bench: $name FAILED (exit $rc, $((SECONDS - t0)) s); last lines of $RAW/$name.log:" >&2
        tail -n 8 "$RAW/$name.log" | sed 's/^/    /' >&2
    fi
    return $rc
}

plan_bench() {
    local pb
    pb="$(dirname "$MS")/plan_bench"
    [ -x "$pb" ] || return 0
    echo "== planner benchmark ($pb) =="
    local rc=0
    timeout -k 10 120 "$pb" || rc=$?
    [ $rc = 0 ] || echo "bench: plan_bench exited $rc (1 = its time target missed)"
    return 0
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "bench: no GPU on this machine; the training benchmark needs one"
    plan_bench
    exit 0
fi
[ -x "$MS" ] || { echo "bench: $MS is not an executable (build it with make)" >&2; exit 1; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$RAW/gpu.txt" 2>&1 || true
echo "bench: $(head -n 1 "$RAW/gpu.txt"); $STEPS timed steps per run; raw output in $RAW" >&2

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

# memsplit times every step but its first (which allocates everything); it
# runs as many steps as torch's warm-up + timed ones, so the loss columns
# compare the same steps.
for P in $PRECISIONS; do
    # shellcheck disable=SC2086  # the extra arguments are meant to split
    run_capped 240 "memsplit-$P" "$MS" train --preset gpt2-small --precision "$P" \
        --steps $((WARMUP + STEPS)) --data "$DATA" --json --quiet ${BENCH_MS_ARGS:-}
    for MODE in eager compile; do
        CAP=240
        [ $MODE = compile ] && CAP=360 # compiling takes a minute or two
        # shellcheck disable=SC2086
        run_capped $CAP "torch-$MODE-$P" \
            "$PY" "$HERE/torch_ref.py" --mode $MODE --precision "$P" --steps $STEPS --warmup $WARMUP \
            --n-layer 12 --d-model 768 --n-head 12 --seq-len 1024 --vocab 50304 --batch 16 \
            --data "$DATA" --init memsplit --init-cache "$SCRATCH/init.pt" ${BENCH_TORCH_ARGS:-}
    done
done

# The table and bench.json (the raw objects, keyed by run name).
"$PY" - "$RAW" "$OUTDIR/bench.json" "$PRECISIONS" <<'EOF'
import json, os, sys
raw, dest, precisions = sys.argv[1], sys.argv[2], sys.argv[3].split()
GiB = float(1 << 30)

def load(name):
    try:
        with open(os.path.join(raw, name + ".json")) as f:
            text = f.read().strip()
    except OSError:
        return None
    for candidate in (text, text.splitlines()[-1] if text else ""):
        try:  # memsplit pretty-prints; torch_ref prints one line (after any stray output)
            return json.loads(candidate)
        except ValueError:
            pass
    return None

runs, rows = {}, []
# memsplit's JSON has no shape: take tokens per step from a torch run's.
tokens_per_step, shape = 16 * 1024, "gpt2-small, batch 16, T 1024"
for p in precisions:
    for impl in ("torch-eager", "torch-compile"):
        shp = (load(f"{impl}-{p}") or {}).get("shape")
        if shp:
            tokens_per_step = shp["batch"] * shp["seq_len"]
            shape = (f"{shp['n_layer']} layers, d {shp['d_model']}, vocab {shp['vocab']}, "
                     f"batch {shp['batch']}, T {shp['seq_len']}")
for p in precisions:
    for impl in ("memsplit", "torch-eager", "torch-compile"):
        name = f"{impl}-{p}"
        j = load(name)
        runs[name] = j
        row = {"name": name, "impl": impl, "precision": p, "ok": False}
        if j is not None and (impl != "memsplit" or j.get("ok")):
            row["ok"] = True
            row["tps"] = j.get("tokens_per_s") or 0.0
            row["loss"] = (j.get("loss_first"), j.get("loss_last"))
            if impl == "memsplit":
                d = (j.get("devices") or [{}])[0]
                peak = d.get("peak_bytes") or 0
                reserve = (d.get("peak_by_category") or {}).get("reserve", 0)
                row["mem_dev"], row["mem"] = peak, peak - reserve
                row["ms"] = tokens_per_step / row["tps"] * 1e3 if row["tps"] else None
            else:
                row["mem_dev"], row["mem"] = j.get("device_used_bytes"), j.get("peak_reserved_bytes")
                row["alloc"] = j.get("peak_allocated_bytes")
                row["ms"] = j.get("step_ms")
        elif j is not None and impl == "memsplit":
            row["error"] = j.get("error") or "failed"
        else:
            try:  # the log's last line says why (a timeout, a skip, an error)
                with open(os.path.join(raw, name + ".log")) as f:
                    row["error"] = ([l.strip() for l in f if l.strip()] or ["no output"])[-1]
            except OSError:
                row["error"] = "no result"
        rows.append(row)

def gib(b):
    return f"{b / GiB:8.2f}" if isinstance(b, (int, float)) and b else "       -"

print()
print(f"memsplit vs PyTorch: {shape}; same data and initial weights")
print("  pool GiB: memsplit's peak WITHOUT its 'reserve' category (CUDA context, cuBLASLt")
print("            workspace) vs torch.cuda.max_memory_reserved (the caching allocator's pool)")
print("  dev GiB:  the whole device's use: memsplit's peak WITH reserve vs torch's total - free")
print("            (context, kernels, library handles and pool); ratios are vs torch eager")
hdr = (f"{'impl':<14} {'prec':<5} {'tokens/s':>10} {'step ms':>8} {'pool GiB':>8} {'dev GiB':>8} "
       f"{'alloc GiB':>9} {'tok/s x':>7} {'pool x':>6}  loss first -> last")
print(hdr)
print("-" * len(hdr))
for p in precisions:
    base = next((r for r in rows if r["precision"] == p and r["impl"] == "torch-eager" and r["ok"]), None)
    for r in (r for r in rows if r["precision"] == p):
        if not r["ok"]:
            print(f"{r['impl']:<14} {p:<5} FAILED: {r.get('error', 'no result')[:90]}")
            continue
        tx = f"{r['tps'] / base['tps']:7.2f}" if base and base["tps"] else "      -"
        mx = f"{r['mem'] / base['mem']:6.2f}" if base and base.get("mem") and r.get("mem") else "     -"
        lf, ll = r["loss"]
        loss = f"{lf:.4f} -> {ll:.4f}" if lf is not None and ll is not None else "-"
        ms = f"{r['ms']:8.1f}" if r.get("ms") else "       -"
        print(f"{r['impl']:<14} {p:<5} {r['tps']:10.0f} {ms} {gib(r['mem'])} {gib(r['mem_dev'])} "
              f"{gib(r.get('alloc')):>9} {tx} {mx}  {loss}")

# The issue's targets (bf16): tokens/s >= torch eager's; peak <= torch.compile's.
by = {r["name"]: r for r in rows}
m, e, c = by.get("memsplit-bf16"), by.get("torch-eager-bf16"), by.get("torch-compile-bf16")
print()
if m and m["ok"] and e and e["ok"]:
    ok = m["tps"] >= e["tps"]
    print(f"target bf16 speed:  memsplit {m['tps']:.0f} tok/s vs torch eager {e['tps']:.0f}: "
          f"{'met' if ok else 'MISSED'} ({m['tps'] / e['tps']:.2f}x)")
if m and m["ok"] and c and c["ok"] and c.get("mem"):
    ok = m["mem"] <= c["mem"]
    print(f"target bf16 memory: memsplit {m['mem'] / GiB:.2f} GiB (without reserve) vs torch.compile "
          f"{c['mem'] / GiB:.2f} GiB reserved: {'met' if ok else 'MISSED'} ({m['mem'] / c['mem']:.2f}x)")
try:
    gpu = open(os.path.join(raw, "gpu.txt")).read().strip()
except OSError:
    gpu = None
with open(dest, "w") as f:
    json.dump({"gpu": gpu, "runs": runs}, f, indent=1)
print(f"raw results: {dest}")
failed = [r["name"] for r in rows if not r["ok"]]
if failed:
    print(f"bench: no result from {', '.join(failed)} (logs in {raw})")
sys.exit(1 if failed else 0)
EOF
TABLE_RC=$?
echo
plan_bench
exit $TABLE_RC
