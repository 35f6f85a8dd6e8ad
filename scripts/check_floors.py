#!/usr/bin/env python3
"""check_floors.py — every #include "..." of the project's own headers runs
down the floors (README.md, "Layout"), never up or sideways.

A file in a floor's folder may include headers of its own folder and of any
folder on a lower floor. Folders on one floor know nothing of each other.
tests/ and bench/ stand above everything and are not checked. Also checked:
only mpi/ includes mpi.h (so that build/memsplit never needs libmpi), and
every top-level folder with C, CUDA or header files has a floor, so a new
folder cannot dodge the check. Exit status 0 when all is well, 1 (with each
offending line) when not. Standard library only; run from anywhere.
"""
import os
import re
import sys

# floor number: lower floors are included by higher ones, never the reverse
FLOORS = {
    "vocab": 0,      # the ground floor: categories, phases, rows, plans, memory events, JSON helpers
    "kernels": 0,    # every numeric op, CUDA and CPU; includes nothing of the others
    "trainer": 1,    # model, devices, allocator, pipeline, checkpoints, NVTX ranges
    "profiler": 2,   # the trial, CUPTI, isolation, kernel times
    "planner": 2,    # the search for a plan
    "reports": 2,    # the run database, terminal and HTML reports
    "mpi": 2,        # the MPI transport and the launch checks (the only mpi.h)
    "bridge": 3,     # the PyTorch bridge's C side (its injection library uses the profiler's CUPTI tracer)
    "run": 4,        # the loop: trials, plans, reruns, recovery, records, doctor
    "cli": 5,        # the front ends: memsplit and memsplit-rank
}
NOT_FLOORS = {"tests", "bench", "scripts", "docs"}
SOURCE = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
MPI_H = re.compile(r'^\s*#\s*include\s*<mpi\.h>')


def sources(root):
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top.startswith(".") or top.startswith("build") or top in NOT_FLOORS:
            continue
        for dirpath, dirnames, files in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if d != "python" and not d.startswith("."))
            for f in sorted(files):
                if f.endswith(SOURCE):
                    yield top, os.path.relpath(os.path.join(dirpath, f), root)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, n_inc, n_files = [], 0, 0
    for top, rel in sources(root):
        if top not in FLOORS:
            bad.append(f"{rel}: folder {top}/ has no floor in scripts/check_floors.py (and README's layout)")
            continue
        n_files += 1
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if MPI_H.match(line) and top != "mpi":
                    bad.append(f"{rel}:{lineno}: includes mpi.h outside mpi/")
                m = INCLUDE.match(line)
                if not m or "/" not in m.group(1):
                    continue   # a system header, or one beside the file
                n_inc += 1
                to = m.group(1).split("/")[0]
                if to not in FLOORS:
                    bad.append(f"{rel}:{lineno}: includes {m.group(1)}, which is on no floor")
                elif to != top and FLOORS[to] >= FLOORS[top]:
                    way = "up" if FLOORS[to] > FLOORS[top] else "sideways"
                    bad.append(f"{rel}:{lineno}: {top}/ (floor {FLOORS[top]}) includes {m.group(1)} "
                               f"(floor {FLOORS[to]}): runs {way}")
    for b in bad:
        print("floors: " + b)
    if bad:
        print(f"floors: {len(bad)} include(s) run the wrong way")
        return 1
    print(f"floors: {n_inc} includes in {n_files} files, none runs up or sideways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
