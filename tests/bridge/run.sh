#!/usr/bin/env bash
# run.sh — the PyTorch bridge end to end on the CPU, with Debian's torch
# (/usr/bin/python3): `memsplit profile -- /usr/bin/python3 script.py` on the
# test models (tests/bridge/models.py), the rows against the tensors' own
# bytes, the OOM at the right module, the program's features, and every kind
# of bad input with its message and exit code. Needs $MEMSPLIT.
WHO=bridge
. "$(dirname "$0")/lib.sh"

expect_params() {  # NAME MODEL_ARGS... : rows' param bytes equal the model's own, every byte in one row
    local name=$1; shift
    local want got
    py "json.dumps([r['name'] for r in d['layers']])" > "$T/names.json"
    want=$("$PY" "$HERE/expect.py" "$@" --names "$T/names.json")
    got=$(py "json.dumps({'param': [r['param'] + r['master'] for r in d['layers']]})")
    if [ "$want" = "$got" ]; then ok "$name"; else bad "$name" "want $want" "got  $got"; fi
}
MODELS="$HERE/models.py"
"$M" profile --preset tiny --json --quiet > "$T/tiny.json" 2>/dev/null
"$M" plan --profile "$T/tiny.json" --gpus 2 --gpu-mem 1GiB -o "$T/builtin.json" > /dev/null 2>&1

# ---- the rows equal the tensors' bytes --------------------------------
for m in ref seq hf; do
    check "profile $m fits" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model $m && \
        expect_params "$m: param bytes per layer equal the model's tensors" --model $m
done
check "hf profile" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model hf
if [ "$(py "[r['name'] for r in d['layers']] == ['transformer.wte', 'transformer.wpe,transformer.drop', 'transformer.h.0', 'transformer.h.1', 'transformer.h.2', 'transformer.h.3', 'transformer.ln_f', 'lm_head'] and d['layers'][-1]['param'] == 0 and d['program']['layer_list'].startswith('8 units from the module tree')")" = True ]; then
    ok "hf: the units are named by module path; the tied lm_head is counted once, in layer 0"
else bad "hf layer names" "$(py "[r['name'] for r in d['layers']]")"; fi
# every block of a model is the same: identical rows (act, grad, optimizer state)
if [ "$(py "len(set((r['grad'], r['optim'], r['act'], r['out_bytes']) for r in d['layers'][2:-2])) == 1 and d['layers'][2]['optim'] == 2 * d['layers'][2]['param'] + 4 * 6 and d['layers'][2]['out_bytes'] == 4 * 16 * 32 * 4")" = True ]; then
    ok "hf: identical blocks have identical rows; AdamW state is 2 x params (+ its step counters); out = B*T*C*4"
else bad "hf block rows" "$(py "[(r['grad'], r['optim'], r['act'], r['out_bytes']) for r in d['layers']]")"; fi
cp "$T/out" "$T/hf.json"

# ---- the OOM at the right module ----------------------------------------
# From the uncapped rows: a cap that holds the parameters, the input and the
# activations of the layers before block 3 and half of block 3's: the
# program must die in block 3's forward (layer 3 = transformers.2).
check "ref uncapped" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model ref --blocks 6
cap=$(py "sum(r['param'] for r in d['layers']) + sum(r['act'] for r in d['layers'][:3]) + d['layers'][3]['act'] // 2")
check "ref under a cap: exit 3, OOM named" 3 "out of memory in the forward pass of transformers.2" -- \
    "$M" profile --json --gpu-mem "$cap" -- "$PY" "$MODELS" --model ref --blocks 6
if [ "$(py "d['oom']['layer'] == 3 and d['oom']['phase'] == 'forward' and d['oom']['what'].startswith('transformers.2.') and d['fits'] == False and d['program']['second_pass'] == True and all(r['source'] == 'uncapped' for r in d['layers'])")" = True ]; then
    ok "ref OOM: layer 3 forward, innermost module named, rows from the uncapped pass"
else bad "ref OOM json" "$(py "d['oom'], [r['source'] for r in d['layers']]")"; fi
grep -q "what would fit" "$T/err" && ok "the diagnosis says what would have fit" || bad "no fit advice" "$(tail -3 "$T/err")"
[ "$(py "d['oom']['step']")" = 1 ] && ok "the diagnosis names the step (1)" || bad "oom step" "$(py "d['oom']")"
# a program that keeps more from its second step runs out there: the diagnosis says step 2
check "ref uncapped, 3 steps" 0 "" -- "$M" profile --quiet --json --steps 3 -- "$PY" "$MODELS" --model ref --blocks 6 --steps 3
grow=$(py "d['peak_bytes'] / 2 / 2**20"); cap2=$(py "int(d['peak_bytes'] * 1.25)")
check "a second step's OOM" 3 "step 2" -- "$M" profile --json --steps 3 --gpu-mem "$cap2" -- "$PY" "$MODELS" --model ref \
    --blocks 6 --steps 3 --grow-at 2 --grow-mb "$grow"
[ "$(py "d['oom']['step']")" = 2 ] && ok "a second step's OOM names step 2 in the JSON and the text" || bad "oom step 2" "$(py "d['oom']")"
check "ref under a cap, no second pass" 3 "" -- \
    "$M" profile --json --no-second-pass --gpu-mem "$cap" -- "$PY" "$MODELS" --model ref --blocks 6
if [ "$(py "d['program']['second_pass'] == False and d['layers'][6]['source'] == 'copied'")" = True ]; then
    ok "no second pass: unreached rows are copied and say so"; else bad "copied rows" "$(py "[r['source'] for r in d['layers']]")"; fi

# ---- the program's own features ------------------------------------------
check "gradient accumulation" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model seq --accum 3
[ "$(py "d['model']['global_batch'] == 12 and d['layers'][1]['micro_batch'] == 4")" = True ] && \
    ok "accumulation: rows per micro-batch of 4, global batch 12" || bad "accum" "$(py "d['model']")"
check "activation checkpointing" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model hf --ckpt
[ "$(py "d['layers'][2]['act'] < json.load(open('$T/hf.json'))['layers'][2]['act']")" = True ] && \
    ok "checkpointing: a block keeps less than without it" || bad "ckpt act" "$(py "[r['act'] for r in d['layers']]")"
check "two optimizers" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model seq --two-opt
[ "$(py "all(r['optim'] > 0 for r in d['layers'])")" = True ] && ok "two optimizers: both states counted" || \
    bad "two optimizers" "$(py "[r['optim'] for r in d['layers']]")"
check "DataLoader workers" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model seq --workers 2
[ "$(py "d['layers'][1]['param'] == 33664")" = True ] && ok "workers: the bridge stays inert in them" || bad "workers" ""
check "bf16 autocast" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model ref --amp
[ "$(py "d['layers'][1]['master'] == 50816 and 0 < d['layers'][1]['param'] < 50816 and d['layers'][1]['precision'] == 'bf16'")" = True ] && \
    ok "autocast: fp32 weights are master, the 16-bit copies param" || bad "autocast" "$(py "d['layers'][1]")"
# torch.profiler records no CUDA activity while memsplit's CUPTI library
# holds the one subscriber: said once, and the program runs on (on the CPU
# no CUDA context starts, so naming the library is harmless)
INJ=$(dirname "$M")/bridge/libmemsplit_inject.so
check "torch.profiler under memsplit's CUPTI" 0 "" -- \
    env CUDA_INJECTION64_PATH="$INJ" "$M" profile -- "$PY" "$MODELS" --model seq --steps 2 --torch-profiler
grep -qE "^warnings:.*torch.profiler records no CUDA" "$T/out" && ok "torch.profiler: warned, once, and the program ran on" || \
    bad "torch.profiler: no warning" "$(tail -3 "$T/out")"
check "torch.profiler without it" 0 "" -- "$M" profile -- "$PY" "$MODELS" --model seq --steps 2 --torch-profiler
grep -q "torch.profiler" "$T/out" "$T/err" && bad "torch.profiler warned without memsplit's CUPTI" "$(grep torch.profiler "$T/err")" || \
    ok "torch.profiler: no warning when CUPTI is free"
check "started through bash" 0 "" -- "$M" profile --quiet -- bash -c "exec '$PY' '$MODELS' --model seq --steps 3"

# a sitecustomize of the program's own still runs
mkdir -p "$T/site"
printf 'import os\nopen(os.environ["MARK"], "w").write("ran")\n' > "$T/site/sitecustomize.py"
check "own sitecustomize chain-loaded" 0 "" -- env PYTHONPATH="$T/site" MARK="$T/mark" "$M" profile --quiet -- \
    "$PY" "$MODELS" --model seq
[ -s "$T/mark" ] && ok "the program's sitecustomize ran too" || bad "own sitecustomize did not run" ""

# ---- the applier's crossing path, real and virtual devices (unit tests) ----
check "applier unit tests (tests/bridge/test_apply.py)" 0 "" -- "$PY" "$HERE/test_apply.py"
check "the backward's threads over distinct devices (tests/bridge/test_engine_threads.py)" 0 "" -- \
    "$PY" "$HERE/test_engine_threads.py"
check "the innermost module from the frames (tests/bridge/test_frames.py)" 0 "" -- "$PY" "$HERE/test_frames.py"
check "a pass's opens of checkpoints, the import hook (tests/bridge/test_opens.py)" 0 "" -- \
    "$PY" "$HERE/test_opens.py"
check "a step's relabels on a plan's stages, one batch (tests/bridge/test_replay.py)" 0 "" -- \
    env MEMSPLIT_BRIDGE_LIB="$(dirname "$M")/bridge/libmemsplit_bridge.so" "$PY" "$HERE/test_replay.py"
check "the GPU's record source over a stand-in allocator (tests/bridge/test_allocator.py)" 0 "" -- \
    "$PY" "$HERE/test_allocator.py"
if check "bench/bridge_cost.py runs whole iterations through the bridge" 0 "" -- \
    "$PY" "$HERE/../../bench/bridge_cost.py" --model resnet18 --steps 2; then
    if grep -qE "the bridge [0-9.]+ ms" "$T/out" && grep -qE "Session.transition .* [1-9][0-9]* calls a step" "$T/out"; then
        ok "bench/bridge_cost.py: the bridge's time and its transitions, each step"
    else bad "bench/bridge_cost.py: no bridge time or transitions" "$(tail -4 "$T/out")"; fi
fi
check "bench/gpu_idle.py's accounting (tests/bridge/test_gpu_idle.py)" 0 "" -- "$PY" "$HERE/test_gpu_idle.py"
# bench/programs.sh's split2 mode (a program over two GPUs against it alone on one): on two CPU
# devices, the same script; with its default devices on a machine of no two GPUs, skipped, said
TINY="$PY $HERE/ref_model.py --blocks 2 --dim 64 --heads 2 --seq 32 --batch 2 --vocab 128"
for dv in cpu,cpu ""; do
    OUT="$T/pb$dv" BENCH_SPLIT_DEVICES=$dv BENCH_PROGRAM_TINY="$TINY" BENCH_PROGRAM_LIST=tiny PYTHON="$PY" \
        BENCH_PROGRAM_MODES="alone split2" BENCH_PROGRAM_ROUNDS=1 BENCH_PROGRAM_STEPS=8 BENCH_PROGRAM_WARMUP=0 \
        timeout 300 bash "$HERE/../../bench/programs.sh" "$M" > "$T/pb.out" 2>&1; rc=$?
    if [ -n "$dv" ]; then
        grep -qE "^tiny split2: over cpu,cpu [0-9.]+ ms a step against [0-9.]+ ms alone on one \([-+][0-9.]+%\); cpu predicted [0-9.]+ MiB, measured [0-9.]+ MiB \([-+]0\.[0-9]+%\); cpu predicted" "$T/pb.out" && [ $rc = 0 ] && \
            ok "bench/programs.sh split2 on two CPU devices: the step time against the program alone, each stage within 1%" || \
            bad "bench/programs.sh split2 on two CPU devices (exit $rc)" "$(tail -4 "$T/pb.out")"
    elif [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
        grep -q "^tiny       split2   skipped: no split: this machine has fewer than two GPUs" "$T/pb.out" && [ $rc = 0 ] && \
            ok "bench/programs.sh split2 with one GPU or none: skipped, and said" || \
            bad "bench/programs.sh split2 on one GPU (exit $rc)" "$(tail -4 "$T/pb.out")"
    fi
done
check "--no-cupti (nothing to leave out on the CPU)" 0 "" -- "$M" profile --quiet --no-cupti -- "$PY" "$MODELS" --model seq

# ---- bad input -----------------------------------------------------------
check "no program" 1 "no program after --" -- "$M" profile --
check "missing program" 2 "cannot run" -- "$M" profile -- /nonexistent/python
check "not Python" 2 "never started Python" -- "$M" profile -- /bin/true
check "exits before torch" 2 "never imported torch.*exit status 4" -- "$M" profile -- "$PY" -c 'import sys; sys.exit(4)'
check "exits before training" 2 "ended \(exit status 5\) before a training forward" -- \
    "$M" profile -- "$PY" -c 'import torch, sys; sys.exit(5)'
check "killed by a signal" 2 "killed by signal 9" -- \
    "$M" profile -- "$PY" -c 'import torch, os; os.kill(os.getpid(), 9)'
check "no block list" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model flat
[ "$(py "[r['name'] for r in d['layers']]")" = "['embed', 'a', 'b', 'head']" ] && \
    ok "no block list: the root's children are the units" || bad "no list units" "$(py "[r['name'] for r in d['layers']]")"
expect_params "no block list: every parameter byte in one row" --model flat
check "--layers names what to open" 0 "" -- "$M" profile --quiet --json --layers transformers.1,segment2 -- \
    "$PY" "$MODELS" --model ref
[ "$(py "[r['name'] for r in d['layers']][2:5]")" = "['transformers.1.0', 'transformers.1.1', 'transformers.2']" ] && \
    ok "--layers: several paths, each opened into its children" || bad "--layers paths" "$(py "[r['name'] for r in d['layers']]")"
expect_params "--layers: every parameter byte in one row" --model ref
check "--layers missing path" 1 "no module at that path" -- "$M" profile --layers nope -- "$PY" "$MODELS" --model seq
check "bad --steps" 1 "steps" -- "$M" profile --steps 0 -- "$PY" "$MODELS"
check "bad --gpu-mem" 1 "gpu-mem" -- "$M" profile --gpu-mem 12XB -- "$PY" "$MODELS"

# ---- recorded, nothing lost ------------------------------------------------
check "recorded in a database" 3 "" -- "$M" profile --db "$T/runs.db" --gpu-mem "$cap" -- "$PY" "$MODELS" --model ref --blocks 6
check "report shows the program's modules" 0 "" -- "$M" report --db "$T/runs.db"
grep -q "transformers.2" "$T/out" && ok "report: the OOM's module by its path" || bad "report lacks the module" "$(head -20 "$T/out")"
check "html report" 0 "" -- "$M" report --db "$T/runs.db" --html "$T/r.html"
grep -q "segment1" "$T/r.html" && ok "html report: module names" || bad "html lacks names" ""
# the program's standard input: kept once, every pass reads all of it (the
# trial, the uncapped pass, the rerun)
cat > "$T/stdin_prog.py" <<PYEOF
import sys
data = sys.stdin.read()
print("stdin %d bytes" % len(data), flush=True)
sys.argv = ["models.py", "--model", "ref", "--blocks", "6", "--steps", "4"]
sys.path.insert(0, "$HERE")
import models
models.main()
PYEOF
"$M" profile --quiet --json -- "$PY" "$MODELS" --model ref --blocks 6 --steps 4 > "$T/sin.json" 2>/dev/null
capi=$("$PY" -c "import json; print(int(json.load(open('$T/sin.json'))['peak_bytes'] * 0.7))")
printf 'one\ntwo\nthree\n' | "$M" doctor --gpus 2 --gpu-mem "$capi" --db "$T/stdin.db" -- "$PY" "$T/stdin_prog.py" \
    > "$T/stdin.out" 2>&1; rc=$?
n_full=$(grep -c "^stdin 14 bytes" "$T/stdin.out"); n_any=$(grep -c "^stdin " "$T/stdin.out")
[ $rc = 0 ] && [ "$n_full" -ge 3 ] && [ "$n_full" = "$n_any" ] && \
    ok "standard input: each of the $n_full passes read all of it" || \
    bad "standard input (exit $rc)" "$(grep '^stdin' "$T/stdin.out" | paste -sd' ' -)" "$(tail -3 "$T/stdin.out")"
# a program killed after its first step keeps every event it sent
cat > "$T/killme.py" <<EOF
import os, sys
sys.argv = ["models.py", "--model", "seq", "--steps", "3"]
sys.path.insert(0, "$HERE")
import torch
step = torch.optim.Optimizer.step
import models
orig = torch.optim.AdamW.step
n = [0]
def killer(self, *a, **k):
    r = orig(self, *a, **k)
    n[0] += 1
    if n[0] == 1:
        os.kill(os.getpid(), 9)
    return r
torch.optim.AdamW.step = killer
models.main()
EOF
check "killed mid-run" 2 "killed by signal 9" -- "$M" profile --steps 3 --db "$T/kill.db" -- "$PY" "$T/killme.py"
n=$(sqlite3 "$T/kill.db" "select count(*) from mem_events" 2>/dev/null || echo 0)
st=$(sqlite3 "$T/kill.db" "select status from runs" 2>/dev/null)
if [ "${n:-0}" -gt 100 ] && [ "$st" = failed ]; then ok "killed: $n events kept, run recorded as failed"; else bad "killed run" "events $n status $st"; fi

# ---- SIGINT reaches the program; the run is recorded interrupted, exit 130 ----
"$M" profile --db "$T/int.db" -- "$PY" "$MODELS" --model seq --sleep 30 >"$T/int.out" 2>"$T/int.err" &
mp=$!
for _ in $(seq 100); do grep -q ready "$T/int.out" 2>/dev/null && break; sleep 0.1; done
kill -INT $mp
wait $mp; rc=$?
st=$(sqlite3 "$T/int.db" "select status from runs" 2>/dev/null)
if [ $rc = 130 ] && [ "$st" = interrupted ] && grep -q "interrupted" "$T/int.err"; then ok "SIGINT: forwarded, run interrupted, exit 130"
else bad "interrupt" "exit $rc status $st" "$(tail -3 "$T/int.err")"; fi

# ---- plans and reruns: the program split over two devices -------------------
# losses_of FILE: the "step N loss X" lines a program printed, comma-joined
losses_of() { grep -o '^step [0-9]* loss [0-9.]*' "$1" | awk '{print $4}' | paste -sd, -; }
# a cap at 70% of the uncapped peak: one device is too small, two fit
P6=("$PY" "$MODELS" --model ref --blocks 6 --steps 6)
check "ref uncapped, for the cap" 0 "" -- "$M" profile --quiet --json -- "${P6[@]}"
cap=$(py "int(d['peak_bytes'] * 0.7)")
"${P6[@]}" > "$T/plain.out" 2>&1
check "doctor splits the program" 0 "" -- "$M" doctor --gpus 2 --gpu-mem "$cap" --db "$T/doc.db" --json -- "${P6[@]}"
if [ "$(py "d['trial']['oom']['layer'] >= 1 and len(d['plan']['stages']) == 2 and d['plan']['schedule'] == 'sequential' and d['train']['steps'] == 6 and all(abs(x['gap']) <= 0.02 for x in d['train']['devices'])")" = True ]; then
    ok "doctor: the trial runs out, 2 stages on cpu,cpu, every measured peak within 2% ($(py "[round(100*x['gap'],2) for x in d['train']['devices']]")%)"
else bad "doctor json" "$(py "d.get('train', d)")"; fi
# each stage's peak comes with what it held, by category (the ledger's breakdown), in the JSON and the database
if [ "$(py "all(isinstance(x['measured_by_category'], dict) and sum(x['measured_by_category'].values()) == x['measured_peak_bytes'] and x['measured_by_category']['param'] > 0 and x['measured_by_category']['act'] > 0 for x in d['train']['devices'])")" = True ] &&
   [ "$(sqlite3 "$T/doc.db" "select count(*) from device_peaks where measured_by_cat like '%\"act\":0,%' or measured_by_cat like '%\"param\":0,%'")" = 0 ]; then
    ok "doctor: each stage's measured peak by category, summing to the peak, in the JSON and the database"
else bad "measured by category" "$(py "[x.get('measured_by_category') for x in d['train']['devices']]")" "$(sqlite3 "$T/doc.db" "select measured_by_cat from device_peaks")"; fi
want=$(losses_of "$T/plain.out"); got=$(py "','.join('%.4f' % x for x in d['train']['losses'])")
[ -n "$want" ] && [ "$want" = "$got" ] && ok "doctor: the split run's losses equal the unsplit run's ($got)" || bad "losses" "unsplit $want" "split   $got"
# doctor plans as `memsplit plan` does from the trial's profile (the same chooser)
cp "$T/out" "$T/doc.json"
trial_run=$(sqlite3 "$T/doc.db" "select id from runs where kind = 'profile' order by id desc limit 1" 2>/dev/null)
check "plan from the doctor's trial" 0 "" -- "$M" plan --db "$T/doc.db" --run "$trial_run" --gpus 2 --gpu-mem "$cap" \
    --devices cpu,cpu --json
if [ -n "$trial_run" ] && [ "$(py "[(s['layers'], s['predicted_peak_bytes']) for s in d['stages']]")" = \
     "$("$PY" -c "import json; d=json.load(open('$T/doc.json')); print([(s['layers'], s['predicted_peak_bytes']) for s in d['plan']['stages']])")" ]; then
    ok "doctor's plan is the one memsplit plan makes from its trial's profile"
else bad "doctor and plan differ" "plan $(py "[s['layers'] for s in d.get('stages', [])]")" "doctor $("$PY" -c "import json; print([s['layers'] for s in json.load(open('$T/doc.json'))['plan']['stages']])")"; fi
check "report of the doctor run" 0 "" -- "$M" report --db "$T/doc.db"
grep -q "transformers" "$T/out" && ok "report: the program's module names" || bad "report names" "$(head -5 "$T/out")"
# a program run recorded before the breakdown by category was kept: report
# --json says it was not measured (null), where it showed 0 B in each
cp "$T/doc.db" "$T/old.db"
sqlite3 "$T/old.db" "UPDATE device_peaks SET measured_by_cat = '{\"param\":0,\"master\":0,\"grad\":0,\"optim\":0,\"act\":0,\"transient\":0,\"comm\":0,\"reserve\":0}'"
check "report --json of an older record" 0 "" -- "$M" report --db "$T/old.db" --json
pk() { "$PY" -c "import json; d=json.load(open('$T/out'))
def walk(r):
    for p in r.get('device_peaks') or []: yield p
    for c in r.get('children') or []: yield from walk(c)
print([p['measured_by_category'] is None for p in walk(d)])"; }
[ "$(pk)" = "[True, True]" ] && ok "report --json: an older record's categories are not measured (null)" || bad "older categories" "$(pk)"

check "profile for a plan" 3 "" -- "$M" profile --quiet --db "$T/plan.db" --gpu-mem "$cap" -- "${P6[@]}"
check "plan a program" 0 "" -- "$M" plan --db "$T/plan.db" --gpus 2 --gpu-mem "$cap" --devices cpu,cpu -o "$T/plan.json"
grep -q "placement: segment1, transformers.0-.* → cpu; transformers\..*segment2 → cpu" "$T/out" && \
    ok "plan: the placement in the program's module paths" || bad "placement line" "$(grep placement "$T/out")"
# the snippet runs and places every listed module on its device
sed -n '/^import torch/,/^    return model/p' "$T/out" > "$T/snippet.py"
# the README's commands as printed, on a machine with no GPU: the plan is for this CPU
if [ -z "$(ls /dev/nvidia0 2>/dev/null)" ]; then
    check "plan with no --devices, no GPU" 0 "" -- "$M" plan --db "$T/plan.db" --gpus 2 --gpu-mem "$cap" -o "$T/readme.json"
    check "train --plan as the README prints it" 0 "" -- "$M" train --plan "$T/readme.json" --json -- "${P6[@]}"
    [ "$(py "[x['name'] for x in d['devices']]")" = "['cpu/v0', 'cpu/v1']" ] && \
        ok "no GPU: the plan's devices are this machine's CPU (cpu/v0, cpu/v1) and the rerun trains on them" || \
        bad "README flow devices" "$(py "d.get('devices')")"
fi
check "plan refuses the program's own options" 1 "precision is its own" -- \
    "$M" plan --db "$T/plan.db" --gpus 2 --gpu-mem "$cap" --precision bf16
"$PY" "$HERE/run_snippet.py" "$T/snippet.py" > "$T/snip.out" 2>&1
grep -q "snippet True 8" "$T/snip.out" && ok "the printed snippet runs and places all 8 layers" || bad "snippet" "$(tail -3 "$T/snip.out")"
check "train --plan" 0 "" -- "$M" train --plan "$T/plan.json" --json --db "$T/plan.db" -- "${P6[@]}"
[ "$(py "','.join('%.4f' % x for x in d['losses'])")" = "$want" ] && ok "train --plan: losses equal the unsplit run's" || bad "train losses" "$(py "d['losses']")"
# One crossing path (docs/bridge.md): the same plan with the real devices'
# primitive (.to) in place of the clone crosses at the same places, in the
# same order, with the same losses and the same measured peaks
for how in clone to; do
    rm -f "$T/cross_$how.tsv"
    prim=; [ $how = to ] && prim=to
    check "train --plan, crossings by $how" 0 "" -- env MEMSPLIT_BRIDGE_TEST_CROSSINGS="$T/cross_$how.tsv" \
        MEMSPLIT_BRIDGE_TEST_PRIMITIVE=$prim "$M" train --plan "$T/plan.json" --json -- "${P6[@]}"
    py "[(x['measured_peak_bytes'], round(x['gap'], 6)) for x in d['devices']], d['losses']" > "$T/cross_$how.res"
done
if [ -s "$T/cross_clone.tsv" ] && cmp -s <(cut -f1-5,7 "$T/cross_clone.tsv") <(cut -f1-5,7 "$T/cross_to.tsv") &&
   [ "$(cut -f6 "$T/cross_clone.tsv" | sort -u)" = clone ] && [ "$(cut -f6 "$T/cross_to.tsv" | sort -u)" = to ] &&
   cmp -s "$T/cross_clone.res" "$T/cross_to.res" &&
   [ "$(awk -F'\t' '$2 == 1' "$T/cross_clone.tsv" | wc -l)" -gt 0 ] && [ "$(awk -F'\t' '$2 == 2' "$T/cross_clone.tsv" | wc -l)" -gt 0 ]; then
    ok "one crossing path: $(wc -l < "$T/cross_clone.tsv") crossings (forward and backward) by clone and by .to alike, same losses and peaks"
else bad "crossings differ by primitive" "$(diff <(cut -f1-5,7 "$T/cross_clone.tsv") <(cut -f1-5,7 "$T/cross_to.tsv") | head -5)" \
    "$(cat "$T/cross_clone.res" "$T/cross_to.res")"; fi
check "framework moves the model again" 0 "" -- "$M" train --plan "$T/plan.json" --json -- "${P6[@]}" --move-each-step
[ "$(py "all(abs(x['gap']) <= 0.02 for x in d['devices'])")" = True ] && ok "re-placed after every move: peaks still within 2%" || bad "re-placement" "$(py "d['devices']")"
check "state_dict save" 0 "" -- "$M" train --plan "$T/plan.json" --quiet -- "${P6[@]}" --save "$T/ck.pt"
check "state_dict load with map_location" 0 "" -- "$M" train --plan "$T/plan.json" --quiet -- "${P6[@]}" --load "$T/ck.pt"
# BatchNorm and autocast: the split computes the same; running statistics stay fp32
for amp in "" --amp; do
    PB=("$PY" "$MODELS" --model bn --blocks 4 --steps 4 $amp)
    "${PB[@]}" > "$T/bn.out" 2>&1
    check "bn$amp profile" 0 "" -- "$M" profile --quiet --json -- "${PB[@]}"
    capb=$(py "int(d['peak_bytes'] * 0.75)")
    check "bn$amp doctor" 0 "" -- "$M" doctor --gpus 2 --gpu-mem "$capb" --db "$T/bn.db" --json -- "${PB[@]}"
    got=$(py "','.join('%.4f' % x for x in d['train']['losses'])")
    if [ "$got" = "$(losses_of "$T/bn.out")" ] && grep -q "bn dtypes \['torch.float32'\]" "$T/err"; then
        ok "bn$amp: split losses equal the unsplit run's, BatchNorm statistics fp32"
    else bad "bn$amp" "split $got" "plain $(losses_of "$T/bn.out")"; fi
done
# The loss interval with a large vocabulary: the logits, what the loss saves
# and its gradients on the root stage, the logits on the last stage before
# they go there, a tied lm_head's backward where its weight is, what the
# program keeps from one step to the next (its last logits): every stage's
# measured peak within 2% of the plan's
split_case() {  # NAME GPUS FRACTION -- MODEL_ARGS...: doctor at FRACTION of the uncapped peak
    local name=$1 g=$2 frac=$3; shift 4
    check "$name: uncapped profile" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" "$@" || return
    local capx; capx=$(py "int(d['peak_bytes'] * $frac)")
    check "$name: doctor over $g" 0 "" -- "$M" doctor --gpus "$g" --gpu-mem "$capx" --db "$T/split.db" --json -- \
        "$PY" "$MODELS" "$@" || return
    local gaps; gaps=$(py "[round(100*x['gap'],2) for x in d['train']['devices']]")
    if [ "$(py "len(d['plan']['stages']) == $g and all(abs(x['gap']) <= 0.02 for x in d['train']['devices'])")" = True ]; then
        ok "$name: $g stages, every measured peak within 2% of the plan ($gaps%)"
    else bad "$name: measured against predicted" "gaps $gaps%" "$(py "[(s['layers'], s['predicted_peak_bytes']) for s in d['plan']['stages']]")"; fi
}
REF_V=(--model ref --blocks 12 --dim 32 --vocab 500 --seq 16 --batch 15 --steps 3)   # the reference's vocab/d
split_case "ref, large vocab" 2 0.6 -- "${REF_V[@]}"
split_case "ref, large vocab, loss in a step function, bf16" 3 0.45 -- "${REF_V[@]}" --step-fn --amp
split_case "hf, tied large vocab" 2 0.75 -- --model hf --vocab 2048 --blocks 8 --steps 4
split_case "hf, tied large vocab" 3 0.5 -- --model hf --vocab 2048 --dim 64 --blocks 12 --steps 4
split_case "hf, tied large vocab, loss in a step function, bf16" 2 0.7 -- --model hf --vocab 2048 --dim 64 \
    --blocks 12 --steps 4 --step-fn --amp
# Lightning's order: training_step, then zero_grad, then backward (the last
# step's gradients live through the forward, none when backward begins)
split_case "ref, large vocab, Lightning's order" 2 0.75 -- "${REF_V[@]}" --step-fn --lightning-order
split_case "ref, large vocab, Lightning's order, bf16" 3 0.5 -- "${REF_V[@]}" --step-fn --lightning-order --amp
check "Lightning's order: profile" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" "${REF_V[@]}" --step-fn \
    --lightning-order
[ "$(py "(d['grads_freed_each_step'], d.get('grads_freed_before'))")" = "(True, 'backward')" ] && \
    ok "Lightning's order: the gradients are freed before backward, the profile says" || \
    bad "grads_freed_before" "$(py "(d['grads_freed_each_step'], d.get('grads_freed_before'))")"
# Lightning runs the forward and backward inside optimizer.step(closure).
# A trial that runs out in the second step's forward (the last step's
# gradients and the optimizer state live) finished one step, not two: the
# step that raised is not counted, the program dies of its OOM as it would
# alone, and when the gradients are freed comes from the uncapped pass's
# whole steps. Before, the raising step was counted, the trial said the
# gradients are kept, and doctor's plan over-predicted (-2.9%, -2.9%).
CL=(--closure --lightning-order --dim 64 --blocks 4 --batch 8 --seq 32 --steps 4)
check "closure: uncapped profile" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" "${CL[@]}"
capc=$(py "int(d['peak_bytes'] * 0.9)")
check "closure: a trial that runs out in step 2" 3 "OUT OF MEMORY in the forward pass .*step 2" -- \
    "$M" profile --quiet --json --gpu-mem "$capc" -- "$PY" "$MODELS" "${CL[@]}"
[ "$(py "(d['oom']['step'], d['program']['steps_done'], d.get('grads_freed_before'))")" = "(2, 1, 'backward')" ] && \
    ok "closure: the step that ran out is not counted (1 done); the gradients are freed before backward" || \
    bad "closure: steps and gradients" "$(py "(d['oom']['step'], d['program']['steps_done'], d.get('grads_freed_before'))")"
grep -q "OutOfMemoryError" "$T/err" && ok "closure: the program died of its own OOM" || bad "closure: the OOM" "$(tail -3 "$T/err")"
split_case "closure, Lightning's order, out in step 2" 2 0.9 -- "${CL[@]}"
# HF's labels=: the loss inside the model's forward, after the tied lm_head,
# runs where the lm_head's output is (the root stage), and its backward too
split_case "hf, tied, loss in the model's forward (labels=)" 2 0.75 -- --model hf --vocab 2048 --blocks 8 --steps 4 --labels
split_case "hf, labels=, Lightning's order" 2 0.75 -- --model hf --vocab 2048 --blocks 8 --steps 4 --labels \
    --lightning-order
check "labels=: profile" 0 "" -- "$M" profile --quiet --json -- "$PY" "$MODELS" --model hf --vocab 2048 --blocks 8 \
    --steps 2 --labels
[ "$(py "d['loss']['made_in']")" = 0 ] && ok "labels=: the loss is made where the tied lm_head ran (layer 0)" || \
    bad "labels= made_in" "$(py "d['loss']")"
# A best model kept as Lightning's ModelCheckpoint keeps it (save_top_k=1):
# each save removes the one it replaces, the first a file a run before this
# one listed (a resumed run's best). The diagnostic passes save to files of
# memsplit's own and remove those; the program's file they never saved they
# leave alone. The rerun removes it, as the program alone does
D="$T/topk"
topk_fresh() { rm -rf "$D"; mkdir -p "$D"; echo before > "$D/old.ckpt"; }
PK=("$PY" "$MODELS" --model ref --blocks 4 --steps 3 --topk "$D" --stale "$D/old.ckpt")
topk_fresh
"${PK[@]}" > "$T/pk.out" 2>&1; rc=$?
[ $rc = 0 ] && [ ! -e "$D/old.ckpt" ] && [ "$(ls "$D")" = "step=3.ckpt" ] && \
    ok "topk: the program alone removes each best model it replaces, the old one first" || \
    bad "topk alone: exit $rc, left: $(ls "$D" | paste -sd' ')" "$(tail -2 "$T/pk.out")"
topk_fresh
check "topk: profile" 0 "does not remove the program's checkpoints: Lightning's remove of $D/old.ckpt skipped" -- \
    "$M" profile --quiet --json -- "${PK[@]}"
[ "$(cat "$D/old.ckpt" 2>&1)" = before ] && [ "$(ls "$D")" = old.ckpt ] && \
    ok "topk: the trial and the record pass left the program's best model and wrote none of theirs there" || \
    bad "topk: after the profile the folder holds: $(ls "$D" | paste -sd' ')" "$(grep -i checkpoint "$T/err")"
capk=$(py "int(d['peak_bytes'] * 0.7)")
topk_fresh
check "topk: doctor over two CPU devices" 0 "" -- "$M" doctor --gpus 2 --gpu-mem "$capk" --json -- "${PK[@]}"
[ "$(ls "$D")" = "step=3.ckpt" ] && ok "topk: the rerun removed the old best model and kept its own last, as the program alone" || \
    bad "topk: after doctor the folder holds: $(ls "$D" | paste -sd' ')"
# ModelCheckpoint's save_last="link": last.ckpt a link to each best model
# saved, and the run resumed from it. The diagnostic passes make their
# link among memsplit's files: before, the trial left a link to a file it
# never wrote (which the rerun's ckpt_path="last" failed to load), or, where
# the program's own link stayed (the one it resumed from), failed
PL=("${PK[@]}" --link-last --steps 6)
rm -rf "$D"; mkdir -p "$D"
check "link-last: profile" 0 "os.symlink to $D/last.ckpt went to a file of memsplit's own" -- \
    "$M" profile --steps 4 --quiet --json -- "${PL[@]}"
[ -z "$(ls -A "$D")" ] && ok "link-last: the trial left no link in the program's folder" || \
    bad "link-last: the folder holds $(ls -A "$D" | paste -sd' ')"
"${PL[@]}" --steps 1 > "$T/pl.out" 2>&1
sum=$(cksum < "$D/step=1.ckpt" 2>&1)
check "link-last: profile of a run resumed from last.ckpt" 0 "resumed at step 1 from last.ckpt" -- \
    "$M" profile --steps 4 --quiet --json -- "${PL[@]}"
[ "$(readlink "$D/last.ckpt")" = "step=1.ckpt" ] && [ "$(cksum < "$D/step=1.ckpt")" = "$sum" ] && \
    [ "$(ls -A "$D" | paste -sd' ')" = "last.ckpt step=1.ckpt" ] && \
    ok "link-last: the program's last.ckpt and the best model it links are where they were" || \
    bad "link-last resumed: the folder holds $(ls -A "$D" | paste -sd' '), last.ckpt -> $(readlink "$D/last.ckpt")"
check "link-last: doctor over two CPU devices" 0 "" -- "$M" doctor --gpus 2 --gpu-mem "$capk" --json -- "${PL[@]}"
[ "$(readlink "$D/last.ckpt")" = "step=6.ckpt" ] && [ "$(ls -A "$D" | paste -sd' ')" = "last.ckpt step=6.ckpt" ] && \
    ok "link-last: the rerun resumed, linked its last best model and removed the one before, as the program alone" || \
    bad "link-last doctor: the folder holds $(ls -A "$D" | paste -sd' '), last.ckpt -> $(readlink "$D/last.ckpt")"
# the last checkpoint kept by hand (torch.save, then os.remove of the one
# before): in the diagnostic passes the removal is of memsplit's own file;
# the program's file of that name (here from a run before) stays. Before,
# the trial deleted it, or failed with FileNotFoundError where none was
topk_fresh; echo before > "$D/ckpt_1.pt"; rm -f "$D/old.ckpt"
# (a trial of 4 steps: the program's first removal is at the end of its second)
PT=("$PY" "$MODELS" --model ref --blocks 4 --steps 5 --rotate "$D")
check "rotate: profile" 0 "" -- "$M" profile --steps 4 --quiet --json -- "${PT[@]}"
[ "$(cat "$D/ckpt_1.pt" 2>&1)" = before ] && [ "$(ls "$D")" = ckpt_1.pt ] && \
    ok "rotate: the trial removed its own checkpoints, not the program's file of that name" || \
    bad "rotate: after the profile the folder holds: $(ls "$D" | paste -sd' ')" "$(tail -2 "$T/err")"
rm -f "$D/ckpt_1.pt"
check "rotate: profile where the program has no such file" 0 "" -- "$M" profile --steps 4 --quiet --json -- "${PT[@]}"
"${PT[@]}" > "$T/pt.out" 2>&1 && [ "$(ls "$D")" = ckpt_5.pt ] && ok "rotate: the program alone keeps only its last checkpoint" || \
    bad "rotate alone: the folder holds: $(ls "$D" | paste -sd' ')" "$(tail -2 "$T/pt.out")"
# a backup of the checkpoint before each save (os.replace(P, P + ".bak")),
# in a run resumed from P: the diagnostic passes leave the program's P where
# it is (its loads of P.bak read it), and save to memsplit's own files.
# Before, the trial moved P to P.bak, and a rerun then began from step 1
rm -f "$T/bk.pt" "$T/bk.pt.bak"
"$PY" "$MODELS" --model ref --blocks 4 --steps 1 --resume "$T/bk.pt" > "$T/bk.out" 2>&1
sum=$(cksum < "$T/bk.pt")
PB=("$PY" "$MODELS" --model ref --blocks 4 --steps 6 --resume "$T/bk.pt" --backup)
check "backup: profile of a run resumed from its checkpoint" 0 \
    "does not rename the program's checkpoints: os.replace of $T/bk.pt to $T/bk.pt.bak skipped" -- \
    "$M" profile --steps 3 --quiet --json -- "${PB[@]}"
[ "$(cksum < "$T/bk.pt")" = "$sum" ] && [ ! -e "$T/bk.pt.bak" ] && grep -q "resumed at step 1" "$T/err" && \
    ok "backup: the trial resumed from the program's checkpoint and left it where it was" || \
    bad "backup: after the profile: $(ls "$T"/bk.pt* | paste -sd' ')" "$(grep -iE "resumed|checkpoint" "$T/err" | tail -2)"
"${PB[@]}" > "$T/bk.out" 2>&1 && [ -e "$T/bk.pt.bak" ] && grep -q "resumed at step 1" "$T/bk.out" && \
    ok "backup: the program alone moves its checkpoint to the backup before it saves" || bad "backup alone" "$(tail -2 "$T/bk.out")"
# a checkpoint saved into the file the program opens itself (open(P, "wb"),
# then torch.save into it), in a run resumed from P: the diagnostic passes'
# opens of P for writing go to memsplit's own file, and P keeps what it
# held. Before, the trial's open emptied P, and the rerun had nothing to
# resume from
rm -f "$T/op.pt"
"$PY" "$MODELS" --model ref --blocks 4 --steps 1 --resume "$T/op.pt" --through-open > "$T/op.out" 2>&1
sum=$(cksum < "$T/op.pt")
PO=("$PY" "$MODELS" --model ref --blocks 4 --steps 6 --resume "$T/op.pt" --through-open)
check "through-open: profile of a run resumed from its checkpoint" 0 \
    "does not rewrite the program's checkpoints: open of $T/op.pt went to a file of memsplit's own" -- \
    "$M" profile --steps 3 --quiet --json -- "${PO[@]}"
[ "$(cksum < "$T/op.pt")" = "$sum" ] && grep -q "resumed at step 1" "$T/err" && \
    ok "through-open: the trial resumed from the program's checkpoint and left it as it was" || \
    bad "through-open: after the profile: $(cksum < "$T/op.pt") (was $sum)" "$(grep -iE "resumed|checkpoint" "$T/err" | tail -2)"
"${PO[@]}" --steps 3 > "$T/op.out" 2>&1 && grep -q "resumed at step 1" "$T/op.out" && \
    "${PO[@]}" --steps 4 > "$T/op.out" 2>&1 && grep -q "resumed at step 3" "$T/op.out" && \
    ok "through-open: the program alone resumes from it, and from what it saves into it" || \
    bad "through-open alone" "$(tail -2 "$T/op.out")"
# the same in a fresh run (no checkpoint there yet): the diagnostic passes
# leave none of theirs; before, the trial's open left an empty file there,
# and the record pass's load of it failed with EOFError (no record)
rm -f "$T/op.pt"
check "through-open: profile of a fresh run" 0 "" -- "$M" profile --steps 3 --quiet --json -- "${PO[@]}"
[ ! -e "$T/op.pt" ] && ok "through-open: the fresh run's passes left no checkpoint of theirs" || \
    bad "through-open: the fresh run's passes left $(cksum < "$T/op.pt")"
# a run before's checkpoint that a fresh run saves over through a file it
# opens (--save: never loaded): the program's file keeps what it held; a
# binary file the program writes that is no checkpoint lands at its path
"$PY" "$MODELS" --model ref --blocks 4 --steps 1 --save "$T/sv.pt" > "$T/sv.out" 2>&1
sum=$(cksum < "$T/sv.pt")
check "through-open: profile of a run saving over a run before's checkpoint" 0 \
    "does not write the program's checkpoints: torch.save to $T/sv.pt went to a file of memsplit's own" -- \
    "$M" profile --steps 3 --quiet --json -- "$PY" "$MODELS" --model ref --blocks 4 --steps 6 --save "$T/sv.pt" --through-open
[ "$(cksum < "$T/sv.pt")" = "$sum" ] && ok "through-open: the run before's checkpoint is as it was" || \
    bad "through-open: the run before's checkpoint changed: $(cksum < "$T/sv.pt") (was $sum)"
# checkpoint folders, the last one kept (DIR/step-N/model.pt through
# torch.save, checked with os.path.isfile, every other step-* folder removed
# with shutil.rmtree, resuming from the latest folder: HF Trainer's way).
# The diagnostic passes' checks see the checkpoint they saved; their
# folders are gone after them; the program's folder from before stays
D="$T/kd"
PD=("$PY" "$MODELS" --model ref --blocks 4 --steps 6 --keep-dirs "$D")
rm -rf "$D"; mkdir -p "$D"
check "keep-dirs: profile of a fresh run" 0 "" -- "$M" profile --steps 4 --quiet --json -- "${PD[@]}" --fresh
[ -z "$(ls "$D")" ] && ok "keep-dirs: the trial checked the checkpoint it saved, and left none of its folders" || \
    bad "keep-dirs fresh: the folder holds $(ls "$D" | paste -sd' ')" "$(tail -2 "$T/err")"
"$PY" "$MODELS" --model ref --blocks 4 --steps 1 --keep-dirs "$D" > "$T/kd.out" 2>&1
sum=$(cksum < "$D/step-1/model.pt" 2>&1)
check "keep-dirs: profile of a run resumed from its folder" 0 \
    "does not remove the program's checkpoint folders: shutil.rmtree of $D/step-1 left the folder" -- \
    "$M" profile --steps 4 --quiet --json -- "${PD[@]}"
[ "$(ls "$D")" = step-1 ] && [ "$(cksum < "$D/step-1/model.pt")" = "$sum" ] && grep -q "resumed at step 1" "$T/err" && \
    ok "keep-dirs: the trial resumed from the program's folder, left it, and made none of its own" || \
    bad "keep-dirs resumed: the folder holds $(ls "$D" | paste -sd' ')" "$(grep -iE "resumed|checkpoint" "$T/err" | tail -2)"
check "keep-dirs: profile of a fresh run over a run before's folder of that name" 0 \
    "shutil.rmtree of $D/step-1 removed the files of memsplit's own in it and left the folder" -- \
    "$M" profile --steps 4 --quiet --json -- "${PD[@]}" --fresh
[ "$(ls "$D")" = step-1 ] && [ "$(cksum < "$D/step-1/model.pt")" = "$sum" ] && \
    ok "keep-dirs: the run before's step-1 folder, which the trial saved over, is the program's still" || \
    bad "keep-dirs over: the folder holds $(ls "$D" | paste -sd' ')" "$(tail -2 "$T/err")"
"${PD[@]}" > "$T/kd.out" 2>&1 && [ "$(ls "$D")" = step-6 ] && grep -q "resumed at step 1 from its folder" "$T/kd.out" && \
    ok "keep-dirs: the program alone resumes from its folder and keeps only its last" || \
    bad "keep-dirs alone: the folder holds $(ls "$D" | paste -sd' ')" "$(tail -2 "$T/kd.out")"
# checkpoint folders as HF's Trainer writes them (DIR/checkpoint-N: the
# weights through open(), as safetensors writes them, the optimizer's state
# through torch.save, the trainer's state in JSON), the run resumed from the
# latest. The folders the diagnostic passes made go whole at their end:
# before, the program's next run resumed from the trial's weights, without
# the optimizer state that went to memsplit's file, and said nothing wrong
D="$T/hf"
rm -rf "$D"; mkdir -p "$D"
PH=("$PY" "$MODELS" --model ref --blocks 4 --steps 6 --hf-dirs "$D")
check "hf-dirs: profile" 0 "" -- "$M" profile --steps 4 --quiet --json -- "${PH[@]}"
[ -z "$(ls -A "$D")" ] && ok "hf-dirs: the diagnostic passes left none of their checkpoint folders" || \
    bad "hf-dirs: the folder holds $(ls -A "$D" | paste -sd' ')"
"${PH[@]}" > "$T/ph.out" 2>&1
! grep -q resumed "$T/ph.out" && [ "$(ls "$D" | paste -sd' ')" = "$(seq -f 'checkpoint-%g' 1 6 | paste -sd' ')" ] && \
    ok "hf-dirs: the program's run after the profile began at its first step" || \
    bad "hf-dirs: the run after the profile" "$(grep resumed "$T/ph.out")" "$(ls "$D" | paste -sd' ')"
"${PH[@]}" --steps 8 > "$T/ph.out" 2>&1 && grep -q "resumed at step 6 from checkpoint-6 (optimizer state: yes)" "$T/ph.out" && \
    ok "hf-dirs: the program alone resumes from its latest folder" || bad "hf-dirs alone" "$(head -2 "$T/ph.out")"
# The same folders from a run before, and a fresh run saving into them
# again (--fresh): the diagnostic passes write none of their checkpoints
# (the weights through safetensors, outside Python's open, the optimizer's
# state through torch.save); the config and the trainer's state in JSON
# are written as alone and read back, and put back at the pass's end, as
# the files of a checkpoint from before. Before, the trial rewrote the
# weights of checkpoint-1..4 with its own, and later left its own JSON
# (the trainer's state of its run) beside the run before's weights. The
# fresh runs also write files the run before never made there (--hf-extra:
# a tokenizer.json, an extra.bin): the pass's, removed at its end, and by
# memsplit from the journal when the pass is killed
snap() { (cd "$1" && for f in */*; do echo "$f $(stat -c '%Y %s' "$f") $(cksum < "$f")"; done); }
snap "$D" > "$T/hf.before"      # checkpoint-1..8, of the runs alone above
check "hf-dirs over a run before: profile" 0 "" -- "$M" profile --steps 4 --quiet --json -- "${PH[@]}" --fresh --hf-extra
cmp -s "$T/hf.before" <(snap "$D") && ok "hf-dirs over a run before: the weights, optimizer states and JSON are as they were" || \
    bad "hf-dirs over a run before: changed" "$(diff "$T/hf.before" <(snap "$D") | head -4)"
for how in "safetensors' save to" "torch.save to"; do
    grep -q "write the program's checkpoints: $how $D/checkpoint-1/" "$T/err" && \
        ok "hf-dirs over a run before: said: $how" || bad "hf-dirs over a run before: not said: $how" "$(grep -i warn "$T/err")"
done
# ... and a fresh run that ends by os._exit within the trial's steps (Python's
# exit handlers, where a pass puts the files back, never run): the files
# are put back before the exit, and no hidden file of the pass is left
snap "$D" > "$T/hf.before"
check "hf-dirs over a run before, os._exit: profile (partial)" 2 "" -- "$M" profile --steps 4 --no-record-pass --quiet --json -- \
    "${PH[@]}" --fresh --hf-extra --steps 3 --hard-exit
cmp -s "$T/hf.before" <(snap "$D") && [ -z "$(find "$D" -name '.*memsplit-*')" ] && \
    ok "hf-dirs over a run before, os._exit: every file as it was, none of the pass's left" || \
    bad "hf-dirs over a run before, os._exit: changed" "$(diff "$T/hf.before" <(snap "$D") | head -4)" \
        "$(find "$D" -name '.*memsplit-*' | head -3)"
# ... and one ended by a SIGTERM (a scheduler's, passed on): by default it
# ended the program at once, with no exit handler; the pass puts the files
# back first, and the program dies by the signal
check "hf-dirs over a run before, SIGTERM: profile (partial)" 2 "" -- "$M" profile --steps 4 --no-record-pass --quiet \
    --json -- "${PH[@]}" --fresh --hf-extra --steps 3 --term-self
cmp -s "$T/hf.before" <(snap "$D") && [ -z "$(find "$D" -name '.*memsplit-*')" ] && grep -q "signal 15\|SIGTERM\|Terminated" "$T/err" && \
    ok "hf-dirs over a run before, SIGTERM: every file as it was, none of the pass's left, the signal said" || \
    bad "hf-dirs over a run before, SIGTERM: changed" "$(diff "$T/hf.before" <(snap "$D") | head -4)" \
        "$(find "$D" -name '.*memsplit-*' | head -3)" "$(grep -i "signal\|ended" "$T/err" | head -2)"
# ... and one killed (SIGKILL: no handler runs): memsplit applies what the
# pass noted in its scratch folder (run/undo_files.h), and says so
check "hf-dirs over a run before, SIGKILL: profile (partial)" 2 "" -- "$M" profile --steps 4 --no-record-pass --quiet \
    --json -- "${PH[@]}" --fresh --hf-extra --steps 3 --kill-self
cmp -s "$T/hf.before" <(snap "$D") && [ -z "$(find "$D" -name '.*memsplit-*')" ] && \
    grep -q "the pass ended before putting back the program's files: memsplit put back or removed [1-9]" "$T/err" && \
    ok "hf-dirs over a run before, SIGKILL: every file as it was, none of the pass's left, said" || \
    bad "hf-dirs over a run before, SIGKILL: changed" "$(diff "$T/hf.before" <(snap "$D") | head -4)" \
        "$(find "$D" -name '.*memsplit-*' | head -3)" "$(grep -i "put back\|ended" "$T/err" | head -2)"
"${PH[@]}" --steps 10 > "$T/ph.out" 2>&1 && grep -q "resumed at step 8 from checkpoint-8 (optimizer state: yes)" "$T/ph.out" && \
    ok "hf-dirs over a run before: the program alone resumes from its latest folder" || \
    bad "hf-dirs over a run before: alone" "$(head -2 "$T/ph.out")"
# A program that asks whether torch is installed before importing it
# (importlib.util.find_spec, as transformers does on its import): the bridge
# still starts at the import. Before, the look took the import hook away,
# and the profile said the program never imported torch
cat > "$T/spec_first.py" <<'PYEOF'
import importlib.util, runpy, sys
assert importlib.util.find_spec("torch") is not None
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
PYEOF
check "find_spec before import torch: profile" 0 "" -- "$M" profile --steps 2 --quiet --json -- \
    "$PY" "$T/spec_first.py" "$MODELS" --model ref --blocks 2 --steps 2
# The rerun runs out at a later step than the trial saw (the program keeps
# more from step 4): doctor learns the excess on the root stage, re-plans,
# restarts, and the program resumes from its own checkpoint (saved after
# every step, as Lightning's ckpt_path="last"); the trial writes none
PR=("$PY" "$MODELS" --model ref --blocks 6 --steps 6)
"${PR[@]}" > "$T/pr.out" 2>&1
check "resume: profile" 0 "" -- "$M" profile --quiet --json -- "${PR[@]}"
capr=$(py "int(d['peak_bytes'] * 0.8)"); grow=$(py "d['peak_bytes'] * 0.3 / 2**20")
rm -f "$T/resume.pt"
check "resume: doctor restarts after the rerun runs out" 0 \
    "counted as the program's own on the root stage" -- "$M" doctor --gpus 2 --gpu-mem "$capr" --db "$T/resume.db" \
    --json -- "${PR[@]}" --resume "$T/resume.pt" --grow-at 4 --grow-mb "$grow"
grep -q "the trial does not write the program's checkpoints" "$T/err" && \
    ok "resume: the trial wrote none of the program's checkpoints" || bad "trial checkpoints" "$(grep -i checkpoint "$T/err")"
grep -q "saved after step 3: it resumed there, no finished step lost" "$T/err" && \
    ok "resume: the restart resumed after step 3 from the program's own checkpoint" || \
    bad "resume message" "$(grep -i checkpoints "$T/err")"
want=$(grep -o '^step [3-5] loss [0-9.]*' "$T/pr.out" | awk '{printf "%s%s", (NR>1?",":""), $4}')
got=$(py "','.join('%.4f' % x for x in d['train']['losses'])")
[ -n "$want" ] && [ "$want" = "$got" ] && ok "resume: steps 4-6 after the restart have the uninterrupted run's losses" || \
    bad "resumed losses" "want $want" "got  $got"
rows=$(sqlite3 "$T/resume.db" "SELECT group_concat(step) FROM (SELECT step FROM steps JOIN runs ON runs.id = steps.run_id
    WHERE runs.kind = 'train' ORDER BY step)" 2>&1)
[ "$rows" = "1,2,3,4,5,6" ] && ok "resume: one row per step 1-6, numbered by the program's own count" || \
    bad "resume rows" "$rows"
[ "$(py "all(abs(x['gap']) <= 0.02 for x in d['train']['devices'])")" = True ] && \
    ok "resume: after the restart every peak within 2% of the new plan ($(py "[round(100*x['gap'],2) for x in d['train']['devices']]")%)" || \
    bad "resume: peaks after the restart" "$(py "[x['gap'] for x in d['train']['devices']]")"
# the same checkpoint saved atomically (to PATH.tmp, renamed over PATH with
# os.replace): in the diagnostic passes the rename is of memsplit's own files
# (before, it failed: the file it renamed was never written), and doctor
# hears PATH saved, so it knows the restart resumed from it
rm -f "$T/resume.pt" "$T/resume.pt.tmp"
check "resume --atomic: doctor restarts after the rerun runs out" 0 \
    "saved after step 3: it resumed there, no finished step lost" -- "$M" doctor --gpus 2 --gpu-mem "$capr" --json \
    -- "${PR[@]}" --resume "$T/resume.pt" --atomic --grow-at 4 --grow-mb "$grow"
got=$(py "','.join('%.4f' % x for x in d['train']['losses'])")
grep -q "the trial does not write the program's checkpoints: os.replace to $T/resume.pt went to a file of memsplit's own" \
    "$T/err" && [ "$want" = "$got" ] && [ -s "$T/resume.pt" ] && [ ! -e "$T/resume.pt.tmp" ] && \
    ok "resume --atomic: the trial renamed its own files; steps 4-6 after the restart have the uninterrupted run's losses" || \
    bad "resume --atomic: losses $got (want $want)" "$(grep -iE "checkpoint|Error" "$T/err" | tail -3)" "$(ls "$T"/resume.pt*)"
# gradient clipping over the split model's parameters, in the optimizer
# phase: the same losses, the norm's temporaries counted where they are
PC=("$PY" "$MODELS" "${REF_V[@]}" --clip 0.5)
"${PC[@]}" > "$T/clip.out" 2>&1
check "clip: profile" 0 "" -- "$M" profile --quiet --json -- "${PC[@]}"
capc=$(py "int(d['peak_bytes'] * 0.6)")
check "clip: doctor" 0 "" -- "$M" doctor --gpus 2 --gpu-mem "$capc" --db "$T/clip.db" --json -- "${PC[@]}"
got=$(py "','.join('%.4f' % x for x in d['train']['losses'])")
if [ "$got" = "$(losses_of "$T/clip.out")" ] && [ "$(py "all(abs(x['gap']) <= 0.02 for x in d['train']['devices'])")" = True ]; then
    ok "clip: split losses equal the unsplit run's, peaks within 2% ($(py "[round(100*x['gap'],2) for x in d['train']['devices']]")%)"
else bad "clip" "split $got" "plain $(losses_of "$T/clip.out")" "$(py "[x['gap'] for x in d['train']['devices']]")"; fi
# refusals, each with its fix
check "plan for another program" 1 "another program" -- "$M" train --plan "$T/plan.json" -- "$PY" "$MODELS" --model seq --blocks 6
check "built-in model's plan" 1 "built-in model" -- "$M" train --plan "$T/builtin.json" -- "${P6[@]}"
"$PY" -c "import json; d=json.load(open('$T/plan.json')); d['devices'][0]['device']='cuda:0'; d['devices'][1]['device']='cuda:1'; json.dump(d, open('$T/gpus.json','w'))"
if [ -z "$(ls /dev/nvidia0 2>/dev/null)" ]; then
    check "more stages than GPUs" 1 "this machine has 0" -- "$M" train --plan "$T/gpus.json" -- "${P6[@]}"
fi
check "DDP over a split model" 1 "DistributedDataParallel.*devices=1" -- "$M" train --plan "$T/plan.json" -- \
    "$PY" "$HERE/ddp_wrap.py"
PL=("$PY" "$MODELS" --model leak --blocks 4 --steps 3)
check "leak profile" 0 "" -- "$M" profile --quiet --json --db "$T/leak.db" -- "${PL[@]}"
# its record pass runs every layer as a stage, so the module that moves tensors itself is refused
# there: no record, the profile says why, and a plan uses the stage rules (docs/program-record.md)
[ "$(py "d['program']['record']['made'] is False and 'without the boundary copy' in d['program']['record']['why'] and d.get('record') is None")" = True ] && \
    ok "leak: no record (the record pass was refused), and the profile says why" || bad "leak record" "$(py "d['program'].get('record')")"
capl=$(py "int(d['peak_bytes'] * 0.75)")
check "leak plan" 0 "" -- "$M" plan --db "$T/leak.db" --gpus 2 --gpu-mem "$capl" --devices cpu,cpu -o "$T/leak.json"
check "a module moving tensors across stages" 2 "without the boundary copy" -- \
    "$M" train --plan "$T/leak.json" -- "${PL[@]}"
check "a module moving tensors across stages, the real primitive" 2 "without the boundary copy" -- \
    env MEMSPLIT_BRIDGE_TEST_PRIMITIVE=to "$M" train --plan "$T/leak.json" -- "${PL[@]}"
# the ledger must catch a left-out boundary copy: the split tests above mean
# something only because this fails
check "boundary copy left out (test knob)" 2 "without the boundary copy" -- \
    env MEMSPLIT_BRIDGE_TEST_SKIP_COPY=1 "$M" train --plan "$T/plan.json" -- "${P6[@]}"

# a model that is one module (a bare Linear): its own unit, named "." (the root), profiled and
# diagnosed all the same; an empty name would not travel, and the program was refused for it
printf '%s\n' 'import torch' 'm = torch.nn.Linear(64, 64); opt = torch.optim.SGD(m.parameters(), lr=0.1)' \
    'for _ in range(3):' '    opt.zero_grad(); m(torch.randn(8, 64)).pow(2).mean().backward(); opt.step()' > "$T/one.py"
check "one module: profile" 0 "" -- "$M" profile --json -- "$PY" "$T/one.py"
[ "$(py "[(r['name'], r['param'], r['source']) for r in d['layers'] if r['param']] == [('.', 64 * 65 * 4, 'full')]")" = True ] && \
    ok "one module: its own unit, named '.', its parameters measured there" || bad "one module: rows" "$(py "d['layers']")"
cap1=$(py "int(d['peak_bytes'] * 0.6)")
check "one module: diagnosed under 60% of its peak" 3 "OUT OF MEMORY" -- "$M" profile --json --gpu-mem "$cap1" -- "$PY" "$T/one.py"

# an OOM the program catches and goes on after (as cuDNN does, refused a workspace): not where it
# ran out; a step that ends after it was survived, and the last OOM is the one it died of
printf '%s\n' 'import sys, torch' 'die = int(sys.argv[1])' \
    'class M(torch.nn.Module):' \
    '    def __init__(s):' '        super().__init__(); s.a = torch.nn.Linear(64, 64); s.b = torch.nn.Linear(64, 64); s.n = 0' \
    '    def forward(s, x):' '        h = s.a(x); s.n += 1' \
    '        if s.n == die: torch.empty(1 << 28, dtype=torch.uint8) + 1' \
    '        try: w = torch.empty(1 << 28, dtype=torch.uint8) + 1' \
    '        except torch.cuda.OutOfMemoryError: w = None' \
    '        return s.b(h)' \
    'm = M(); opt = torch.optim.SGD(m.parameters(), lr=0.1)' \
    'for _ in range(3):' '    opt.zero_grad(); m(torch.randn(8, 64)).pow(2).mean().backward(); opt.step()' > "$T/caught.py"
check "a caught OOM: the program went on and fits" 0 "" -- "$M" profile --json --no-record-pass --gpu-mem 64MiB \
    --db "$T/caught.db" -- "$PY" "$T/caught.py" 0
[ "$(py "d['fits'] and not d.get('oom') and 'caught an out-of-memory (268435456 bytes asked in M) and went on' in d['program']['warnings']")" = True ] && \
    ok "a caught OOM: no OOM, and a warning names it" || bad "a caught OOM" "$(py "d['fits'], d.get('oom'), d['program']['warnings']")"
n=$("$PY" -c "import sqlite3; print(sqlite3.connect('$T/caught.db').execute('SELECT notes FROM runs').fetchone()[0])" 2>&1)
case "$n" in *"warnings: oom: the program caught an out-of-memory"*) ok "a caught OOM: the run's notes in the database keep the warning";;
    *) bad "a caught OOM: the run's notes" "$n";; esac
check "a caught OOM, then one in step 2" 3 "step 2" -- "$M" profile --json --no-record-pass --no-second-pass --gpu-mem 64MiB -- \
    "$PY" "$T/caught.py" 2
[ "$(py "d['oom']['step'] == 2 and d['oom']['requested_bytes'] == 1 << 28 and d['oom']['what'].startswith('M') and 'own code' in d['oom']['what'] and 'caught an out-of-memory' in d['program']['warnings']")" = True ] && \
    ok "a caught OOM, then one in step 2: the diagnosis is step 2's, in the model's own code" || bad "caught, then died" "$(py "d['oom'], d['program']['warnings']")"

# CUDA refusing memory outside the caching allocator (cuBLAS creating a thread's handle on a
# nearly full device: CUBLAS_STATUS_ALLOC_FAILED), which no allocator observer sees: an OOM
# where the program was (the innermost module of the traceback), the bytes it asked for not known
printf '%s\n' 'import torch' \
    'class Boom(torch.nn.Module):' \
    '    def __init__(s):' '        super().__init__(); s.l = torch.nn.Linear(32, 32); s.n = 0' \
    '    def forward(s, x):' '        s.n += 1' \
    '        if s.n == 2: raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)")' \
    '        return s.l(x)' \
    'm = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(32, 32), Boom()),' \
    '                        torch.nn.Linear(32, 4))' \
    'opt = torch.optim.SGD(m.parameters(), lr=0.1)' \
    'for _ in range(3):' '    opt.zero_grad(); m(torch.randn(8, 32)).pow(2).mean().backward(); opt.step()' > "$T/driver.py"
check "CUDA out of memory outside the allocator: diagnosed" 3 "the bytes it asked for are not known" -- \
    "$M" profile --json --no-record-pass --no-second-pass -- "$PY" "$T/driver.py"
[ "$(py "(d['oom']['step'], d['oom']['phase'], d['oom']['what'], d['oom']['requested_bytes']) == (2, 'forward', '2.1 (Boom)', 0) and 'outside PyTorch' in d['program']['warnings'] and 'CUBLAS_STATUS_ALLOC_FAILED' in d['program']['warnings']")" = True ] && \
    ok "CUDA out of memory outside the allocator: step 2, the module raising, bytes not known, the error in a warning" || \
    bad "CUDA out of memory outside the allocator" "$(py "d.get('oom'), d['program']['warnings']")"

echo "bridge: $pass passed, $fail failed"
[ $fail -eq 0 ]
