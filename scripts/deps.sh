#!/usr/bin/env bash
# deps.sh — install the Debian packages memsplit builds against, if missing
# (clang and libclang-rt-14-dev build the fuzz harnesses).
# Usage: scripts/deps.sh [--browser]   (--browser also installs chromium)
# Runs apt-get only when something is missing; needs root for that.
set -euo pipefail
need=()
have_hdr() { [ -e "/usr/include/$1" ] || [ -e "/usr/include/x86_64-linux-gnu/$1" ]; }
have_hdr jansson.h || need+=(libjansson-dev)
have_hdr ini.h     || need+=(libinih-dev)
have_hdr cmocka.h  || need+=(libcmocka-dev)
have_hdr sqlite3.h || need+=(libsqlite3-dev)
# OpenMPI for build/memsplit-rank and the multi-process tests (mpirun)
pkg-config --exists ompi-c 2>/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v sqlite3 >/dev/null || need+=(sqlite3)
# the PyTorch bridge's tests run programs with Debian's torch (CPU) under /usr/bin/python3
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
/usr/bin/python3 -c 'import torchvision' >/dev/null 2>&1 || need+=(python3-torchvision)
# the fuzz harnesses (tests/fuzz/): clang and its libFuzzer/sanitizer runtimes
command -v clang >/dev/null || need+=(clang)
dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q 'ok installed' || need+=(libclang-rt-14-dev)
if [ "${1:-}" = "--browser" ]; then
    command -v chromium >/dev/null || need+=(chromium)
fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "deps: installing ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
        echo "deps: missing ${need[*]} and not root; install them with apt-get" >&2; exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
