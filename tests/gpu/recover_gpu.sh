#!/usr/bin/env bash
# recover_gpu.sh — OOM recovery on the GPU with virtual devices: doctor on
# a small model over two virtual devices of cuda:0; at step 4 device 0
# shrinks (--inject-oom, to its reserve and 90% of what its tensors took)
# so the step runs out of memory; memsplit must
# re-plan, resume from the step-2 checkpoint and finish, and its losses must
# track an uninterrupted single-device run of the same micro-batching
# (within 1e-4 relative: GPU float atomics make runs differ in the last bits).
set -u
M=${MEMSPLIT:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0; fail=0
shape=(--preset tiny --precision fp32 --set model.n_layer=8 --set model.d_model=64 --set model.n_head=2
       --set model.seq_len=64 --steps 6)
# the trial's capacity: the single-device peak at full batch less 15% of what
# the model takes (the reserve, the CUDA context first, stays whole), so the
# trial runs out and the doctor splits; no headroom, since every virtual
# device carries a whole context's reserve and 5% of that is more than the
# model
"$M" train "${shape[@]}" --device cuda:0 --steps 1 --json --quiet > "$T/one.json" || { echo "FAIL baseline"; exit 1; }
read -r cap < <(python3 -c "
import json; d = json.load(open('$T/one.json'))['devices'][0]
r = d['peak_by_category']['reserve']; print(r + (d['peak_bytes'] - r) * 85 // 100)")
"$M" doctor "${shape[@]}" --device cuda:0 --gpus 2 --gpu-mem "$cap" --headroom 0 --checkpoint-every 2 \
    --inject-oom 4:0:90% --db "$T/r.db" --json > "$T/rec.json" 2> "$T/rec.log"
rc=$?
if [ $rc -eq 0 ] && grep -q "OUT OF MEMORY at step 4" "$T/rec.log"; then echo "ok   recovered after an OOM at step 4"; pass=$((pass+1));
else echo "FAIL doctor recovery (exit $rc)"; tail -5 "$T/rec.log"; fail=$((fail+1)); fi
mb=$(python3 -c "import json; d=json.load(open('$T/rec.json')); print(d['plan']['micro_batch'], d['plan']['n_micro'])" 2>/dev/null)
if [ -n "$mb" ]; then
    set -- $mb
    "$M" train "${shape[@]}" --device cuda:0 --batch "$1" --set train.accum="$2" --json --quiet > "$T/ref.json"
    if python3 - "$T/rec.json" "$T/ref.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["train"]; u = json.load(open(sys.argv[2]))
a, b = r["losses"], u["losses"]
print("  recovered", [round(x, 6) for x in a]); print("  reference", [round(x, 6) for x in b])
sys.exit(0 if r["recoveries"] == 1 and len(a) == len(b) and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(a, b)) else 1)
PY
    then echo "ok   recovered losses track the uninterrupted run"; pass=$((pass+1)); else echo "FAIL recovered losses"; fail=$((fail+1)); fi
fi
echo "recover: $pass passed, $fail failed"
[ $fail -eq 0 ]
