#!/usr/bin/env bash
# make_corpus.sh — remake the seeds of tests/fuzz/corpus/ that memsplit
# itself writes (profile and plan JSON, checkpoints, run databases, a
# recorded config), from a built memsplit. The hand-written seeds (short
# INI files, --set lists, sizes) and the regression inputs are left alone.
# Usage: tests/fuzz/make_corpus.sh [build/memsplit]
set -euo pipefail
M=$(realpath "${1:-build/memsplit}")
C=$(cd "$(dirname "$0")" && pwd)/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# A model small enough that every seed stays a few KiB (a checkpoint of the
# tiny preset is 2 MiB, which would slow every execution).
S=(--preset tiny --set model.n_layer=1 --set model.d_model=8 --set model.n_head=1
   --set model.vocab=128 --set model.seq_len=4 --set model.mlp_ratio=1 --batch 1)
"$M" profile --preset tiny --json > "$C/profile_json/tiny-fits.json" 2>/dev/null
# exit 3: it runs out of memory, so the profile holds an OOM and isolated rows
"$M" profile "${S[@]}" --gpu-mem 40KiB --db r.db --json > "$C/profile_json/tiny-oom-isolated.json" 2>/dev/null || [ $? = 3 ]
"$M" plan --db r.db --gpus 2 --gpu-mem 64KiB -o "$C/plan_json/tiny-2-stages.json" > /dev/null
"$M" plan --profile "$C/profile_json/tiny-fits.json" --gpus 3 --gpu-mem 700KiB -o "$C/plan_json/tiny-3-stages.json" > /dev/null
"$M" train "${S[@]}" --steps 3 --db r.db > /dev/null 2>&1
"$M" train "${S[@]}" --steps 2 --checkpoint-dir ck > /dev/null 2>&1
"$M" train "${S[@]}" --set model.norm=batchnorm --set train.precision=fp16 --steps 1 --checkpoint-dir ckbn > /dev/null 2>&1
for d in ckpt ckpt_crc; do
    cp ck/step-00000002.ckpt "$C/$d/tiny-1layer-fp32.ckpt"
    cp ckbn/step-00000001.ckpt "$C/$d/tiny-1layer-batchnorm-fp16.ckpt"
done
S[3]=model.n_layer=2   # two blocks: the plan splits them over the two devices
"$M" doctor "${S[@]}" --gpus 2 --gpu-mem 60KiB --steps 6 --db d.db --inject-oom 3:0:90% > /dev/null 2>&1
sqlite3 d.db "SELECT config_ini FROM runs WHERE kind = 'train'" > "$C/ini/recorded-config.ini"
# 512-byte pages make the databases 20-30 KiB instead of 70; back to WAL as memsplit leaves them
for db in r:profile-plan-train d:doctor-recovery; do
    sqlite3 "${db%%:*}.db" "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM; PRAGMA journal_mode=WAL;" > /dev/null
    cp "${db%%:*}.db" "$C/db/${db#*:}.db"
done
echo "make_corpus: seeds written under $C"
