#!/usr/bin/env bash
# demo.sh — memsplit's main job, end to end, on what this machine has:
# on a GPU the seed17 model on an emulated 40 GiB GPU, else its CPU twin on
# an emulated 21 MiB device. Trial + diagnosis (profile), then a plan over
# two devices of that capacity, then the report from the run database.
set -uo pipefail
M=${1:-build/memsplit}
DB=${DB:-demo.db}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    PRESET=seed17; DEV=cuda:0; MEM=40GiB; BATCH=15,8
else
    PRESET=seed17-cpu; DEV=cpu; MEM=21MiB; BATCH=4,2
    echo "demo: no GPU here: running the CPU twin of seed17 on an emulated $MEM device" >&2
fi
rm -f "$DB" "$DB-wal" "$DB-shm"
echo "== memsplit profile --preset $PRESET --device $DEV --gpu-mem $MEM" >&2
"$M" profile --preset "$PRESET" --device "$DEV" --gpu-mem "$MEM" --precision all --batch "$BATCH" --db "$DB"
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then echo "demo: profile failed ($rc)" >&2; exit $rc; fi
echo "== memsplit plan --db $DB --gpus 2 --gpu-mem $MEM" >&2
"$M" plan --db "$DB" --gpus 2 --gpu-mem "$MEM" -o demo-plan.json
prc=$?
if [ $prc -ne 0 ] && [ $prc -ne 3 ]; then echo "demo: plan failed ($prc)" >&2; exit $prc; fi
echo "== memsplit report --db $DB" >&2
"$M" report --db "$DB"
