#!/usr/bin/env bash
# gpu_check.sh — everything that needs the GPU, in one call on the lent
# machine (built here with `make gpu-pack`, carried as gpu-pack/):
# GPU tests, GPU-vs-CPU tracking, gpt2-small training, the seed17 demo
# (profile with CUPTI + plan + report), profiler overhead, compute-sanitizer,
# and the bf16 benchmark. Logs go to $OUT (or gpu-out/).
set -u
P=${PACK:-gpu-pack}; M=$PWD/$P/memsplit
O=${OUT:-gpu-out}; mkdir -p "$O"
export MEMSPLIT=$M
step() { echo; echo "######## $*"; }
step gpu; nvidia-smi -L; nvidia-smi --query-gpu=memory.total,memory.used,clocks.sm --format=csv
step test-gpu
timeout 240 make -s test-gpu-run PACK="$P" 2>&1 | tee "$O/test-gpu.log" | tail -40
timeout 120 tests/gpu/track_cpu.sh 2>&1 | tee "$O/track.log"
step gpt2-small bf16 training
timeout 120 "$M" train --preset gpt2-small --steps 30 --json > "$O/train-gpt2.json" 2> "$O/train-gpt2.log"; echo "exit $?"
tail -4 "$O/train-gpt2.log"; python3 -c "import json; d=json.load(open('$O/train-gpt2.json')); print({k: d[k] for k in ('loss_first','loss_last','tokens_per_s','peak_bytes','peak_by_category')})"
step seed17 demo
DB="$O/demo.db" timeout 240 scripts/demo.sh "$M" > "$O/demo.log" 2>&1; echo "exit $?"; head -c 9000 "$O/demo.log"
step profiler overhead gpt2-small bf16
timeout 100 "$M" profile --preset gpt2-small --steps 12 --json --quiet > "$O/prof-gpt2.json" 2> "$O/prof-gpt2.log"; echo "exit $?"
timeout 100 "$M" profile --preset gpt2-small --steps 12 --json --quiet --no-cupti > "$O/prof-gpt2-nocupti.json" 2>/dev/null
timeout 100 "$M" train --preset gpt2-small --steps 12 --json --quiet > "$O/train-gpt2-12.json"
python3 - "$O" <<'PY'
import json, sys
o = sys.argv[1]
p = json.load(open(f"{o}/prof-gpt2.json")); q = json.load(open(f"{o}/prof-gpt2-nocupti.json")); t = json.load(open(f"{o}/train-gpt2-12.json"))
off = 16 * 1024 / t["tokens_per_s"] * 1000
print(f"step ms: train {off:.2f}, profile+cupti {p['trial_step_ms']:.2f} ({(p['trial_step_ms']/off-1)*100:+.1f}%), profile no cupti {q['trial_step_ms']:.2f}; ledgers {p['ledgers']}")
PY
step compute-sanitizer
timeout 200 compute-sanitizer --tool memcheck --leak-check no "$P/tests/gpu_test_kernels_gpu" > "$O/memcheck-kernels.log" 2>&1; echo "kernels exit $?"; tail -3 "$O/memcheck-kernels.log"
timeout 100 compute-sanitizer --tool memcheck "$M" train --preset tiny --device cuda:0 --steps 3 --quiet > "$O/memcheck-train.log" 2>&1; echo "train exit $?"; tail -3 "$O/memcheck-train.log"
step bench bf16
BENCH_PRECISIONS=bf16 BENCH_BUDGET_S=${BENCH_S:-200} OUT="$O" timeout 230 bench/run.sh "$M" --quick 2>&1 | tail -25
