#!/usr/bin/env bash
# track_cpu.sh — the first steps of a GPU run track the CPU run's losses:
# the tiny preset (and a 4-block variant) for 10 steps on the CPU and on
# cuda:0 from the same seed and data. fp32 within 1e-3 relative per step
# (different summation orders and attention blocking, compounded over 10
# AdamW steps), bf16 against the fp32 CPU run within 3e-2 relative.
set -u
M=${MEMSPLIT:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0; fail=0
run() { "$M" train --preset tiny --steps 10 --json --quiet "$@"; }
for shape in "" "--set model.n_layer=4 --set model.d_model=64 --set model.seq_len=64"; do
    # shellcheck disable=SC2086
    run --device cpu $shape > "$T/cpu.json" || { echo "FAIL cpu run"; fail=$((fail+1)); continue; }
    for prec in fp32 bf16; do
        # shellcheck disable=SC2086
        run --device cuda:0 --precision $prec $shape > "$T/gpu.json" || { echo "FAIL gpu $prec run"; fail=$((fail+1)); continue; }
        tol=1e-3; [ $prec = bf16 ] && tol=3e-2
        if python3 - "$T/cpu.json" "$T/gpu.json" "$tol" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["losses"]; b = json.load(open(sys.argv[2]))["losses"]; tol = float(sys.argv[3])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"  cpu {a[0]:.5f}..{a[-1]:.5f}  gpu {b[0]:.5f}..{b[-1]:.5f}  worst rel diff {worst:.2e} (tol {tol})")
sys.exit(0 if len(a) == len(b) == 10 and worst <= tol else 1)
PY
        then echo "ok   gpu $prec tracks cpu ($shape)"; pass=$((pass+1)); else echo "FAIL gpu $prec tracks cpu ($shape)"; fail=$((fail+1)); fi
    done
done
echo "track: $pass passed, $fail failed"
[ $fail -eq 0 ]
