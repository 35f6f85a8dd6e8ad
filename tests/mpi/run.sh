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
echo "mpi: $pass passed, $fail failed"
[ $fail -eq 0 ]
