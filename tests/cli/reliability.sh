#!/usr/bin/env bash
# reliability.sh — issue 11's end-to-end checks on the CPU backend: no
# record silently lost, no foreign checkpoint or plan taken, integer flags
# range-checked, one set of limits and exit codes, messages said once, a
# demo that fits one screen, help and docs that match the code.
. "$(dirname "$0")/lib.sh"
sq() { sqlite3 "$1" "$2"; }
shape17=(--preset seed17-cpu --precision fp32 --device cpu --gpus 2 --gpu-mem 20MiB)

# ---- 1. a checkpoint belongs to a job (config, seed, data, global batch)
"$M" train --preset tiny --steps 2 --checkpoint-dir "$T/job" --quiet
check "another seed's checkpoint is refused with both fingerprints" 2 \
    "belongs to another job: its fingerprint is [0-9a-f]{16}, this run's [0-9a-f]{16} \(train.seed is 1337 there, 1 here\)" \
    -- "$M" train --preset tiny --set train.seed=1 --steps 4 --checkpoint-dir "$T/job" --resume
check "another global batch's too" 2 "global batch .* is 4 there, 8 here" \
    -- "$M" train --preset tiny --set train.accum=2 --steps 4 --checkpoint-dir "$T/job" --resume
check "another micro-batching of the same job resumes" 0 "resumed from .*step-00000002" \
    -- "$M" train --preset tiny --batch 2 --set train.accum=2 --steps 3 --checkpoint-dir "$T/job" --resume
# two doctor runs on one database: the second (another seed, an OOM at step 4)
# resumes its own step-2 checkpoint, never the first run's step 6
"$M" doctor "${shape17[@]}" --steps 6 --checkpoint-every 2 --db "$T/two.db" --quiet >/dev/null 2>&1
check "a second doctor on the same database recovers" 0 "OUT OF MEMORY at step 4" \
    -- "$M" doctor "${shape17[@]}" --set train.seed=1 --steps 4 --checkpoint-every 2 --inject-oom 4:0:90% --headroom 0 \
    --db "$T/two.db" --json
cp "$T/err" "$T/two.err"
verdict "... in its own folder, with its 4 steps recorded" -- test \
    "$(json_get "d['train']['steps'] == 4 and d['train']['recoveries'] == 1 and '.ckpt/run-5/' in d['train']['checkpoint']")/$(sq "$T/two.db" 'SELECT count(*) FROM steps WHERE run_id = 8')" = True/4
verdict "... its resume named its own folder" -- grep -q "resumed from .*two.db.ckpt/run-5/step-00000002.ckpt at step 2" "$T/two.err"
# when nothing fits any more: exit 3, the last checkpoint named, and it resumes
check "nothing fits after the OOM" 3 "the last checkpoint, .*run-1/step-00000002.ckpt \(step 2\), is intact" \
    -- "$M" doctor "${shape17[@]}" --gpu-mem 20MiB,14MiB --headroom 0 --steps 4 --checkpoint-every 2 \
    --inject-oom 4:0:2MiB --db "$T/stop.db"
hint=$(grep -A1 "resume it with" "$T/err" | tail -1 | sed "s|^ *memsplit |$M |")
check "... and the named checkpoint resumes (here on one unlimited device)" 0 "resumed from .*step-00000002.ckpt at step 2" \
    -- $hint --gpu-mem 0 --steps 3

# ---- 2. a busy database loses no step row
"$M" train --preset tiny --steps 1 --db "$T/busy.db" --quiet
hold() { # db run seconds [pid]: hold the write lock, once run has a step row,
          # for seconds, or with pid until that process has ended
    python3 - "$@" <<'PY'
import sqlite3, sys, time
db, run, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
pid = int(sys.argv[4]) if len(sys.argv) > 4 else 0
def running(pid):
    try: return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError: return False
c = sqlite3.connect(db, timeout=60, isolation_level=None)
t0 = time.time()
while c.execute("SELECT count(*) FROM steps WHERE run_id = ?", (run,)).fetchone()[0] < 1:
    if time.time() - t0 > 60: sys.exit(1)
    time.sleep(0.005)
c.execute("BEGIN IMMEDIATE")
t0 = time.time()
while time.time() - t0 < hold or (pid and running(pid)):
    time.sleep(0.01)
c.execute("COMMIT")
PY
}
"$M" train --preset tiny --steps 500 --db "$T/busy.db" --db-timeout 1 >/dev/null 2>"$T/busy.err" &
pid=$!; hold "$T/busy.db" 2 2; wait $pid; rc=$?
verdict "a lock held 2 s (timeout 1 s): exit 0, all 500 rows, said so" -- test \
    "$rc/$(sq "$T/busy.db" 'SELECT count(*) FROM steps WHERE run_id = 2')/$(grep -c 'database is busy\|took the steps' "$T/busy.err")" = 0/500/2
"$M" train --preset tiny --steps 150 --db "$T/busy.db" --db-timeout 1 >/dev/null 2>"$T/busy.err" &
pid=$!; hold "$T/busy.db" 3 0 $pid & hpid=$!; wait $pid; rc=$?; wait $hpid
verdict "a lock held past the run: exit 2, the unwritten rows said" -- test \
    "$rc/$(grep -c 'step rows (steps [0-9]*\.\.150) could not be written to the database' "$T/busy.err")" = 2/1

# ---- 3. a step record holds every device: 32 layers on 32 devices of 400 KiB,
# where no device holds two layers
"$M" profile --preset tiny --set model.n_layer=30 --db "$T/t30.db" --quiet >/dev/null
"$M" plan --db "$T/t30.db" --gpus 32 --gpu-mem 400KiB --headroom 0 -o "$T/p32.json" >/dev/null
check "train --plan over 32 devices" 0 "" \
    -- "$M" train --preset tiny --set model.n_layer=30 --plan "$T/p32.json" --device cpu --steps 2 --db "$T/t30.db" --quiet
verdict "... records both steps with 32 peaks each" -- test \
    "$(sq "$T/t30.db" "SELECT step, (SELECT count(*) FROM json_each(peaks_json)) FROM steps WHERE run_id = (SELECT max(id) FROM runs WHERE kind = 'train') ORDER BY step" | tr '\n' ' ')" = "1|32 2|32 "

# ---- 4. a device of no memory: said, not a use after free
"$M" profile --preset seed17-cpu --quiet --json >"$T/p17.json" 2>/dev/null
check "plan --gpu-mem 0" 1 "--gpu-mem '0': a device needs some memory" -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 0
check "plan --gpu-mem 20MiB,0" 1 "--gpu-mem '0': a device needs some memory" -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB,0

# ---- 5. integers never wrap
check "--steps 4294967297" 1 "--steps: 4294967297 is out of range \[0, 2147483647\]" -- "$M" train --preset tiny --steps 4294967297
check "--batch 4294967297" 1 "--batch: 4294967297 is out of range \[1, 1048576\]" -- "$M" train --preset tiny --batch 4294967297
check "--inject-oom 4294967297:0:1MiB" 1 "step: 4294967297 is out of range" \
    -- "$M" doctor --preset tiny --gpus 2 --gpu-mem 1GiB --inject-oom 4294967297:0:1MiB
check "--checkpoint-every 4294967297" 1 "--checkpoint-every: 4294967297 is out of range" \
    -- "$M" train --preset tiny --checkpoint-every 4294967297
check "profile --steps 4294967297" 1 "--steps: 4294967297 is out of range" -- "$M" profile --preset tiny --steps 4294967297

# ---- 6. a plan runs only the model it was made for
"$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB -o "$T/plan.json" >/dev/null
edit() { python3 -c "import json,sys; d=json.load(open('$T/plan.json')); $1; json.dump(d, open('$T/edited.json', 'w'))"; }
edit "d['model']['vocab'] = 512"
check "another vocab" 1 "the plan is for a model with vocab 512; this run's model has vocab 256" \
    -- "$M" train --preset seed17-cpu --plan "$T/edited.json" --device cpu --steps 1
edit "d['model']['name'] = 'gpt2-small'"
check "another model name" 1 "the plan is for model 'gpt2-small'; this run's model is 'seed17-cpu'" \
    -- "$M" train --preset seed17-cpu --plan "$T/edited.json" --device cpu --steps 1
edit "d['devices'][1]['device'] = 'tpu:7'"
check "a bad device name" 1 'devices\[1\].device: "tpu:7" is not a device' \
    -- "$M" train --preset seed17-cpu --plan "$T/edited.json" --device cpu --steps 1
check "plan --devices with a bad name" 1 "--devices: 'gpu0' is not a device" \
    -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB --devices cuda:0,gpu0
# the names the name check must keep accepting: a device repeated for virtual
# devices on it (cuda:0,cuda:0), and cpu (a program's stages on the CPU)
for devs in cuda:0,cuda:0 cpu,cpu; do
    check "plan --devices $devs" 0 "" -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB --devices "$devs" \
        -o "$T/named.json"
    check "train --plan of devices $devs" 0 "" \
        -- "$M" train --preset seed17-cpu --plan "$T/named.json" --device cpu --steps 1 --quiet
done

# ---- 7. a GPU model on a machine with no GPU: a clear error, at once
if [ -z "$(ls /dev/nvidia0 2>/dev/null)" ]; then
    check "doctor --preset seed17 without a GPU" 2 "no CUDA GPU here, and seed17 runs on cuda:0" \
        -- timeout 60 "$M" doctor --preset seed17 --gpus 2 --gpu-mem 40GiB --db "$T/nogpu.db"
fi

# ---- 9. reports read a read-only database in a read-only folder
R=$(mktemp -d); chmod 755 "$R"; cp "$T/busy.db" "$R/ro.db"; chmod 444 "$R/ro.db"; chmod 555 "$R"
as_user=(); [ "$(id -u)" = 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if [ "$(id -u)" != 0 ] || command -v setpriv >/dev/null; then
    check "report of a read-only database" 0 "" -- "${as_user[@]}" "$M" report --db "$R/ro.db"
    verdict "... shows its newest run" -- grep -q "== run 3: train" "$T/out"
    check "report --list of it" 0 "" -- "${as_user[@]}" "$M" report --db "$R/ro.db" --list
else
    echo "skip report of a read-only database (root without setpriv cannot be refused a write)"
fi
chmod 755 "$R"; rm -rf "$R"

# ---- 10. exit codes as documented; one set of limits
check "missing --data" 2 "cannot open data file" -- "$M" train --preset tiny --data "$T/none.txt"
printf 'ab' > "$T/small.txt"
check "too small --data" 2 "fewer than model.seq_len" -- "$M" train --preset tiny --data "$T/small.txt"
check "plan -o into a missing folder" 2 "/nonexistent/x" -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB -o /nonexistent/x
check "plan --gpus 1025" 1 "--gpus: 1025 is out of range \[1, 1024\]" -- "$M" plan --profile "$T/p17.json" --gpus 1025 --gpu-mem 1GiB
check "doctor --gpus 1025" 1 "--gpus: 1025 is out of range \[1, 1024\]" -- "$M" doctor --preset tiny --gpus 1025 --gpu-mem 1GiB
check "plan --max-stages 65" 1 "--max-stages: 65 is out of range \[1, 64\]" -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB --max-stages 65
check "doctor --gpus 100" 0 "" -- "$M" doctor --preset tiny --device cpu --gpus 100 --gpu-mem 1GiB --steps 2 --db "$T/g100.db" --quiet
check "n_layer=4095" 1 "model.n_layer: 4095 is out of range \[1, 4094\]" -- "$M" train --preset tiny --set model.n_layer=4095
"$M" plan --profile "$T/p17.json" --gpus 100 --gpu-mem 20MiB --max-stages 2 -o "$T/p100.json" >/dev/null
check "train --plan of 100 devices and 2 stages" 0 "" -- "$M" train --preset seed17-cpu --plan "$T/p100.json" --device cpu --steps 1 --quiet

# ---- 11. nothing ignored, nothing said twice
check "--inject-oom on a device the plan lacks" 1 "--inject-oom: device 5 is not one of the 2 planned" \
    -- "$M" doctor --preset tiny --gpus 2 --gpu-mem 1GiB --inject-oom 3:5:60%
check "train --inject-oom on a device the plan lacks" 1 "--inject-oom: device 5 is not one of the plan's 2" \
    -- "$M" train --preset seed17-cpu --plan "$T/plan.json" --device cpu --steps 1 --inject-oom 3:5:60%
check "--gpu-mem with an empty size (doctor)" 1 "--gpu-mem '20MiB,,20MiB': size 2 is empty" \
    -- "$M" doctor --preset tiny --gpus 2 --gpu-mem 20MiB,,20MiB
check "--gpu-mem with an empty size (plan)" 1 "size 2 is empty" -- "$M" plan --profile "$T/p17.json" --gpus 2 --gpu-mem 20MiB,,20MiB
said_once() { ! grep -qE '(^|[ ])([^ :]+): \2:' "$T/err"; }
check "a bad plan file" 1 "" -- "$M" train --preset tiny --plan "$T/p17.json" --steps 1
verdict "... named once" -- said_once
check "a device of no memory" 1 "" -- "$M" doctor --preset tiny --gpus 2 --gpu-mem 0
verdict "... named once" -- said_once
why=$(sq "$T/two.db" 'SELECT reason FROM recovery_events')
verdict "the recovery's reason is whole (${#why} characters)" -- test ${#why} -gt 127 -a -n "$(grep -F "OUT OF MEMORY at step 4: $why" "$T/two.err")"
"$M" doctor "${shape17[@]}" --steps 2 --db "$T/gap.db" >"$T/gap.out" 2>/dev/null
"$M" report --db "$T/gap.db" --brief >"$T/gap.report"
same_gap() { # the first device's gap, as doctor printed it, in the report's line for that device
    local g; g=$(grep -E '^  cpu/v0 ' "$T/gap.out" | grep -oE '[+-][0-9]+\.[0-9]{2}%$')
    [ -n "$g" ] && grep -E '^cpu/v0 ' "$T/gap.report" | grep -qF -- "$g"
}
verdict "doctor and report print one signed gap" -- same_gap

# ---- 12. the demos lead with the answer, in one screen: the user's own
# PyTorch script (make demo) and memsplit's own model (make demo-builtin)
demo=$(cd "$(dirname "$0")/../.." && pwd)/scripts/demo.sh
(cd "$T" && DB=demo.db "$demo" "$M" >"$T/demo.txt" 2>&1); rc=$?
lines=$(wc -l <"$T/demo.txt"); cols=$(awk '{ if (length($0) > n) n = length($0) } END { print n }' "$T/demo.txt")
verdict "make demo (a PyTorch script): exit $rc, $lines lines (<= 60), $cols columns (<= 80)" -- \
    test "$rc" = 0 -a "$lines" -le 60 -a "$cols" -le 80
order=$(grep -oE "^(OUT OF MEMORY|placement:|doctor: trained|== run 1)" "$T/demo.txt" | tr '\n' '|')
verdict "... diagnosis, placement in module paths, measured against predicted, report" -- \
    test "$order" = "OUT OF MEMORY|placement:|doctor: trained|== run 1|"
demo=$(cd "$(dirname "$0")/../.." && pwd)/scripts/demo_builtin.sh
(cd "$T" && DB=demob.db "$demo" "$M" >"$T/demob.txt" 2>&1)
lines=$(wc -l <"$T/demob.txt"); cols=$(awk '{ if (length($0) > n) n = length($0) } END { print n }' "$T/demob.txt")
verdict "make demo-builtin: $lines lines (<= 60), $cols columns (<= 80)" -- test "$lines" -le 60 -a "$cols" -le 80
order=$(grep -oE "^(OUT OF MEMORY|plan:|measured against predicted|== run 1)" "$T/demob.txt" | tr '\n' '|')
verdict "... diagnosis, plan, measured against predicted, report" -- \
    test "$order" = "OUT OF MEMORY|plan:|measured against predicted|== run 1|"

# ---- 14. issue 38: temporary files at names nobody can plant; what a kill
# left is removed by the resume that takes the folder over
mkdir -p "$T/plant"; echo mine >"$T/victim"
ln -s "$T/victim" "$T/plant/step-00000002.ckpt.tmp"
check "a symlink planted at step-N.ckpt.tmp: the checkpoint is written anyway" 0 "checkpoint .*step-00000002.ckpt" \
    -- "$M" train --preset tiny --steps 2 --checkpoint-dir "$T/plant"
verdict "... and the link's target is left as it was" -- test "$(cat "$T/victim")" = mine
: >"$T/plant/step-00000001.ckpt.tmp.Ab3dE1"; mkdir "$T/plant/step-00000002.ckpt.tmp.Xy7zW9"  # saves a kill cut short
check "a resume in that folder" 0 "resumed from .*step-00000002.ckpt at step 2" \
    -- "$M" train --preset tiny --steps 3 --checkpoint-dir "$T/plant" --resume
verdict "... removes what saves cut short left (and the planted link, not its target)" -- \
    test "$(ls "$T/plant" | grep -c tmp)/$(cat "$T/victim")" = 0/mine

# ---- 15. issue 38: a program's module names are untrusted input. The plan's
# snippet quotes them as Python literals (a name that ends a string and runs
# code creates nothing), its placement line parses back to the same modules
# (tests/cli/hostile.py has the grammar), and no command prints a control
# character a name carried (ESC, CR, BS, OSC): they show as \x1b
H="$(dirname "$0")/hostile.py"
"$M" profile --preset seed17-cpu --gpu-mem 0 --json >"$T/s17.json" 2>/dev/null
python3 "$H" names "$T/s17.json" "$T/hostile.json" "$T/PWNED"
check "plan for a program with hostile module names" 0 "" \
    -- "$M" plan --profile "$T/hostile.json" --gpus 2 --gpu-mem 20MiB -o "$T/hostile_plan.json"
cp "$T/out" "$T/hplan.out"; cp "$T/err" "$T/hplan.err"
verdict "... its snippet runs no code hidden in a name, and places every module" -- \
    python3 "$H" snippet "$T/hostile_plan.json" "$T/hplan.out" "$T/PWNED"
verdict "... its placement line parses back to the same modules per stage" -- \
    python3 "$H" placement "$T/hostile_plan.json" "$T/hplan.out"
verdict "... and it prints no control character" -- python3 "$H" clean "$T/hplan.out" "$T/hplan.err"
"$M" profile --preset tiny --gpu-mem 300KiB --db "$T/esc.db" --quiet >/dev/null 2>&1
python3 - "$T/esc.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE layer_rows SET name = 'blk\x1b[2J\x1b]0;owned\x07\r\x08' || layer || ' ' || ?, kind = 'B\x1b[31m'",
          ("\u00e9" * 40,))  # a name past the table's cell, cut between two-byte characters
c.execute("UPDATE oom_events SET layer_name = 'blk\x1b[2J', what = 'w\x1b]8;;http://x\x07'")
c.execute("UPDATE runs SET cmdline = 'memsplit profile \x1b[2J\x9b2J\r\nforged line', model = 'm\x1b[1m'")
c.commit()
PY
for form in "" --brief --list; do
    check "report $form of a run whose names and command hold escapes" 0 "" -- "$M" report --db "$T/esc.db" $form
    verdict "... prints them visibly (\\x1b), never raw" -- sh -c "python3 '$H' clean '$T/out' '$T/err' && { [ '$form' = --list ] || grep -qF '\\x1b' '$T/out'; }"
done
check "plan from that profile" 0 "" -- "$M" plan --db "$T/esc.db" --gpus 2 --gpu-mem 1MiB
verdict "... prints its names visibly" -- python3 "$H" clean "$T/out" "$T/err"

# ---- 16. issue 38: SIGINT, SIGTERM and SIGHUP stop a run cleanly: it finishes
# the step in progress, checkpoints it, records the run "interrupted" and exits
# 128 + the signal (before: killed at once, no message, no checkpoint, the run
# left "running")
steps_of() { sqlite3 "$1" "select count(*) from steps where run_id = (select max(id) from runs where kind = 'train')" 2>/dev/null || echo 0; }
wait_steps() { # db n pid: until the newest train run has n step rows (or pid ended)
    for _ in $(seq 600); do [ "$(steps_of "$1")" -ge "$2" ] 2>/dev/null && return; kill -0 "$3" 2>/dev/null || return; sleep 0.1; done
}
interrupted() { # name signal code db ckdir: the run's record, its checkpoint at its last step
    local n=$1 sig=$2 want=$3 db=$4 ck=$5 got=$6
    local st last ckl; st=$(sqlite3 "$db" "select group_concat(status) from runs where kind in ('train', 'doctor')")
    last=$(sqlite3 "$db" "select max(step) from steps where run_id = (select max(id) from runs where kind = 'train')")
    ckl=$(ls "$ck" 2>/dev/null | grep -E '^step-[0-9]+\.ckpt$' | sort | tail -1)
    if [ "$got" = "$want" ] && [ -z "$(echo "$st" | tr ',' '\n' | grep -v interrupted)" ] && [ "$ckl" = "$(printf 'step-%08d.ckpt' "$last")" ] &&
       grep -q "$sig received: stopping after the step in progress" "$T/sig.err" && grep -q "interrupted by $sig after step $last" "$T/sig.err"
    then echo "ok   $n: exit $got, the run interrupted, checkpoint of its last step ($last)"; pass=$((pass+1))
    else echo "FAIL $n: exit $got (wanted $want), runs '$st', last step $last, newest checkpoint '$ckl'"; tail -3 "$T/sig.err"; fail=$((fail+1)); fi
}
for sc in INT:130 TERM:143 HUP:129; do
    sig=${sc%:*}; rm -rf "$T/sig.db"* "$T/sigck"
    "$M" train --preset tiny --steps 100000 --checkpoint-dir "$T/sigck" --checkpoint-every 1000 --db "$T/sig.db" --quiet 2>"$T/sig.err" &
    pid=$!; wait_steps "$T/sig.db" 30 $pid; kill -$sig $pid; wait $pid
    interrupted "train, SIG$sig" SIG$sig ${sc#*:} "$T/sig.db" "$T/sigck" $?
done
check "... and it resumes from that checkpoint" 0 "resumed from .*step-" \
    -- "$M" train --preset tiny --steps 3000 --checkpoint-dir "$T/sigck" --resume
rm -rf "$T/sig.db"*
"$M" doctor "${shape17[@]}" --steps 1000 --checkpoint-every 0 --db "$T/sig.db" --quiet >/dev/null 2>"$T/sig.err" &
pid=$!; wait_steps "$T/sig.db" 3 $pid; kill -TERM $pid; wait $pid
interrupted "doctor, SIGTERM" SIGTERM 143 "$T/sig.db" "$T/sig.db.ckpt/run-1" $?

# ---- 17. issue 38, smaller: an uncapped profile has no cap (not "0 B"), a plan
# over CPU devices counts devices (not GPUs), one stage is one stage
check "an uncapped profile" 0 "" -- "$M" profile --preset tiny --db "$T/small.db"
verdict "... says it has no cap, never 'capacity 0 B'" -- \
    sh -c "cat '$T/out' '$T/err' | grep -q 'capacity  no cap on cpu' && ! cat '$T/out' '$T/err' | grep -q 'capacity  0 B'"
check "a plan over two CPU devices" 0 "" -- "$M" plan --db "$T/small.db" --gpus 2 --devices cpu/v0,cpu/v1 --gpu-mem 1MiB
verdict "... counts devices, not GPUs" -- grep -q "2 of 2 devices," "$T/out"
"$M" plan --db "$T/small.db" --gpus 1 --gpu-mem 1GiB >/dev/null 2>&1
check "a report with a one-stage plan" 0 "" -- "$M" report --db "$T/small.db" --brief
verdict "... says '1 stage'" -- sh -c "grep -q ', 1 stage,' '$T/out' && ! grep -q '1 stages' '$T/out'"

# ---- 13. help and docs match the code
"$M" --version >"$T/out" 2>&1
verdict "--version" -- grep -qE "^memsplit [0-9]+\.[0-9]+" "$T/out"
for cmd in train profile plan doctor report; do
    "$M" $cmd --help >"$T/help" 2>&1
    dup=$(grep -oE '^  (-[a-z], )?--[a-z-]+' "$T/help" | sed 's/.*--/--/' | sort | uniq -d | tr '\n' ' ')
    verdict "$cmd --help lists each flag once${dup:+ (twice: $dup)}" -- test -z "$dup"
done
"$M" doctor --help | sed '/^$/q' >"$T/out"
verdict "doctor's usage: --gpus is optional" -- grep -qF "[--gpus N]" "$T/out"
"$M" plan --help | sed '/^$/q' >"$T/out"
verdict "plan's usage names --devices" -- grep -q -- "--devices LIST" "$T/out"
verdict "plan's usage names --max-stages" -- grep -q -- "--max-stages K" "$T/out"
"$M" plan --help >"$T/out"
verdict "plan says its --batch is the global one" -- grep -q "train's and profile's --batch is the" "$T/out"
"$M" train --help >"$T/out"
verdict "train says its --batch is the micro-batch" -- grep -q -- "--batch N .*micro-batch size in sequences; the global batch is" "$T/out"
"$M" config --keys-md >"$T/keys.md"
verdict "docs/config.md is memsplit config --keys-md" -- diff -u "$(dirname "$0")/../../docs/config.md" "$T/keys.md"
"$M" config --preset seed17 --set model.n_layer=4 >"$T/ex.ini"
check "memsplit config writes a file --config reads back" 0 "" -- "$M" config --config "$T/ex.ini"
verdict "... exactly" -- diff -u "$T/ex.ini" "$T/out"
verdict "README: make test needs Chromium" -- grep -q "Chromium" "$(dirname "$0")/../../README.md"
verdict "README: make demo writes demo.db.ckpt/" -- grep -q "demo.db.ckpt" "$(dirname "$0")/../../README.md"
verdict "README: checkpoint retention" -- grep -q "newest two" "$(dirname "$0")/../../README.md"
echo "reliability: $pass passed, $fail failed"
[ $fail -eq 0 ]
