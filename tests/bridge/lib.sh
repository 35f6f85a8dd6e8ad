# lib.sh — what the bridge's end-to-end scripts share (sourced, not run):
# $M the memsplit binary, $PY the Python with torch, $HERE this folder, a
# scratch folder $T removed at exit, and ok/bad counting into pass/fail.
set -u
M=${MEMSPLIT:?set MEMSPLIT to the memsplit binary}
PY=${BRIDGE_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; shift; for l in "$@"; do echo "  | $l"; done; fail=$((fail+1)); }
