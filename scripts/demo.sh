#!/usr/bin/env bash
# demo.sh — memsplit's main job on the user's own case: `memsplit doctor` on
# an unchanged PyTorch training script (scripts/demo_program.py: a list of
# (attention, feed-forward) pairs unpacked in the forward, BatchNorm, its own
# loss module), then the report. The script's device is too small for it
# (an emulated 70% of the memory it needs), so its trial runs out of memory;
# the diagnosis says where and why, the plan splits its modules over two
# devices, and the script trains split, each device's measured peak beside
# its prediction. On a GPU the script runs there (two virtual devices of it,
# or two GPUs when there are two) at a size where the tensors, not the CUDA
# context, fill it; with no GPU it runs on the CPU with Debian's torch. The
# script's own output goes to $DB.program.log. Everything is recorded in $DB
# (default demo.db). memsplit's own model has its demo too: make demo-builtin.
set -uo pipefail
M=${1:-build/memsplit}
DB=${DB:-demo.db}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${DEMO_PYTHON:-}
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
if [ "$gpus" -ge 1 ]; then
    PY=${PY:-python3}
    SIZE=(--blocks 24 --dim 2048 --heads 16 --seq 512 --batch 8 --vocab 32000 --steps 3)
    DEVS=(); [ "$gpus" -eq 1 ] && DEVS=(--devices cuda:0,cuda:0)
    where="on the GPU"
else
    PY=${PY:-/usr/bin/python3}
    SIZE=(--steps 3)
    DEVS=()
    where="on the CPU"
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "demo: $PY has no torch (scripts/deps.sh installs python3-torch); make demo-builtin runs memsplit's own model" >&2
    exit 1
fi
rm -rf "$DB" "$DB-wal" "$DB-shm" "$DB.ckpt" "$DB.program.log"
PROG=("$PY" "$HERE/demo_program.py" "${SIZE[@]}" --log "$DB.program.log")
# what the script needs, measured: its uncapped peak; the demo gives it 70% of that
"$M" profile --quiet --json -- "${PROG[@]}" > "$DB.uncapped.json" 2>/dev/null || {
    echo "demo: the script did not run under memsplit (its output: $DB.program.log)" >&2; exit 2; }
cap=$("$PY" -c "import json; d = json.load(open('$DB.uncapped.json')); r = d['reserve_bytes']
print(int(r + 0.7 * (d['peak_bytes'] - r)))")
rm -f "$DB.uncapped.json"
echo "demo: memsplit doctor -- python3 scripts/demo_program.py, $where" >&2
"$M" doctor --gpus 2 "${DEVS[@]}" --gpu-mem "$cap" --db "$DB" -- "${PROG[@]}"
rc=$?
echo "== memsplit report --db $DB --brief" >&2
"$M" report --db "$DB" --brief
exit $rc
