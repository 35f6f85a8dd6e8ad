#!/usr/bin/env bash
# untrusted.sh — the program memsplit runs is untrusted input (issue 38):
# whatever it does to the bridge's socket, its own module names, its
# descriptors, its threads and subprocesses, or whatever signal comes, no
# hang, no crash, no wrong record, no lost run. Each case runs
# tests/bridge/hostile.py (a tiny model, Debian's torch on the CPU) under
# `memsplit profile|plan|train|doctor`. Needs $MEMSPLIT.
set -u
M=${MEMSPLIT:?set MEMSPLIT to the memsplit binary}
PY=${BRIDGE_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
H="$HERE/hostile.py"
T=$(mktemp -d)
export TMPDIR="$T"
started=()                 # background memsplit processes this script started
cleanup() { for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
WHO=untrusted CHECK_TIMEOUT_S=120
. "$HERE/lib.sh"
status_of() { sqlite3 "$1" "SELECT group_concat(kind || ':' || status, ' ') FROM (SELECT kind, status FROM runs ORDER BY id)" 2>&1; }
# bg OUT ERR -- command: started in the background, its pid in $bgpid
bg() { local out=$1 err=$2; shift 3; "$@" >"$out" 2>"$err" & bgpid=$!; started+=("$bgpid"); }
wait_for() {  # FILE PATTERN: up to 60 s for the pattern to appear
    for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1
}
# ended PID SECONDS: waits for a background process to end, its exit status in $rc (124: it did not)
ended() {
    local p=$1 s=$2
    for _ in $(seq $((s * 10))); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then rc=124; kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; return 1; fi
    wait "$p"; rc=$?
}

# ---- 1. hangs and crashes ------------------------------------------------------
# 40 idle connections to the bridge's socket, then training: each accepted
# connection is read only when it has something, none blocks the others
for i in 1 2 3; do
    check "40 idle connections to the bridge's socket ($i)" 0 "" -- "$M" profile --quiet --json -- "$PY" "$H" --idle-conns 40
done
[ "$(py "len(d['layers']) == 6 and d['program']['steps_done'] == 2")" = True ] && ok "idle connections: the profile is whole" || \
    bad "idle connections: profile" "$(py "d.get('program')")"
# forged lines on a connection of the program's own: a member without a
# module (it spun join() at 100% CPU), garbage, an overlong line
check "forged member without module, garbage, a 2 MiB line" 0 "" -- "$M" profile --quiet --json -- "$PY" "$H" \
    --forge '{"ev":"member","l":0}' --forge '{"ev":"member","l":0,"module":""}' --forge 'garbage {' \
    --forge-long $((2 << 20)) --forge '{"ev":"step","n":99}' --forge-late '{"ev":"member","l":0}' \
    --forge-late '{"ev":"model","blocks":["x"]}'
[ "$(py "len(d['layers']) == 6 and d['program']['steps_done'] == 2 and d['layers'][0]['name'] == 'embed'")" = True ] && \
    ok "forged lines: the training process's profile, untouched" || bad "forged lines" "$(py "[r['name'] for r in d['layers']]")"

# SIGTERM to memsplit: the program (which ignores it) and memsplit both
# stop, within the grace period, and the run is recorded interrupted
bg "$T/t.out" "$T/t.err" -- "$M" profile --db "$T/term.db" -- "$PY" "$H" --ignore-signals --sleep-after 1 --sleep 300
mp=$bgpid
if wait_for "$T/t.out" ready; then
    t0=$SECONDS; kill -TERM "$mp"; ended "$mp" 40
    if [ $rc = 143 ] && [ "$(status_of "$T/term.db")" = profile:interrupted ] && [ $((SECONDS - t0)) -le 25 ] &&
       grep -q "did not finish" "$T/t.out" && ! grep -q "fits: the trial finished" "$T/t.out"; then
        ok "SIGTERM to memsplit, the program ignoring it: both stop in $((SECONDS - t0)) s, exit 143, run interrupted, no 'fits'"
    else bad "SIGTERM to memsplit" "exit $rc, $((SECONDS - t0)) s, runs $(status_of "$T/term.db")" "$(tail -3 "$T/t.err")" "$(grep result "$T/t.out")"; fi
else bad "SIGTERM: the program never got ready" "$(tail -3 "$T/t.err")"; fi
# a second signal does not wait for the grace period
bg "$T/t2.out" "$T/t2.err" -- "$M" profile --db "$T/term2.db" -- "$PY" "$H" --ignore-signals --sleep-after 1 --sleep 300
mp=$bgpid
if wait_for "$T/t2.out" ready; then
    t0=$SECONDS; kill -TERM "$mp"; sleep 0.5; kill -TERM "$mp"; ended "$mp" 40
    [ $rc = 143 ] && [ $((SECONDS - t0)) -le 5 ] && [ "$(status_of "$T/term2.db")" = profile:interrupted ] && \
        ok "a second SIGTERM: the program killed at once ($((SECONDS - t0)) s)" || \
        bad "second SIGTERM" "exit $rc after $((SECONDS - t0)) s" "$(status_of "$T/term2.db")"
else bad "second SIGTERM: never ready" "$(tail -3 "$T/t2.err")"; fi

# a module the program holds and never trains, whose parameters() and modules() never
# end and whose unknown attributes raise: its weights are read from its own dicts (no
# code of it runs), counted in layer 0 and named
check "a held module whose parameters() never ends: no hang" 0 "holds a model besides Model that no optimizer held at its first training forward: Endless .4096 parameter bytes." \
    -- "$M" profile --quiet --json -- "$PY" "$H" --held-endless
[ "$(py "(sum(r['param'] for r in d['layers']), d['layers'][0]['param'])")" = "(16896, 8192)" ] && \
    ok "the held module's 4096 bytes are in layer 0 (the model's 12800 as they were)" || \
    bad "held module's bytes" "$(py "[r['param'] for r in d['layers']]")"

# ---- 8. signals: setsid and a terminal's Ctrl-C; Ctrl-C during doctor's trial ---
# tty_run.py: memsplit on a pseudo-terminal, ^C typed once the program is ready
cat > "$T/tty_run.py" <<'EOF'
import os, pty, sys, time, select
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
buf, typed, end, reading = b"", False, time.time() + 90, True
while time.time() < end:
    r, _, _ = select.select([fd] if reading else [], [], [], 0.2)
    if r:
        try:
            chunk = os.read(fd, 4096)
        except OSError:            # EIO: every process on the terminal has gone
            chunk = b""
        reading = bool(chunk)
        buf += chunk
    if not typed and b"ready" in buf:
        os.write(fd, b"\x03")          # Ctrl-C: the terminal's SIGINT to its foreground process group
        typed = True
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        sys.stdout.write(buf.decode(errors="replace"))
        print("\nPTY-EXIT %d" % os.waitstatus_to_exitcode(status))
        sys.exit(0)
os.kill(pid, 9)
os.waitpid(pid, 0)
sys.stdout.write(buf.decode(errors="replace"))
print("\nPTY-EXIT hung")
EOF
timeout -k 5 120 "$PY" "$T/tty_run.py" "$M" profile --db "$T/tty.db" -- "$PY" "$H" --setsid --sleep-after 1 --sleep 300 > "$T/tty.out" 2>&1
got=$(grep -o 'PTY-EXIT .*' "$T/tty.out")
[ "$got" = "PTY-EXIT 130" ] && [ "$(status_of "$T/tty.db")" = profile:interrupted ] && \
    ok "Ctrl-C at a terminal reaches a program that called setsid(): exit 130, run interrupted" || \
    bad "Ctrl-C after setsid" "$got, runs $(status_of "$T/tty.db")" "$(tail -4 "$T/tty.out")"
timeout -k 5 120 "$PY" "$T/tty_run.py" "$M" profile --db "$T/tty2.db" -- "$PY" "$H" --sleep-after 1 --sleep 300 > "$T/tty2.out" 2>&1
got=$(grep -o 'PTY-EXIT .*' "$T/tty2.out")
[ "$got" = "PTY-EXIT 130" ] && [ "$(status_of "$T/tty2.db")" = profile:interrupted ] && \
    ok "Ctrl-C at a terminal, the program in memsplit's process group: exit 130, run interrupted" || \
    bad "Ctrl-C at a terminal" "$got, runs $(status_of "$T/tty2.db")" "$(tail -4 "$T/tty2.out")"
# Ctrl-C during doctor's trial: the doctor run and its trial are interrupted, nothing more starts
timeout -k 5 120 "$PY" "$T/tty_run.py" "$M" doctor --gpus 2 --gpu-mem 1GiB --db "$T/doc.db" -- "$PY" "$H" --sleep-after 1 \
    --sleep 300 > "$T/doc.out" 2>&1
got=$(grep -o 'PTY-EXIT .*' "$T/doc.out")
[ "$got" = "PTY-EXIT 130" ] && [ "$(status_of "$T/doc.db")" = "doctor:interrupted profile:interrupted" ] && \
    ok "Ctrl-C during doctor's trial: exit 130, doctor and trial recorded interrupted" || \
    bad "Ctrl-C during doctor's trial" "$got, runs $(status_of "$T/doc.db")" "$(tail -4 "$T/doc.out")"
# SIGTERM to train --plan of a program: the rerun stops too
check "profile for a plan" 0 "" -- "$M" profile --quiet --db "$T/plan.db" -- "$PY" "$H"
check "plan" 0 "" -- "$M" plan --db "$T/plan.db" --gpus 2 --gpu-mem 1GiB --devices cpu,cpu -o "$T/plan.json"
bg "$T/tr.out" "$T/tr.err" -- "$M" train --plan "$T/plan.json" --db "$T/train.db" -- "$PY" "$H" --sleep-after 1 --sleep 300
mp=$bgpid
if wait_for "$T/tr.out" ready; then
    kill -TERM "$mp"; ended "$mp" 40
    [ $rc = 143 ] && [ "$(status_of "$T/train.db")" = train:interrupted ] && ok "SIGTERM to train --plan: exit 143, run interrupted" || \
        bad "SIGTERM to train --plan" "exit $rc, runs $(status_of "$T/train.db")" "$(tail -3 "$T/tr.err")"
else bad "train --plan never ready" "$(tail -3 "$T/tr.err")"; fi

# ---- 5. names the pipeline cannot carry ----------------------------------------
# Names that can travel round-trip: the profile's layer names are the
# program's own, and a plan made from them places the modules in a rerun
for kind in newline tab esc utf8-ok; do
    db="$T/names-$kind.db"
    check "names ($kind): profile" 0 "" -- "$M" profile --quiet --json --db "$db" -- "$PY" "$H" --names $kind \
        --names-out "$T/names.json" || continue
    if [ "$(py "[r['name'] for r in d['layers'][1:-1]] == json.load(open('$T/names.json'))")" = True ]; then
        ok "names ($kind): the layers carry the program's own names, whole"
    else bad "names ($kind): round trip" "$(py "[r['name'] for r in d['layers']]")" "$(cat "$T/names.json")"; fi
    check "names ($kind): report --json" 0 "" -- "$M" report --db "$db" --json
    check "names ($kind): report --html" 0 "" -- "$M" report --db "$db" --html "$T/names.html"
    "$PY" -c "open('$T/names.html', encoding='utf-8', errors='strict').read()" 2>/dev/null && \
        ok "names ($kind): the HTML page is valid UTF-8" || bad "names ($kind): invalid UTF-8 in the HTML" ""
    check "names ($kind): plan" 0 "" -- "$M" plan --db "$db" --gpus 2 --gpu-mem 1GiB --devices cpu,cpu -o "$T/np.json"
    check "names ($kind): train --plan places the modules" 0 "" -- "$M" train --plan "$T/np.json" --quiet -- \
        "$PY" "$H" --names $kind --steps 3
done
# a block list whose path and class name are long UTF-8: the units' names
# travel whole, and the description stays within 255 bytes
check "a long UTF-8 list description: profile --json" 0 "" -- "$M" profile --quiet --json -- "$PY" "$H" \
    --list "$("$PY" -c "print('\u00fc' * 60)")" --block-class "x$("$PY" -c "print('\u4e2d' * 80)")" \
    --names-out "$T/names.json"
[ "$(py "[r['name'] for r in d['layers'][1:-1]] == json.load(open('$T/names.json')) and len(d['program']['layer_list'].encode()) <= 255")" = True ] && \
    ok "a long UTF-8 list description: valid JSON, the names whole" || \
    bad "long UTF-8 list description" "$(head -c 300 "$T/out")"
# Names that cannot travel are refused up front, with the name shown and
# why; the program is stopped there (it does not run on unobserved)
for kind in nul surrogate long utf8-400; do
    check "names ($kind): refused up front" 1 "cannot carry the module name .*(NUL|Unicode|bytes)" -- \
        "$M" profile --db "$T/refused.db" -- "$PY" "$H" --names $kind --steps 50
    grep -q "^step 1 " "$T/out" && bad "names ($kind): the program ran on after the refusal" "$(grep -c step "$T/out") steps" || \
        ok "names ($kind): the program stopped at its first forward"
done
[ "$(sqlite3 "$T/refused.db" "SELECT count(*) FROM runs WHERE status = 'running'")" = 0 ] && \
    ok "refused runs are recorded as ended, none left running" || bad "runs left running" "$(status_of "$T/refused.db")"
check "names (utf8-400): doctor refuses, exit 1" 1 "cannot carry the module name" -- \
    "$M" doctor --gpus 2 --gpu-mem 1GiB --db "$T/docnames.db" -- "$PY" "$H" --names utf8-400
[ "$(sqlite3 "$T/docnames.db" "SELECT count(*) FROM runs WHERE status = 'running'")" = 0 ] && \
    ok "doctor: no run left running after a refusal" || bad "doctor left a run running" "$(status_of "$T/docnames.db")"
check "a pre-module named with a comma: refused" 1 "cannot carry the module name 'emb,ed'.*comma" -- \
    "$M" profile -- "$PY" "$H" --pre "emb,ed"
# modules with no parameters join the unit before them: the unit's name
# (their paths joined by commas) may not pass 255 bytes
check "a unit whose joined names pass 255 bytes: refused" 1 "longer than the 255 bytes" -- \
    "$M" profile -- "$PY" "$H" --pre-free "$("$PY" -c "print('|'.join('pre_module_%02d_%s' % (i, 'x' * 20) for i in range(10)))")"

# a script whose path is not UTF-8 (argv holds any bytes): its name, its
# argv in the hello and the recorded command line are kept as valid UTF-8
cp "$H" "$T/h"$'\xff'".py"
check "a script path that is not UTF-8: profile" 0 "" -- "$M" profile --quiet --json --db "$T/argv.db" -- \
    "$PY" "$T/h"$'\xff'".py"
[ "$(py "d['model']['name'] == 'h\ufffd.py'")" = True ] && ok "a script path that is not UTF-8: named with U+FFFD" || \
    bad "non-UTF-8 script name" "$(py "d.get('model')")"
check "a script path that is not UTF-8: report --html" 0 "" -- "$M" report --db "$T/argv.db" --html "$T/argv.html"
"$PY" -c "open('$T/argv.html', encoding='utf-8', errors='strict').read()" 2>/dev/null && \
    ok "a script path that is not UTF-8: the HTML page is valid UTF-8" || bad "argv: invalid UTF-8 in the HTML" ""

# ---- 6. a wrong or partial profile recorded as a success --------------------------
check "a subprocess trains another model" 0 "" -- "$M" profile --json --db "$T/sub.db" -- "$PY" "$H" --subprocess
if [ "$(py "len(d['layers']) == 6 and d['program']['steps_done'] == 2 and 'another process also trained' in d['program']['warnings']")" = True ] &&
   ! grep -qE "step [3-9]/2" "$T/err"; then
    ok "subprocess: the first process that trained is the profile (6 layers, 2 steps), the other is named in a warning"
else bad "subprocess" "$(py "(len(d['layers']), d['program'])")" "$(grep step "$T/err" | tail -3)"; fi
check "os._exit(0) in the middle of a forward: exit 2" 2 "without the bridge seeing it end" -- \
    "$M" profile --db "$T/exit.db" -- "$PY" "$H" --exit-mid-forward
grep -q "did not finish" "$T/out" && ! grep -q "fits: the trial" "$T/out" && [ "$(status_of "$T/exit.db")" = profile:failed ] && \
    ok "os._exit: the profile says it did not finish, the run failed" || bad "os._exit" "$(grep result "$T/out")" "$(status_of "$T/exit.db")"
check "--steps 1 is refused" 1 "2 to 1000000" -- "$M" profile --steps 1 -- "$PY" "$H"
check "doctor --steps 1 is refused" 1 "from 2 to" -- "$M" doctor --gpus 2 --gpu-mem 1GiB --steps 1 --db "$T/s1.db" -- "$PY" "$H"
check "a program that ends by itself after 1 of 2 steps" 0 "" -- "$M" profile -- "$PY" "$H" --steps 1
grep -q "ended by itself (exit status 0) after 1 of the 2 steps asked" "$T/out" && ok "one step: said, beside the result" || \
    bad "one step: not said" "$(tail -4 "$T/out")"
# the program's other threads allocate too
check "a thread's tensor: without" 0 "" -- "$M" profile --quiet --json -- "$PY" "$H"
base=$(py "d['peak_bytes']")
check "a thread's tensor: 4 MiB kept" 0 "" -- "$M" profile --quiet --json -- "$PY" "$H" --thread-mb 4
got=$(py "d['peak_bytes']")
[ $((got - base)) -ge $((4 << 20)) ] && ok "a thread's allocations count: peak +$(( (got - base) >> 10 )) KiB" || \
    bad "a thread's tensor not counted" "peak $base without, $got with"

# ---- 7. the bridge never closes, nor writes to, a descriptor the program owns -----
check "fd reused for a file" 2 "" -- "$M" profile -- "$PY" "$H" --fd-reuse file
grep -q "fd: the program's file is still open" "$T/out" && ok "the program's file at the bridge's old number stays open" || \
    bad "the bridge closed the program's file" "$(grep fd "$T/out")"
check "fd reused for a socket" 2 "" -- "$M" profile -- "$PY" "$H" --fd-reuse socket
grep -q "fd: the program's socket received 0 bytes" "$T/out" && ok "the program's socket at the bridge's old number gets nothing" || \
    bad "the bridge wrote into the program's socket" "$(grep fd "$T/out")"

echo "untrusted: $pass passed, $fail failed"
[ $fail -eq 0 ]
