#!/usr/bin/env bash
# program_db.sh — a run database holding one doctor run of a user's program,
# for the report tests (tests/browser/render.sh, tests/unit/test_term_report.c,
# tests/unit/test_html_report.c): the reference model of tests/bridge/models.py
# (a `transformers` list of 6 (attn, ff) pairs) under bf16 autocast, so it has
# fp32 master weights, on the CPU with Debian's torch. Its trial runs out of
# memory at 0.8 x the uncapped peak (in a block's forward pass), doctor plans
# over two devices of that size and trains 6 steps with the plan. About 6 s.
#
# Usage: MEMSPLIT=build/memsplit tests/browser/program_db.sh OUT.db
# Exit 0 with OUT.db made; 1 with the reason on stderr.
set -u
M=${MEMSPLIT:?set MEMSPLIT to the memsplit binary}
PY=${BRIDGE_PYTHON:-/usr/bin/python3}
db=${1:?usage: program_db.sh OUT.db}
here=$(cd "$(dirname "$0")" && pwd)
models=$here/../bridge/models.py
args=(--model ref --blocks 6 --steps 6 --amp)

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "program_db.sh: $PY has no torch (scripts/deps.sh installs python3-torch)" >&2; exit 1
fi
peak=$("$M" profile --quiet --json -- "$PY" "$models" "${args[@]}" 2>"$db.profile.log" |
       "$PY" -c 'import json, sys; print(json.load(sys.stdin)["peak_bytes"])') || {
    echo "program_db.sh: the uncapped profile failed:" >&2; tail -5 "$db.profile.log" >&2; exit 1; }
rm -f "$db" "$db-wal" "$db-shm"
if ! "$M" doctor --gpus 2 --gpu-mem $((peak * 8 / 10)) --db "$db" --quiet --json -- "$PY" "$models" "${args[@]}" \
        >/dev/null 2>"$db.doctor.log"; then
    echo "program_db.sh: doctor failed:" >&2; tail -5 "$db.doctor.log" >&2; exit 1
fi
rm -f "$db.profile.log" "$db.doctor.log"
