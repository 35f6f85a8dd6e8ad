#!/usr/bin/env bash
# run.sh — end-to-end checks of the memsplit command line on the CPU backend:
# exit codes, error messages, --json output. Needs $MEMSPLIT (the binary).
. "$(dirname "$0")/lib.sh"
check "no command" 1 "usage" -- "$M"
check "help" 0 "" -- "$M" --help
check "train help" 0 "" -- "$M" train --help
check "unknown command" 1 "unknown command" -- "$M" frobnicate
check "unknown flag" 1 "" -- "$M" train --preset tiny --frob
check "no preset" 1 "preset" -- "$M" train
check "unknown preset" 1 "preset" -- "$M" train --preset nope
check "unknown key" 1 "unknown key" -- "$M" train --preset tiny --set model.n_layr=3
check "bad value" 1 "n_layer" -- "$M" train --preset tiny --set model.n_layer=abc
check "bad size" 1 "gpu_mem|size" -- "$M" train --preset tiny --gpu-mem 12XB
check "bad device" 1 "device" -- "$M" train --preset tiny --device tpu:0
check "missing config" 1 "" -- "$M" train --config /nonexistent.ini
if [ -z "$(ls /dev/nvidia0 2>/dev/null)" ]; then
    check "cuda without gpu" 2 "no CUDA GPU" -- "$M" train --preset tiny --device cuda:0 --steps 1
fi
check "train json" 0 "" -- "$M" train --preset tiny --steps 5 --json
if [ -s "$T/out" ] && [ "$(json_get "d['steps'] == 5 and d['loss_first'] > d['loss_last'] - 1 and d['tokens_per_s'] > 0 and d['peak_bytes']['cpu'] > 0 and 'param' in d['peak_by_category']")" = True ]; then
    echo "ok   train json fields"; pass=$((pass+1)); else echo "FAIL train json fields"; cat "$T/out" | head -20; fail=$((fail+1)); fi
if [ "$(json_get "d['timed_steps'] == 4 and d['step_ms'] > 0 and d['shape']['n_layer'] == 2 and d['tokens_per_step'] == 4 * 32 and d['kernel_times'] is None")" = True ]; then
    echo "ok   train json: timed steps, step time, shape"; pass=$((pass+1)); else echo "FAIL train json: timed steps, step time, shape"; fail=$((fail+1)); fi
# --kernel-times (CUPTI): its checks before any training; the GPU run is the benchmark's
check "kernel times need cuda" 1 "kernel-times traces CUDA kernels" -- "$M" train --preset tiny --steps 5 --kernel-times "$T/kt.json"
check "kernel steps vs steps" 1 "needs at least 5 steps" -- "$M" train --preset tiny --device cuda:0 --steps 4 --kernel-times "$T/kt.json" --kernel-steps 4
check "kernel steps range" 1 "kernel-steps" -- "$M" train --preset tiny --device cuda:0 --kernel-times "$T/kt.json" --kernel-steps 0
check "kernel times with a plan" 1 "one device" -- "$M" train --preset tiny --plan "$T/none.json" --kernel-times "$T/kt.json"
if [ -z "$(ls /dev/nvidia0 2>/dev/null)" ]; then
    check "kernel times without gpu" 2 "no CUDA GPU" -- "$M" train --preset tiny --device cuda:0 --steps 4 --kernel-times "$T/kt.json"
    verdict "... the file says why there are no times" -- python3 -c "import json; d=json.load(open('$T/kt.json')); assert 'before a traced step' in d['error'] and d['traced_steps'] == 0, d"
fi
check "oom exit" 3 "out of memory.*block" -- "$M" train --preset tiny --steps 1 --gpu-mem 200KiB
check "resume without dir" 1 "checkpoint-dir" -- "$M" train --preset tiny --resume
mkdir -p "$T/ck"
check "checkpoint" 0 "checkpoint" -- "$M" train --preset tiny --steps 2 --checkpoint-dir "$T/ck"
printf 'garbage' > "$T/ck/step-00000099.ckpt"
# a corrupt newest checkpoint does not block --resume: the one before it is used
check "corrupt newest checkpoint" 0 "skipped .*step-00000099" -- "$M" train --preset tiny --steps 4 --checkpoint-dir "$T/ck" --resume
verdict "... and the one before it is resumed" -- grep -q "resumed from .*step-00000002.ckpt at step 2" "$T/err"
mkdir -p "$T/ck-bad"; printf 'garbage' > "$T/ck-bad/step-00000003.ckpt"
check "only corrupt checkpoints" 2 "no sound checkpoint" -- "$M" train --preset tiny --steps 4 --checkpoint-dir "$T/ck-bad" --resume
# a single-device run recorded in a database, shown in the report
check "train --db" 0 "" -- "$M" train --preset tiny --steps 3 --db "$T/train.db" --quiet
check "report train" 0 "" -- "$M" report --db "$T/train.db"
if grep -q "3 recorded" "$T/out" && grep -q "unlimited" "$T/out"; then echo "ok   report shows the recorded steps"; pass=$((pass+1)); else echo "FAIL report of a train run"; fail=$((fail+1)); fi
# profile: diagnosis, database, report
check "profile seed17-cpu" 3 "forward pass of block 17" -- "$M" profile --preset seed17-cpu --db "$T/runs.db" --json
if [ "$(json_get "d['fits'] == False and d['oom']['layer'] == 17 and d['oom']['phase'] == 'forward' and d['oom']['step'] == 1 and len(d['layers']) == 22")" = True ]; then
    echo "ok   profile json contract"; pass=$((pass+1)); else echo "FAIL profile json contract"; head -c 600 "$T/out"; fail=$((fail+1)); fi
check "profile fits" 0 "" -- "$M" profile --preset tiny --db "$T/runs.db"
check "report" 0 "" -- "$M" report --db "$T/runs.db"
check "report missing db" 2 "" -- "$M" report --db "$T/none.db"
check "profile bad batch" 1 "batch" -- "$M" profile --preset tiny --batch 4,4
# plan from the recorded profile
check "plan help" 0 "" -- "$M" plan --help
check "plan from db" 0 "" -- "$M" plan --db "$T/runs.db" --run 1 --gpus 2 --gpu-mem 20MiB --json
if [ "$(json_get "len(d['stages']) >= 2 and d['stages'][0]['layers'][0] == 0 and d['stages'][-1]['layers'][1] == 21")" = True ]; then
    echo "ok   plan json covers the layers"; pass=$((pass+1)); else echo "FAIL plan json"; head -c 600 "$T/out"; fail=$((fail+1)); fi
check "plan infeasible" 3 "fit" -- "$M" plan --db "$T/runs.db" --run 1 --gpus 1 --gpu-mem 2MiB
check "plan bad gpus" 1 "" -- "$M" plan --db "$T/runs.db" --run 1 --gpus 2 --gpu-mem 1GiB,2GiB,3GiB
# doctor: trial -> diagnosis -> plan -> training with the plan, on two emulated devices
check "doctor" 0 "" -- "$M" doctor --preset seed17-cpu --precision fp32 --device cpu --gpus 2 --gpu-mem 20MiB --steps 6 --db "$T/doc.db" --json
if [ "$(json_get "d['trial']['oom']['layer'] == 17 and len(d['plan']['stages']) == 2 and d['train']['steps'] == 6 and len(d['train']['devices']) == 2 and all(abs(x['gap']) <= 0.02 for x in d['train']['devices']) and d['train']['loss_last'] < d['train']['loss_first']")" = True ]; then
    echo "ok   doctor json: oom at 17, 2 stages, measured within 2% of predicted"; pass=$((pass+1)); else echo "FAIL doctor json"; head -c 800 "$T/out"; fail=$((fail+1)); fi
cp "$T/out" "$T/doctor.json"
check "report doctor" 0 "" -- "$M" report --db "$T/doc.db"
check "doctor bad headroom" 1 "not a fraction" -- "$M" doctor --preset tiny --device cpu --gpus 2 --gpu-mem 1GiB --headroom 1.5
check "doctor bad inject" 1 "inject-oom takes" -- "$M" doctor --preset tiny --device cpu --gpus 2 --gpu-mem 1GiB --inject-oom 4:0:150%
# the same shrink written as a share of what device 0's tensors took (what the GPU test uses)
check "doctor recovers (P%)" 0 "OUT OF MEMORY at step 4" -- "$M" doctor --preset seed17-cpu --precision fp32 --device cpu --gpus 2 --gpu-mem 20MiB --steps 5 --checkpoint-every 2 --inject-oom 4:0:90% --headroom 0 --db "$T/rec90.db"
# OOM mid-run: device 0 shrinks at step 4; re-plan, resume from the step-2 checkpoint
check "doctor recovers" 0 "OUT OF MEMORY at step 4" -- "$M" doctor --preset seed17-cpu --precision fp32 --device cpu --gpus 2 --gpu-mem 20MiB --steps 6 --checkpoint-every 2 --inject-oom 4:0:10MiB --db "$T/rec.db" --json
cp "$T/out" "$T/rec.json"
# the recovered losses equal an uninterrupted run of the same micro-batching (every split
# computes the same as one device, so one device is the uninterrupted run of the new plan)
mb=$(python3 -c "import json; d=json.load(open('$T/rec.json')); print(d['plan']['micro_batch'], d['plan']['n_micro'])")
check "uninterrupted reference" 0 "" -- "$M" train --preset seed17-cpu --precision fp32 --gpu-mem 0 --batch ${mb% *} --set train.accum=${mb#* } --steps 6 --json
if python3 - "$T/rec.json" "$T/out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["train"]; u = json.load(open(sys.argv[2]))
a, b = r["losses"], u["losses"]
ok = r["recoveries"] == 1 and len(a) == len(b) == 6 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b))
print("  recovered", [round(x, 6) for x in a]); print("  reference", [round(x, 6) for x in b])
sys.exit(0 if ok else 1)
PY
then echo "ok   recovered losses = uninterrupted losses"; pass=$((pass+1)); else echo "FAIL recovered losses"; fail=$((fail+1)); fi
check "doctor: nothing fits" 3 "fit" -- "$M" doctor --preset seed17-cpu --device cpu --gpus 1 --gpu-mem 6MiB --steps 2 --db "$T/inf.db"
check "doctor no gpu-mem" 1 "gpu-mem" -- "$M" doctor --preset tiny --gpus 2 --db "$T/x.db"
# train --plan on virtual CPU devices; the plan from the profile recorded above
"$M" plan --db "$T/runs.db" --run 1 --gpus 2 --gpu-mem 20MiB -o "$T/plan.json" >/dev/null 2>&1
check "train --plan" 0 "" -- "$M" train --preset seed17-cpu --plan "$T/plan.json" --device cpu --steps 3 --json
if [ "$(json_get "d['steps'] == 3 and len(d['devices']) == 2")" = True ]; then echo "ok   train --plan json"; pass=$((pass+1)); else echo "FAIL train --plan json"; fail=$((fail+1)); fi
check "train --plan wrong model" 1 "plan is for" -- "$M" train --preset tiny --plan "$T/plan.json" --device cpu --steps 1
# a profile killed with SIGKILL at a random moment leaves a sound database
for i in 1 2 3 4 5; do
    "$M" profile --preset seed17-cpu --db "$T/kill.db" --quiet >/dev/null 2>&1 &
    pid=$!
    sleep "0.0$((RANDOM % 9))$((RANDOM % 10))"
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
done
if [ "$(sqlite3 "$T/kill.db" 'PRAGMA integrity_check')" = ok ] && "$M" report --db "$T/kill.db" --list >/dev/null 2>&1; then
    echo "ok   killed profiles leave a sound database"; pass=$((pass+1))
else echo "FAIL killed profiles"; fail=$((fail+1)); fi
echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
