#!/usr/bin/env bash
# gpu_check.sh — everything that needs the GPU, in one call on the lent
# machine (built here with `make gpu-pack`, carried as gpu-pack/). Sections
# (SECTIONS, default all): tests track demo pipebench overhead memcheck bench.
# Everything is logged to $OUT/gpu.log (or gpu-out/gpu.log).
set -u
P=${PACK:-gpu-pack}; M=$PWD/$P/memsplit
O=${OUT:-gpu-out}; mkdir -p "$O"
export MEMSPLIT=$M
SECTIONS=${SECTIONS:-tests track demo pipebench overhead memcheck bench}
on() { case " $SECTIONS " in *" $1 "*) return 0;; esac; return 1; }
exec > >(tee -a "$O/gpu.log") 2>&1
step() { echo; echo "######## $*"; }
step gpu; nvidia-smi -L; nvidia-smi --query-gpu=memory.total,memory.used,clocks.sm --format=csv
if on tests; then
    step test-gpu; timeout 300 make -s test-gpu-run PACK="$P" 2>&1 | grep -vE "^\[ (RUN|      OK) " | tail -60
fi
if on track; then step gpu tracks cpu; timeout 120 tests/gpu/track_cpu.sh; fi
if on demo; then
    step demo: doctor on seed17, two virtual 40 GiB devices
    DB="$O/demo.db" STEPS=12 timeout 300 scripts/demo_builtin.sh "$M" > "$O/demo.log" 2>&1; echo "demo exit $?"
    grep -E "^doctor|OUT OF MEMORY in|^plan:|^[0-9] +cuda|predicted|gap|^trained|^ledgers|CUPTI" "$O/demo.log" | head -40
fi
if on pipebench; then
    step gpt2-small bf16: one device vs a 2-stage pipeline on two virtual devices of the GPU
    timeout 120 "$M" profile --preset gpt2-small --batch 16,8 --db "$O/g.db" --quiet > /dev/null 2>&1; echo "profile exit $?"
    timeout 60 "$M" plan --db "$O/g.db" --gpus 2 --gpu-mem 6GiB --precision bf16 --batch 16 -o "$O/g2.json" 2>&1 | head -4
    mb=$(python3 -c "import json; d=json.load(open('$O/g2.json')); print(d['micro_batch'], d['n_micro'], d['predicted_step_ms'])")
    echo "plan: micro-batch, count, predicted ms: $mb"
    set -- $mb
    timeout 120 "$M" train --preset gpt2-small --batch "$1" --set train.accum="$2" --steps 15 --json --quiet > "$O/single.json"
    timeout 120 "$M" train --preset gpt2-small --plan "$O/g2.json" --device cuda:0 --steps 15 --json --quiet > "$O/pipe.json"
    python3 - "$O" "$1" "$2" <<'PY'
import json, sys
o, mb, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = json.load(open(f"{o}/single.json")); p = json.load(open(f"{o}/pipe.json"))
tok = 16 * 1024
ss, ps = tok / s["tokens_per_s"] * 1e3, tok / p["tokens_per_s"] * 1e3
print(f"single device, {m} micro-batches of {mb}: {ss:.1f} ms/step; 2 stages on 2 virtual devices: {ps:.1f} ms/step; ratio {ps/ss:.3f}")
print(f"bubble ratio (m+p-1)/m for one GPU's worth of work: {(m+1)/m:.3f}; two real GPUs would ideally give {(m+1)/m/2:.3f}")
for d in p["devices"]:
    print(f"  {d['name']}: capacity {d['capacity_bytes']}, predicted {d['predicted_peak_bytes']}, measured {d['measured_peak_bytes']}, gap {100*d['gap']:.2f}%")
print("losses single", [round(x, 4) for x in s["losses"][:5]], "pipe", [round(x, 4) for x in p["losses"][:5]])
PY
fi
if on overhead; then
    step profiler overhead gpt2-small bf16
    timeout 100 "$M" profile --preset gpt2-small --steps 12 --json --quiet > "$O/prof.json" 2>/dev/null
    timeout 100 "$M" train --preset gpt2-small --steps 12 --json --quiet > "$O/train12.json"
    python3 -c "
import json; p=json.load(open('$O/prof.json')); t=json.load(open('$O/train12.json')); off=16*1024/t['tokens_per_s']*1e3
print(f'step ms: train {off:.2f}, profile with CUPTI {p[\"trial_step_ms\"]:.2f} ({(p[\"trial_step_ms\"]/off-1)*100:+.1f}%); ledgers agree: {p[\"ledgers\"].get(\"agree\")}')"
fi
if on memcheck; then
    step compute-sanitizer memcheck
    timeout 150 compute-sanitizer --tool memcheck "$P/tests/gpu_test_pipeline_gpu" 2>&1 | tail -4
    timeout 100 compute-sanitizer --tool memcheck "$M" train --preset tiny --device cuda:0 --steps 3 --quiet 2>&1 | tail -2
fi
if on bench; then
    step bench bf16
    BENCH_PRECISIONS=bf16 BENCH_BUDGET_S=${BENCH_S:-200} OUT="$O" timeout 230 bench/run.sh "$M" --quick 2>&1 | tail -22
fi
