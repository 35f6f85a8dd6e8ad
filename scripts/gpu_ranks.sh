#!/usr/bin/env bash
# gpu_ranks.sh — the MPI-rank runs that need real GPUs (issue 14), in one
# call on a lent multi-GPU machine, from gpu-pack/ (make gpu-pack carries
# memsplit-rank). Written and checked on the CPU only: none of it has run on
# a GPU yet. Logs to $OUT/ranks.log. Needs mpirun there (OpenMPI).
#   1. mpirun and the GPUs; nccl_bw: send/recv, the all-reduce bus bandwidth
#      and NCCL's own device memory (the planner's --bus-gbps, --comm-reserve)
#   2. tiny model, fp32: mpirun -np 2 (2x1, 1x2 ZeRO-1) and -np 4 (2x2 ZeRO-1,
#      4 GPUs) against one GPU with the same micro-batches (1e-4 relative)
#   3. a checkpoint of 2x2 ranks resumed by one GPU
#   4. refused: two ranks on one GPU
#   5. memsplit doctor --launch on seed17 over the GPUs with replicas open,
#      rank 1 killed in step 4: re-planned without its GPU, resumed
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
P=${PACK:-gpu-pack}; M=$PWD/$P/memsplit
O=${OUT:-gpu-out}; mkdir -p "$O"
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root}
exec > >(tee -a "$O/ranks.log") 2>&1
step() { echo; echo "######## $*"; }
N=$(nvidia-smi -L | wc -l)
step "mpirun and $N GPUs"; $MPIRUN --version | head -1; nvidia-smi -L
step NCCL bandwidth and memory; timeout 60 "$P/nccl_bw"
TINY="--model tiny --layers 4 --seq 32 --d-model 32 --heads 4 --vocab 256"
plan() { python3 tests/mpi/make_plan.py "$O/$1.json" $TINY "${@:2}"; }
plan p2x1 --stages 2 --replicas 1 --micro-batch 2 --n-micro 4
plan p1x2 --stages 1 --replicas 2 --micro-batch 2 --n-micro 4 --zero
plan p2x2 --stages 2 --replicas 2 --micro-batch 2 --n-micro 4 --zero
timeout 60 "$M" train --preset tiny --device cuda:0 --batch 2 --set train.accum=4 --steps 6 --json --quiet >"$O/one.json"
same() {
    python3 - "$O/one.json" "$1" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["losses"]; b = json.load(open(sys.argv[2]))["losses"]
ok = len(a) == len(b) and all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(a, b))
print("  one GPU", [round(x, 5) for x in a]); print("  ranks  ", [round(x, 5) for x in b]); print("  EQUAL" if ok else "  DIFFERENT")
PY
}
for lay in 2x1:2 1x2:2 2x2:4; do
    n=${lay#*:}; l=${lay%:*}
    [ "$N" -ge "$n" ] || { echo "skip $l: needs $n GPUs"; continue; }
    step "mpirun -np $n memsplit train --plan ($l) against one GPU"
    t0=$SECONDS; timeout 120 $MPIRUN -np $n "$M" train --preset tiny --plan "$O/p$l.json" --steps 6 --json \
        --checkpoint-dir "$O/ck$l" --checkpoint-every 3 >"$O/r$l.json" 2>"$O/r$l.err"
    echo "exit $? in $((SECONDS - t0)) s"; tail -4 "$O/r$l.err"; same "$O/r$l.json"
done
step "a checkpoint of the 2x2 ranks (step 3) resumed on one GPU"
if [ -d "$O/ck2x2" ]; then
    rm -rf "$O/ck2x2/step-00000006.ckpt"
    timeout 60 "$M" train --preset tiny --device cuda:0 --batch 2 --set train.accum=4 --steps 6 --checkpoint-dir "$O/ck2x2" \
        --resume --json --quiet >"$O/resumed.json"; echo "exit $?"
    python3 -c "import json; a=json.load(open('$O/one.json'))['losses'][3:]; b=json.load(open('$O/resumed.json'))['losses']; print('  steps 4-6', a, b)"
fi
step "refused: two ranks on one GPU"
timeout 60 $MPIRUN -np 2 "$M" train --preset tiny --plan "$O/p2x1.json" --device cuda:0 --steps 1; echo "exit $? (want 1)"
step "doctor --launch: seed17 over $N GPUs of 40 GiB, replicas open, rank 1 killed in step 4"
timeout 500 "$M" doctor --preset seed17 --gpus "$N" --gpu-mem 40GiB --steps 8 --checkpoint-every 2 --replicas any \
    --launch "$MPIRUN" --inject-kill 4:1 --db "$O/ranks.db" --json >"$O/doctor.json" 2>"$O/doctor.log"; echo "doctor exit $?"
grep -E "^doctor|died|resumed|^plan:|^replicas:|gap|^trained" "$O/doctor.log" | head -30
sqlite3 "$O/ranks.db" "select count(*), count(distinct step) from steps where run_id = (select max(id) from runs where kind = 'train'); select step, resumed_step, reason from recovery_events" 2>/dev/null
