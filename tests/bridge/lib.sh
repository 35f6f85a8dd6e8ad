# lib.sh — what the bridge's end-to-end scripts (run.sh, shapes.sh,
# untrusted.sh) share; sourced, not run. It gives $M the memsplit binary,
# $PY the Python with torch, $HERE the sourcing script's folder, and a
# scratch folder $T removed at exit (a script that sets T and its own trap
# before sourcing keeps them). $WHO names the script in messages.
#   ok NAME / bad NAME [LINE...]   count and say a case's result
#   check NAME WANT_EXIT STDERR_PATTERN -- command...
#       runs the command (stdout in $T/out, stderr in $T/err; at most
#       CHECK_TIMEOUT_S seconds, 600 by default: a hang is a failure, not a
#       stuck suite) and checks its exit status and stderr
#   py EXPR   a Python expression over d = the JSON in $T/out
set -u
M=${MEMSPLIT:?set MEMSPLIT to the memsplit binary}
PY=${BRIDGE_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
WHO=${WHO:-$(basename "${BASH_SOURCE[1]}" .sh)}
if [ -z "${T:-}" ]; then
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
fi
pass=0; fail=0
ok()  { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; shift; for l in "$@"; do echo "  | $l"; done; fail=$((fail+1)); }

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "$WHO: $PY has no torch (install python3-torch: scripts/deps.sh does)"; exit 1
fi

check() {
    local name=$1 want=$2 pat=$3; shift 4
    timeout -k 5 "${CHECK_TIMEOUT_S:-600}" "$@" >"$T/out" 2>"$T/err"; local got=$?
    if [ "$got" != "$want" ]; then bad "$name: exit $got, wanted $want" "$(tail -5 "$T/err")"; return 1; fi
    if [ -n "$pat" ] && ! grep -qiE "$pat" "$T/err"; then bad "$name: stderr lacks /$pat/" "$(tail -5 "$T/err")"; return 1; fi
    ok "$name"
}
py() { "$PY" -c "import json,sys; d=json.load(open('$T/out')); print($1)" 2>&1; }
