#!/usr/bin/env bash
# demo_builtin.sh — `make demo-builtin`: `memsplit doctor` on memsplit's own model, seed17, then the report.
# Two or more GPUs: the seed17 model on real GPUs with an emulated 40 GiB
# each; one GPU: two virtual 40 GiB devices on it; no GPU: the CPU twin,
# seed17-cpu, on two emulated 20 MiB devices. The trial runs out of memory in
# a block's forward pass (block 17 on the CPU twin, block 18 for seed17 at
# 40 GiB), the diagnosis says why, the plan splits the
# model, and training runs with the plan, each device's measured peak beside
# its prediction. Everything is recorded in $DB (default demo.db). On a GPU
# the demo writes no checkpoints (a seed17 checkpoint is 16 GB).
set -uo pipefail
M=${1:-build/memsplit}
DB=${DB:-demo.db}
STEPS=${STEPS:-20}
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
if [ "$gpus" -ge 2 ]; then
    ARGS=(--preset seed17 --gpu-mem 40GiB --checkpoint-every 0); where="two real GPUs"
elif [ "$gpus" -eq 1 ]; then
    ARGS=(--preset seed17 --device cuda:0 --gpu-mem 40GiB --checkpoint-every 0); where="two virtual 40 GiB devices on the one GPU"
else
    ARGS=(--preset seed17-cpu --device cpu --gpu-mem 20MiB); where="the CPU (no GPU here), two emulated 20 MiB devices"
fi
echo "demo: memsplit doctor on $where" >&2
rm -rf "$DB" "$DB-wal" "$DB-shm" "$DB.ckpt"
"$M" doctor "${ARGS[@]}" --gpus 2 --steps "$STEPS" --db "$DB"
rc=$?
echo "== memsplit report --db $DB" >&2
"$M" report --db "$DB" --brief
exit $rc
