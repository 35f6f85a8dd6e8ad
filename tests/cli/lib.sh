# lib.sh — what the command-line checks share (sourced by tests/cli/*.sh):
# $M the binary, $T a scratch folder removed at exit, pass/fail counters,
# check (exit status and a stderr pattern), verdict (any condition) and
# json_get (a Python expression over the last command's stdout as d).
set -u
M=${MEMSPLIT:?set MEMSPLIT to the memsplit binary}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { # name expected_exit stderr_pattern -- command...
    local name=$1 want=$2 pat=$3; shift 4
    "$@" >"$T/out" 2>"$T/err"; local got=$?
    if [ "$got" != "$want" ]; then
        echo "FAIL $name: exit $got, wanted $want"; sed 's/^/  | /' "$T/err" | head -5; fail=$((fail+1)); return
    fi
    if [ -n "$pat" ] && ! grep -qiE -- "$pat" "$T/err"; then
        echo "FAIL $name: stderr lacks /$pat/"; sed 's/^/  | /' "$T/err" | head -5; fail=$((fail+1)); return
    fi
    echo "ok   $name"; pass=$((pass+1))
}
verdict() { # name -- command...: passes when the command succeeds
    local name=$1; shift 2
    if "$@"; then echo "ok   $name"; pass=$((pass+1)); else echo "FAIL $name"; fail=$((fail+1)); fi
}
json_get() { python3 -c "import json,sys; d=json.load(open('$T/out')); print($1)"; }
