#!/usr/bin/env bash
# gpu_x2.sh — the runs that need two real GPUs (NCCL between them), in one
# call on the lent nvidia-h200-x2 machine, from gpu-pack/. Logs to $OUT/x2.log.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
P=${PACK:-gpu-pack}; M=$PWD/$P/memsplit
O=${OUT:-gpu-out}; mkdir -p "$O"
exec > >(tee -a "$O/x2.log") 2>&1
step() { echo; echo "######## $*"; }
step gpus; nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5
step NCCL bandwidth; timeout 60 "$P/nccl_bw"
step split run equals single device, one stage per GPU over NCCL
timeout 150 "$P/tests/gpu_test_pipeline_nccl" 2>&1 | grep -vE "^\[ (RUN|      OK) " | tail -12
step gpt2-small bf16, 8 micro-batches of 2: one GPU vs a 2-stage pipeline on two GPUs
timeout 100 "$M" profile --preset gpt2-small --batch 2,4 --db "$O/g.db" --quiet >/dev/null 2>&1; echo "profile exit $?"
timeout 60 "$M" plan --db "$O/g.db" --gpus 2 --gpu-mem 6GiB --precision bf16 --batch 16 --micro-batch 2 -o "$O/g2.json" 2>&1 | head -3
timeout 100 "$M" train --preset gpt2-small --batch 2 --set train.accum=8 --steps 15 --json --quiet > "$O/single.json"
# three fresh processes: a step must never hang on the first launch of a kernel
for i in 1 2 3; do
    t0=$SECONDS; timeout 60 "$M" train --preset gpt2-small --plan "$O/g2.json" --steps 15 --json --quiet > "$O/pipe$i.json"
    echo "pipeline run $i: exit $? in $((SECONDS - t0)) s"
done
cp "$O/pipe1.json" "$O/pipe.json"
python3 - "$O" <<'PY'
import json, sys
o = sys.argv[1]
s = json.load(open(f"{o}/single.json")); p = json.load(open(f"{o}/pipe.json")); pl = json.load(open(f"{o}/g2.json"))
tok = 16 * 1024; m, P = pl["n_micro"], len(pl["stages"])
ss, ps = tok / s["tokens_per_s"] * 1e3, tok / p["tokens_per_s"] * 1e3
print(f"1 GPU, {m} micro-batches: {ss:.1f} ms/step; {P} GPUs pipeline: {ps:.1f} ms/step; ratio {ps/ss:.3f}")
print(f"bubble (p-1)/(m+p-1) = {(P-1)/(m+P-1):.3f}; ideal ratio (m+p-1)/(m*p) = {(m+P-1)/(m*P):.3f}")
for d in p["devices"]:
    print(f"  {d['name']}: predicted {d['predicted_peak_bytes']}, measured {d['measured_peak_bytes']}, gap {100*d['gap']:.2f}%")
print("losses 1 GPU", [round(x, 4) for x in s["losses"][:5]], "2 GPUs", [round(x, 4) for x in p["losses"][:5]])
PY
step doctor seed17 on two real GPUs, 40 GiB each
timeout 240 "$M" doctor --preset seed17 --gpus 2 --gpu-mem 40GiB --steps 10 --checkpoint-every 0 --db "$O/x2.db" --json > "$O/x2-doctor.json" 2> "$O/x2-doctor.log"; echo "doctor exit $?"
grep -E "^doctor|OUT OF MEMORY in|^plan:|^[0-9] +cuda|gap|^trained" "$O/x2-doctor.log" | head -20
