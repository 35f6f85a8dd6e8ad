#!/usr/bin/env bash
# run.sh — the multi-process tests on the CPU backend: the pipeline as MPI
# ranks (build/tests/mpi_ranks under mpirun with 2, 4 and 6 ranks), then the
# command line under mpirun. Needs $MEMSPLIT (build/memsplit; memsplit-rank
# and tests/mpi_ranks are found beside it). Ranks oversubscribe the cores
# (CI has 2); as root, mpirun needs --allow-run-as-root.
set -u
M=${MEMSPLIT:?set MEMSPLIT to the memsplit binary}
B=$(dirname "$M")
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
# Under make sanitize: OpenMPI's own allocations (MPI_Init, its plugins) are
# reported as leaks at exit, none of them memsplit's; leak detection is off
# for these runs only (ASan's and UBSan's other checks stay on, and the unit
# and cli tests check memsplit's code for leaks).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
if ! command -v mpirun >/dev/null; then echo "mpi: mpirun not found (scripts/deps.sh installs openmpi-bin)"; exit 1; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; fail=$((fail+1)); }
for n in 2 4 6; do
    if timeout 300 $MPIRUN -np $n "$B/tests/mpi_ranks" >"$T/ranks$n" 2>&1; then ok "pipeline as $n ranks"; else bad "pipeline as $n ranks"; fi
    grep -E "^(ok|rank|ranks)" "$T/ranks$n" | sed 's/^/  | /' | head -20
done

# the command line: mpirun memsplit train --plan, against one device
if ldd "$M" | grep -q libmpi; then bad "memsplit needs libmpi to start"; else ok "memsplit starts without libmpi (MPI is memsplit-rank's)"; fi
TINY="--model tiny --layers 4 --seq 32 --d-model 32 --heads 4 --vocab 256"
plan() { python3 "$(dirname "$0")/make_plan.py" "$T/$1.json" $TINY "${@:2}"; }
plan p2x1 --stages 2 --replicas 1 --micro-batch 2 --n-micro 4 --schedule gpipe
plan p1x2 --stages 1 --replicas 2 --micro-batch 2 --n-micro 4 --zero
plan p2x2 --stages 2 --replicas 2 --micro-batch 2 --n-micro 4 --zero
plan p3x2 --stages 3 --replicas 2 --micro-batch 2 --n-micro 4 --recompute
"$M" train --preset tiny --batch 2 --set train.accum=4 --steps 4 --json >"$T/one.json" 2>/dev/null
same_losses() { # name file: its losses equal one device's (1e-5 relative)
    if python3 - "$T/one.json" "$2" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["losses"]; b = json.load(open(sys.argv[2]))["losses"]
sys.exit(0 if len(a) == len(b) == 4 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)
PY
    then ok "$1: losses equal one device's"; else bad "$1: losses"; head -c 300 "$2"; fi
}
for lay in 2x1:2 1x2:2 2x2:4 3x2:6; do
    n=${lay#*:}; l=${lay%:*}
    if $MPIRUN -np $n "$M" train --preset tiny --plan "$T/p$l.json" --device cpu --steps 4 --json --db "$T/r$l.db" \
        >"$T/r$l.json" 2>"$T/r$l.err"; then same_losses "mpirun -np $n memsplit train --plan ($l)" "$T/r$l.json"
    else bad "mpirun -np $n train ($l)"; tail -5 "$T/r$l.err"; fi
done
# rank 0 wrote every step once and every rank's peak
if [ "$(sqlite3 "$T/r2x2.db" 'select count(*), count(distinct step) from steps; select count(*) from device_peaks')" = "$(printf '4|4\n4')" ]
then ok "rank 0 recorded 4 steps and the 4 ranks' peaks"; else bad "database of a 4-rank run"; fi
# hold_lock DB PID: once the ranks' run (run 2) has a step row, hold DB's write lock until PID ends
hold_lock() {
    python3 - "$1" "$2" <<'PY'
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None); pid = int(sys.argv[2])
def running(pid):
    try: return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError: return False
t0 = time.time()
while c.execute("SELECT count(*) FROM steps WHERE run_id = 2").fetchone()[0] < 1 and time.time() - t0 < 120:
    time.sleep(0.005)
c.execute("BEGIN IMMEDIATE")
while running(pid): time.sleep(0.01)
c.execute("COMMIT")
PY
}
# rank 0's rows wait for a busy database as memsplit train's do (cli/steplog): a
# lock held past the run is an error the user sees (exit 2), never a lost row
$MPIRUN -np 2 "$M" train --preset tiny --plan "$T/p2x1.json" --device cpu --steps 2 --db-timeout x >/dev/null 2>"$T/dbt.err"
rc=$?; if [ $rc -eq 1 ] && grep -q "db-timeout: .x. is not a number of seconds" "$T/dbt.err"; then ok "--db-timeout x refused"; else bad "--db-timeout x (exit $rc)"; fi
"$M" train --preset tiny --steps 1 --db "$T/busy.db" --quiet 2>/dev/null
$MPIRUN -np 2 "$M" train --preset tiny --plan "$T/p2x1.json" --device cpu --steps 30 --db "$T/busy.db" --db-timeout 1 \
    >/dev/null 2>"$T/busy.err" &
pid=$!
hold_lock "$T/busy.db" $pid
wait $pid; rc=$?
if [ $rc -eq 2 ] && grep -q "could not be written to the database" "$T/busy.err"; then
    ok "a lock held past a 2-rank run: exit 2, the unwritten step rows said"
else bad "a lock held past a 2-rank run (exit $rc)"; tail -3 "$T/busy.err"; fi
# a checkpoint no rank can write (its folder's parent is a file): every rank agrees, and
# none aborts before rank 0 has written the step rows still waiting for a busy database
# and marked the run failed (the lock is let go once rank 0 says why it stops)
"$M" train --preset tiny --steps 1 --db "$T/ckfail.db" --quiet 2>/dev/null
: >"$T/afile"
$MPIRUN -np 2 "$M" train --preset tiny --plan "$T/p2x1.json" --device cpu --steps 30 --db "$T/ckfail.db" --db-timeout 5 \
    --checkpoint-dir "$T/afile/ck" --checkpoint-every 4 >/dev/null 2>"$T/ckfail.err" &
pid=$!
python3 - "$T/ckfail.db" "$T/ckfail.err" $pid <<'PY'
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None); err, pid = sys.argv[2], int(sys.argv[3])
def running(pid):
    try: return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError: return False
t0 = time.time()  # hold the write lock from the run's first step row until rank 0 says it stops
while c.execute("SELECT count(*) FROM steps WHERE run_id = 2").fetchone()[0] < 1 and time.time() - t0 < 120:
    time.sleep(0.005)
c.execute("BEGIN IMMEDIATE")
while running(pid) and "rank 0 (" not in open(err).read() and time.time() - t0 < 120: time.sleep(0.005)
c.execute("COMMIT")
PY
wait $pid; rc=$?
got=$(sqlite3 "$T/ckfail.db" "select count(*), min(step), max(step) from steps where run_id = 2; select status from runs where id = 2")
if [ $rc -eq 2 ] && [ "$got" = "$(printf '4|1|4\nfailed')" ] && grep -q "rank 0 .*checkpoint: cannot create" "$T/ckfail.err" &&
   grep -q "rank 1 .*checkpoint: rank 0 could not create" "$T/ckfail.err"; then
    ok "a checkpoint no rank can write: exit 2, rows 1..4 written after the lock, the run failed"
else bad "a checkpoint no rank can write (exit $rc, rows and status: $got)"; tail -4 "$T/ckfail.err"; fi
# a rank failing alone (rank 1's device too small for the step): rank 0 waits on it inside
# the step and dies by its abort, so rank 1 records the run's end itself ("oom", never "running")
python3 - "$T/p2x1.json" "$T/small1.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["devices"][1]["capacity_bytes"] = 200000; json.dump(p, open(sys.argv[2], "w"))
PY
"$M" train --preset tiny --steps 1 --db "$T/lone.db" --quiet 2>/dev/null
$MPIRUN -np 2 "$M" train --preset tiny --plan "$T/small1.json" --device cpu --steps 3 --db "$T/lone.db" >/dev/null 2>"$T/lone.err"
rc=$?; st=$(sqlite3 "$T/lone.db" "select status from runs where id = 2")
if [ $rc -eq 3 ] && [ "$st" = oom ] && grep -q "rank 1 (stage 1, replica 0, cpu/v1): out of memory" "$T/lone.err"; then
    ok "rank 1 out of memory alone: exit 3, and it recorded the run as oom before the abort"
else bad "a rank failing alone (exit $rc, run status '$st')"; grep "memsplit train" "$T/lone.err" | tail -3; fi
# a rank failing alone while rank 0's step rows wait for a busy database: rank 0 dies by
# the abort with them, so the failing rank counts the rows the database holds and says how
# many of the run's steps it lost (exit 2), and the count is the database's
"$M" train --preset tiny --steps 1 --db "$T/lost.db" --quiet 2>/dev/null
$MPIRUN -np 2 "$M" train --preset tiny --plan "$T/p2x1.json" --device cpu --steps 80 --db "$T/lost.db" --db-timeout 1 \
    --inject-fail 60:1 --quiet >/dev/null 2>"$T/lost.err" &
pid=$!
hold_lock "$T/lost.db" $pid
wait $pid; rc=$?
held=$(sqlite3 "$T/lost.db" "select count(*) from steps where run_id = 2")
if [ $rc -eq 2 ] && grep -q "rank 1 (stage 1, replica 0, cpu/v1): step: injected" "$T/lost.err" &&
   grep -q "rank 1 failed alone after step 59; the database holds $held of the 59 step rows of steps 1..59, and the other $((59 - held)), still waiting in rank 0" "$T/lost.err" &&
   [ "$held" -ge 1 ] && [ "$held" -lt 59 ]; then
    ok "rank 1 failing alone while rank 0's rows wait: exit 2, the $((59 - held)) rows lost with rank 0 said"
else bad "a rank failing alone while rows wait (exit $rc, $held rows)"; grep "memsplit train" "$T/lost.err" | tail -4; fi
$MPIRUN -np 2 "$M" train --preset tiny --plan "$T/p2x1.json" --device cpu --steps 2 --inject-fail 0:1 >/dev/null 2>"$T/if.err"
rc=$?; if [ $rc -eq 1 ] && grep -q "inject-fail takes STEP:RANK" "$T/if.err"; then ok "--inject-fail 0:1 refused"; else bad "--inject-fail 0:1 (exit $rc)"; fi
# a plan of replicas made by memsplit plan itself: every rank's measured peak against the
# prediction (the optimizer state a ZeRO-1 chunk, exactly)
"$M" profile --preset seed17-cpu --precision fp32 --db "$T/s17.db" --quiet >/dev/null 2>&1
"$M" plan --db "$T/s17.db" --gpus 4 --gpu-mem 20MiB --replicas 2 --zero on -o "$T/s17.json" >/dev/null 2>&1
if $MPIRUN -np 4 "$M" train --preset seed17-cpu --precision fp32 --plan "$T/s17.json" --device cpu --steps 2 --json \
    >"$T/s17r.json" 2>"$T/s17r.err" && python3 - "$T/s17r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ok = d["stages"] == 2 and d["replicas"] == 2 and d["zero"] and len(d["devices"]) == 4
for x in d["devices"]:
    print("  | rank %d: predicted %d, measured %d (gap %.2f%%), optim %d = %d" % (x["rank"], x["predicted_peak_bytes"],
          x["measured_peak_bytes"], 100 * x["gap"], x["predicted_by_category"]["optim"], x["measured_by_category"]["optim"]))
    ok = ok and abs(x["gap"]) <= 0.02 and x["predicted_by_category"]["optim"] == x["measured_by_category"]["optim"]
sys.exit(0 if ok else 1)
PY
then ok "a 2x2 ZeRO-1 plan from memsplit plan: measured within 2% of predicted"; else bad "2x2 ZeRO-1 plan from memsplit plan"; tail -3 "$T/s17r.err"; fi
# checkpoints across layouts from the command line: 2x2 ranks -> one process -> 3x2 ranks
if $MPIRUN -np 4 "$M" train --preset tiny --plan "$T/p2x2.json" --device cpu --steps 2 --checkpoint-dir "$T/ck" --quiet 2>"$T/ck.err" &&
   [ -f "$T/ck/step-00000002.ckpt/manifest.json" ] &&
   "$M" train --preset tiny --batch 2 --set train.accum=4 --steps 3 --checkpoint-dir "$T/ck" --resume --json >"$T/ck1.json" 2>/dev/null &&
   $MPIRUN -np 6 "$M" train --preset tiny --plan "$T/p3x2.json" --device cpu --steps 4 --checkpoint-dir "$T/ck" --resume \
       --json >"$T/ck2.json" 2>"$T/ck.err" && python3 - "$T/one.json" "$T/ck1.json" "$T/ck2.json" <<'PY'
import json, sys
one, a, b = (json.load(open(f))["losses"] for f in sys.argv[1:])
ok = len(a) == 1 and len(b) == 1 and abs(a[0] - one[2]) <= 1e-5 * one[2] and abs(b[0] - one[3]) <= 1e-5 * one[3]
print("  | steps 3 (one process) and 4 (3x2 ranks):", a, b, "one device:", one[2:])
sys.exit(0 if ok else 1)
PY
then ok "a 2x2 checkpoint resumed by one process, whose checkpoint 3x2 ranks resume: the losses of one device"
else bad "checkpoints across layouts (command line)"; tail -3 "$T/ck.err"; fi
# a rank killed mid-step (SIGKILL): doctor, mpirun's parent, re-plans without its device and resumes
if "$M" doctor --preset seed17-cpu --precision fp32 --device cpu --gpus 4 --gpu-mem 20MiB --steps 6 --checkpoint-every 2 \
    --replicas any --launch "$MPIRUN" --inject-kill 4:1 --db "$T/kill.db" --json >"$T/kill.json" 2>"$T/kill.err"; then
    mb=$(python3 -c "import json; d=json.load(open('$T/kill.json'))['plan']; print(d['micro_batch'], d['n_micro'])")
    "$M" train --preset seed17-cpu --precision fp32 --gpu-mem 0 --batch ${mb% *} --set train.accum=${mb#* } --steps 6 \
        --json >"$T/kill_ref.json" 2>/dev/null
    if python3 - "$T/kill.json" "$T/kill_ref.json" "$T/kill.db" <<'PY'
import json, sqlite3, sys
t = json.load(open(sys.argv[1]))["train"]; ref = json.load(open(sys.argv[2]))["losses"]
db = sqlite3.connect(sys.argv[3])
rows = db.execute("select count(*), count(distinct step), min(step), max(step) from steps").fetchone()
rec = db.execute("select step, resumed_step, reason from recovery_events").fetchall()
print("  | recovered:", [round(x, 6) for x in t["losses"]]); print("  | reference:", [round(x, 6) for x in ref])
print("  | step rows (count, distinct, first, last):", rows, "recoveries:", rec)
ok = (t["recoveries"] == 1 and t["steps"] == 6 and len(t["losses"]) == 6 and rows == (6, 6, 1, 6)
      and len(rec) == 1 and rec[0][0] == 4 and rec[0][1] == 2 and "rank 1" in rec[0][2]
      and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(t["losses"], ref)))
sys.exit(0 if ok else 1)
PY
    then ok "rank 1 killed in step 4: re-planned without its device, resumed from step 2, losses of one device, no step row doubled"
    else bad "recovery from a killed rank"; fi
else bad "doctor --launch with a killed rank"; grep -E "doctor|died|error" "$T/kill.err" | tail -5; fi
# ---- issue 38: ranks of one launch that disagree (an MPMD launch: another plan,
# split, --steps, model shape or seed on one rank) all refuse before anything
# runs, exit 1, naming the rank and both values; nothing hangs, no run is left
# "running" (before: a crash in the transport, a hang, or wrong training, exit 0)
plan pmb --stages 2 --replicas 1 --micro-batch 1 --n-micro 8 --schedule gpipe
python3 - "$T/p2x1.json" "$T/psplit.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p["stages"][0]["layers"] = [0, 0]; p["stages"][1]["layers"] = [1, 3]
json.dump(p, open(sys.argv[2], "w"))
PY
mpmd() { # name pattern 'rank 0 args' 'rank 1 args': exit 1 on every rank, the pattern said, in time
    local name=$1 pat=$2
    "$M" train --preset tiny --steps 1 --db "$T/mpmd.db" --quiet 2>/dev/null
    timeout 120 $MPIRUN -np 1 "$M" train --preset tiny --device cpu --db "$T/mpmd.db" $3 \
        : -np 1 "$M" train --preset tiny --device cpu --db "$T/mpmd.db" $4 >/dev/null 2>"$T/mpmd.err"
    local rc=$? runs; runs=$(sqlite3 "$T/mpmd.db" "select count(*) from runs where status = 'running'")
    if [ $rc = 1 ] && grep -q -- "$pat" "$T/mpmd.err" && [ "$runs" = 0 ]; then ok "$name"
    else bad "$name (exit $rc, $runs runs left running)"; grep "memsplit" "$T/mpmd.err" | head -3; fi
}
mpmd "MPMD: micro-batches 2x4 against 1x8 refused" \
    "rank 1 runs another job than rank 0 (fingerprint [0-9a-f]* on rank 0, [0-9a-f]* on rank 1): plan.micro_batch is 2 on rank 0, 1 on rank 1" \
    "--plan $T/p2x1.json --steps 2" "--plan $T/pmb.json --steps 2"
mpmd "MPMD: other split points refused" "plan.stages\[0\].layers\[1\] is 1 on rank 0, 0 on rank 1" \
    "--plan $T/p2x1.json --steps 2" "--plan $T/psplit.json --steps 2"
mpmd "MPMD: --steps 3 against --steps 6 refused" "train.steps is 3 on rank 0, 6 on rank 1" \
    "--plan $T/p2x1.json --steps 3" "--plan $T/p2x1.json --steps 6"
mpmd "MPMD: another model.d_model on one rank refused" \
    "rank 1: the plan is for a model with d_model 32; this run's model has d_model 64" \
    "--plan $T/p2x1.json --steps 2" "--plan $T/p2x1.json --steps 2 --set model.d_model=64"
mpmd "MPMD: another train.seed on one rank refused" "train.seed is 1337 on rank 0, 7 on rank 1" \
    "--plan $T/p2x1.json --steps 2" "--plan $T/p2x1.json --steps 2 --set train.seed=7"
mpmd "MPMD: another --checkpoint-every on one rank refused" "rank.checkpoint_every is 1 on rank 0, 2 on rank 1" \
    "--plan $T/p2x1.json --steps 2 --checkpoint-dir $T/mpmd.ck --checkpoint-every 1" \
    "--plan $T/p2x1.json --steps 2 --checkpoint-dir $T/mpmd.ck --checkpoint-every 2"
mpmd "MPMD: a flag one rank refuses stops them all" "rank 1: --checkpoint-every needs N >= 0" \
    "--plan $T/p2x1.json --steps 2" "--plan $T/p2x1.json --steps 2 --checkpoint-every -3"
# ---- issue 38: signals and deaths under doctor --launch. A signal to doctor
# stops the launcher and every rank after one step, checkpointed, recorded
# "interrupted", exit 143 (before: doctor exited, mpirun and the ranks trained
# on); every rank killed is a failure with every death recorded (before: exit
# 3, "oom", one recovery row); a killed launcher is launched again (before:
# exit 2, no recovery)
doc_launch() { # db doctor-args...: doctor --launch in the background, its pid in DOC
    "$M" doctor --preset seed17-cpu --precision fp32 --device cpu --gpus 2 --gpu-mem 20MiB --launch "$MPIRUN" \
        --db "$1" "${@:2}" >/dev/null 2>"$1.err" &
    DOC=$!
}
rows() { sqlite3 "$1" "select count(*) from steps" 2>/dev/null || echo 0; }
wait_rows() { # db n: until the database holds n step rows, or doctor ended (2 minutes at most)
    for _ in $(seq 1200); do [ "$(rows "$1")" -ge "$2" ] 2>/dev/null && return; kill -0 $DOC 2>/dev/null || return; sleep 0.1; done
}
launcher_of() { pgrep -P "$1" -x mpirun; }
doc_launch "$T/sigd.db" --steps 3000 --checkpoint-every 1000
wait_rows "$T/sigd.db" 6
mp=$(launcher_of $DOC); kids=$(pgrep -P "$mp" | tr '\n' ' ')
kill -TERM $DOC; wait $DOC; rc=$?
n1=$(rows "$T/sigd.db"); sleep 3; n2=$(rows "$T/sigd.db")
left=$(for k in $mp $kids; do kill -0 $k 2>/dev/null && echo $k; done | tr '\n' ' ')
st=$(sqlite3 "$T/sigd.db" "select group_concat(status) from runs where kind in ('doctor', 'train')")
ck=$(ls "$T/sigd.db.ckpt/run-4" 2>/dev/null | grep -E '^step-[0-9]+\.ckpt$' | sort | tail -1)
if [ $rc = 143 ] && [ "$st" = interrupted,interrupted ] && [ "$n1" = "$n2" ] && [ -z "$left" ] && [ "$ck" = "$(printf 'step-%08d.ckpt' "$n1")" ]
then ok "SIGTERM to doctor --launch: the launcher and both ranks stop after step $n1, checkpointed, exit 143, interrupted"
else bad "SIGTERM to doctor --launch (exit $rc, runs $st, rows $n1 then $n2, left running: '$left', newest checkpoint $ck)"
     grep -E "memsplit|doctor" "$T/sigd.db.err" | tail -4; for k in $left; do kill -9 $k; done; fi
doc_launch "$T/alld.db" --steps 3000 --checkpoint-every 5
wait_rows "$T/alld.db" 6
mp=$(launcher_of $DOC); kids=$(pgrep -P "$mp" | tr '\n' ' ')
kill -9 $kids; wait $DOC; rc=$?
got=$(sqlite3 "$T/alld.db" "select status from runs where kind = 'train'; select count(*) from recovery_events where reason like 'rank % died: %not recovered%'; select count(*) from runs where notes like '%died%'")
if [ $rc = 2 ] && [ "$got" = "$(printf 'failed\n2\n2')" ] && grep -q "training: 2 ranks died, and no device is left" "$T/alld.db.err"
then ok "every rank killed under doctor --launch: exit 2, failed (not oom), both deaths recorded and noted"
else bad "every rank killed (exit $rc, status/deaths/notes: $(echo $got))"; grep -E "memsplit|doctor" "$T/alld.db.err" | tail -4; fi
doc_launch "$T/mpk.db" --steps 30 --checkpoint-every 5
wait_rows "$T/mpk.db" 8
kill -9 $(launcher_of $DOC); wait $DOC; rc=$?
got=$(sqlite3 "$T/mpk.db" "select count(*), count(distinct step), max(step) from steps; select count(*) from recovery_events where reason like 'the launcher % was killed by signal 9%'; select status from runs where kind = 'train'")
if [ $rc = 0 ] && [ "$got" = "$(printf '30|30|30\n1\nok')" ] && ! pgrep -f "memsplit-rank train .*$T/mpk.db" >/dev/null
then ok "the launcher killed under doctor --launch: its ranks ended, launched again, 30 steps once each"
else bad "the launcher killed (exit $rc, $(echo $got))"; grep -E "memsplit|doctor" "$T/mpk.db.err" | tail -4; fi
refused() { # name pattern command...: exit 1 with the pattern on stderr
    local name=$1 pat=$2; shift 2
    "$@" >/dev/null 2>"$T/refused"; local rc=$?
    if [ $rc = 1 ] && grep -q "$pat" "$T/refused"; then ok "$name"; else bad "$name (exit $rc)"; head -3 "$T/refused"; fi
}
refused "a 2x2 plan launched on 3 ranks" "the plan wants 4 ranks (2 stages x 2 replicas), but the launch started 3" \
    $MPIRUN -np 3 "$M" train --preset tiny --plan "$T/p2x2.json" --steps 1
refused "two ranks claim one GPU" "ranks 0 and 1 both claim GPU cuda:0" \
    $MPIRUN -np 2 "$M" train --preset tiny --plan "$T/p2x1.json" --device cuda:0 --steps 1
refused "one process and a plan of replicas" "run it as mpirun -np 4" "$M" train --preset tiny --plan "$T/p2x2.json" --steps 1
echo "mpi: $pass passed, $fail failed"
[ $fail -eq 0 ]
