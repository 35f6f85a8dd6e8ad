#!/usr/bin/env bash
# recover_gpu.sh — OOM recovery with virtual devices of one GPU: a small
# model is profiled on a device too small for it, planned over two virtual
# devices, and trained with the plan; at step 4 one device shrinks (as if
# another process took memory), the step runs out, memsplit re-plans for the
# capacity that remains, resumes from the step-2 checkpoint and finishes;
# its losses must track an uninterrupted run of the new plan's micro-batching
# (within 1e-4 relative: GPU float atomics differ in the last bits).
#
# Every capacity is derived from what this machine measures, so that the
# re-plan has a plan that fits by construction, whatever the reserve (CUDA
# context, cuBLASLt workspace) of a virtual device is here:
#   1. a single-device step measures the reserve R and the peak S; T = S - R
#      is what the tensors take;
#   2. the trial gets C = R + 85% of T: it runs out (it needs R + T), and two
#      devices of C (headroom 0: each virtual device carries a whole R) hold
#      the model with room to spare; memsplit plan makes the plan P0 from the
#      trial's profile;
#   3. for each device D that holds a stage of P0, X_min(D) is the smallest
#      capacity of D, the other device unchanged, at which memsplit plan
#      (the re-plan's search: same profile, precision, global batch,
#      headroom, link) still finds a plan, by bisection; D's stage needs its
#      predicted peak p(D) (measured within 0.1% of it);
#   4. the device D with the most room between lo = 1.005 X_min(D) and
#      hi = 0.995 p(D) (lo < hi is required) shrinks to X = (lo + hi) / 2:
#      step 4 needs p(D) > X, so it runs out; at X a plan fits, since
#      X > X_min(D) (on the H200 X_min is only about 3% below p, so 2%
#      margins left no room at all).
# The prediction's reserve is what a device of the rerun pays: the trial
# leaves CUPTI's own buffers (14 MiB on the H200) out of the profile's
# reserve. Counting them made every prediction 14.00 MiB above the measured
# peak, and this test failed 10 times out of 10 on the H200 (2026-12-01).
# Usage: MEMSPLIT=gpu-pack/memsplit tests/gpu/recover_gpu.sh
#   DEVICE=cpu checks the same on the CPU backend (virtual CPU devices).
set -u
M=${MEMSPLIT:?}
DEV=${DEVICE:-cuda:0}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; fail=$((fail+1)); }
finish() { echo "recover: $pass passed, $fail failed"; [ $fail -eq 0 ]; exit $?; }
shape=(--preset tiny --precision fp32 --set model.n_layer=8 --set model.d_model=64 --set model.n_head=2
       --set model.seq_len=64 --steps 6)
names="$DEV/v0,$DEV/v1"

# 1. R and S from one step on the whole device
"$M" train "${shape[@]}" --device "$DEV" --gpu-mem 0 --steps 1 --json --quiet > "$T/one.json" || { bad "baseline"; finish; }
read -r R S < <(python3 -c "
import json; d = json.load(open('$T/one.json'))['devices'][0]
print(d['peak_by_category']['reserve'], d['peak_bytes'])")
C=$(( R + (S - R) * 85 / 100 ))
echo "     reserve $R, single-device peak $S: trial capacity $C"

# 2. the trial (runs out) and the plan P0 over two devices of C
"$M" profile "${shape[@]}" --device "$DEV" --gpu-mem "$C" --batch 4,2 --db "$T/r.db" --quiet > /dev/null
rc=$?; [ $rc -eq 3 ] && ok "the trial runs out on $C bytes" || { bad "trial (exit $rc, wanted 3)"; finish; }
"$M" plan --db "$T/r.db" --gpus 2 --gpu-mem "$C" --headroom 0 --devices "$names" -o "$T/p0.json" > "$T/p0.txt" \
    || { bad "plan P0"; cat "$T/p0.txt"; finish; }
read -r PREC GB LINK < <(python3 -c "
import json; p = json.load(open('$T/p0.json')); print(p['precision'], p['global_batch'], p['link_gbps'])")

# 3. X_min(D) by bisection with the re-plan's own search
fits() { # capacity of device 0, capacity of device 1
    "$M" plan --db "$T/r.db" --run 1 --gpu-mem "$1,$2" --devices "$names" --headroom 0 --precision "$PREC" \
        --batch "$GB" --link-gbps "$LINK" --json > /dev/null 2>&1
}
best_room=0; D=-1; X=0
for d in $(python3 -c "import json; print(' '.join(str(s['device']) for s in json.load(open('$T/p0.json'))['stages']))"); do
    p=$(python3 -c "import json; print([s for s in json.load(open('$T/p0.json'))['stages'] if s['device'] == $d][0]['predicted_peak_bytes'])")
    lo=0; hi=$p   # at hi (P0 itself) a plan fits
    while [ $((hi - lo)) -gt $((p / 2000 + 1)) ]; do
        mid=$(( (lo + hi) / 2 ))
        if [ "$d" = 0 ]; then fits "$mid" "$C"; else fits "$C" "$mid"; fi && hi=$mid || lo=$mid
    done
    lo_x=$(( hi * 1005 / 1000 )); room=$(( p * 995 / 1000 - lo_x ))
    echo "     device $d: predicted peak $p; a plan still fits when it has $hi bytes"
    if [ $room -gt $best_room ]; then best_room=$room; D=$d; X=$(( lo_x + room / 2 )); fi
done
[ $D -ge 0 ] && ok "a shrink of device $D to $X bytes runs out and leaves a plan" || { bad "no device has room for a shrink that leaves a plan"; finish; }

# 4. train with P0; device D shrinks at step 4
"$M" train "${shape[@]}" --plan "$T/p0.json" --device "$DEV" --db "$T/r.db" --checkpoint-dir "$T/ck" --checkpoint-every 2 \
    --inject-oom "4:$D:$X" --json > "$T/rec.json" 2> "$T/rec.log"
rc=$?
if [ $rc -eq 0 ] && grep -q "OUT OF MEMORY at step 4" "$T/rec.log" && grep -q "resumed from .*step-00000002.ckpt at step 2" "$T/rec.log"; then
    ok "recovered after an OOM at step 4, from the step-2 checkpoint"
else bad "recovery (exit $rc)"; tail -5 "$T/rec.log"; fi
grep -A3 "measured against predicted" "$T/rec.log" | sed 's/^/     /'
mb=$(python3 -c "import json; p = json.load(open('$T/rec.json'))['plan']; print(p['micro_batch'], p['n_micro'])" 2>/dev/null)
if [ -n "$mb" ]; then
    set -- $mb
    "$M" train "${shape[@]}" --device "$DEV" --gpu-mem 0 --batch "$1" --set train.accum="$2" --json --quiet > "$T/ref.json"
    if python3 - "$T/rec.json" "$T/ref.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); u = json.load(open(sys.argv[2]))
a, b = r["losses"], u["losses"]
print("     recovered", [round(x, 6) for x in a]); print("     reference", [round(x, 6) for x in b])
sys.exit(0 if r["recoveries"] == 1 and len(a) == len(b) == 6 and all(abs(x - y) <= 1e-4 * abs(y) for x, y in zip(a, b)) else 1)
PY
    then ok "recovered losses track the uninterrupted run"; else bad "recovered losses"; fi
else bad "the new plan's micro-batching"; fi
finish
