#!/usr/bin/env bash
# gpu_x2_bridge.sh — the PyTorch bridge's runs that need two real GPUs, on the
# lent nvidia-h200-x2 machine, from gpu-pack/ (make gpu-pack), in two calls of
# the device's ten minutes each. Logs to $OUT.
#   PART=bench    bench/programs.sh's split2 mode: each program split over
#                 cuda:0 and cuda:1 (no one GPU holds it), its step time
#                 against the program alone on one GPU, each GPU's peak
#                 against its prediction (issue 40's two-GPU figure)
#   PART=realdev  the GPU suite's realdev cases over cuda:0,cuda:1: each GPU's
#                 peak in its two parts, the losses, the crossings by .to
# The split runs each backward on the program's thread (docs/bridge.md, "The
# autograd engine's threads"); MEMSPLIT_BRIDGE_TEST_ENGINE_THREADS=1 with
# PART=bench leaves torch's thread per GPU, for the step time to compare.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
P=${PACK:-gpu-pack}
O=${OUT:-gpu-out}
mkdir -p "$O"
nvidia-smi -L
case ${PART:-bench} in
bench)
    OUT=$O BENCH_BUDGET_S=${BENCH_BUDGET_S:-560} BENCH_PROGRAM_MODES="alone split2" \
        BENCH_PROGRAM_LIST="${BENCH_PROGRAM_LIST:-llama gpt2 ref resnet152}" bash bench/programs.sh "$P/memsplit" ;;
realdev)
    MEMSPLIT=$PWD/$P/memsplit PY=${PY:-python3} REALDEV_DEVICES=cuda:0,cuda:1 SECTIONS=realdev OUT=$O \
        timeout "${REALDEV_BUDGET_S:-570}" bash tests/gpu/bridge.sh ;;
*)
    echo "gpu_x2_bridge.sh: PART is bench or realdev, not '$PART'" >&2; exit 2 ;;
esac
