"""bench/gpu_idle.py — is a program's step the GPU's time or the CPU's?

    python3 bench/gpu_idle.py [--last K] -- PROGRAM.py [ARGS...]
    memsplit profile --diagnose-only --no-cupti --steps 14 -- \\
        python3 bench/gpu_idle.py -- tests/gpu/bridge/tv_resnet_amp.py --batch 128 --steps 12

Runs the Python program in this process under torch.profiler (CPU and
CUDA) and cuts its time at each cudaDeviceSynchronize: the programs of
bench/programs.sh synchronize before and after each step, so a window of
10 ms or more between two is a step. For each of the last K steps (3): its
wall time, the time some kernel ran, and the rest, the GPU idle; then the
idle gaps of 20 us or more, summed by what the CPU's thread was doing when
each began (the innermost op then, or "no op" and the op before it: a
Python hook, memsplit's bridge, shows as "no op").

--no-cupti: torch.profiler needs CUPTI, which memsplit otherwise holds.
The profile of a whole run holds every op: keep the program short."""
import argparse
import bisect
import collections
import os
import runpy
import sys

import torch
from torch.autograd import DeviceType

STEP_US = 10000
GAP_US = 20


def busy_us(kernels, a, b):
    """Microseconds in [a, b) when some kernel ran (kernels sorted by start)."""
    total, cur = 0.0, a
    for s, e in kernels:
        if s >= b:
            break
        s, e = max(s, cur), min(e, b)
        if e > s:
            total += e - s
            cur = e
    return total


def doing(ops, starts, at):
    """What the CPU was doing at time at: the innermost op running, or the op before."""
    i = bisect.bisect_right(starts, at) - 1
    inner = before = None
    for j in range(i, max(-1, i - 4000), -1):
        s, e, name = ops[j]
        if s <= at < e:
            if inner is None or s >= inner[0]:
                inner = ops[j]
        elif before is None and e <= at:
            before = ops[j]
    return "in " + inner[2] if inner else "no op, after " + (before[2] if before else "?")


def report(prof, last):
    ev = prof.events()
    kernels = sorted((e.time_range.start, e.time_range.end) for e in ev if e.device_type == DeviceType.CUDA)
    cpu = sorted((e.time_range.start, e.time_range.end, e.name) for e in ev if e.device_type == DeviceType.CPU)
    syncs = [(s, e) for s, e, name in cpu if name == "cudaDeviceSynchronize"]
    steps = [(a[1], b[0]) for a, b in zip(syncs, syncs[1:]) if b[0] - a[1] >= STEP_US][-last:]
    if not steps:
        print("gpu_idle: no step (%d cudaDeviceSynchronize calls): does the program synchronize around its "
              "steps?" % len(syncs))
        return 1
    starts = [o[0] for o in cpu]
    idle, count = collections.Counter(), collections.Counter()
    for k, (s0, s1) in enumerate(steps):
        b = busy_us(kernels, s0, s1)
        print("gpu_idle: step -%d wall %.2f ms, kernels %.2f ms, GPU idle %.2f ms" % (
            len(steps) - k, (s1 - s0) / 1e3, b / 1e3, (s1 - s0 - b) / 1e3))
        cur = s0
        for s, e in kernels:
            if s >= s1:
                break
            if e <= s0:
                continue
            if s - cur >= GAP_US:
                what = doing(cpu, starts, cur)
                idle[what] += s - cur
                count[what] += 1
            cur = max(cur, e)
        if s1 - cur >= GAP_US:
            idle["after the step's last kernel"] += s1 - cur
            count["after the step's last kernel"] += 1
    print("gpu_idle: GPU idle by what the CPU was doing (ms over the %d steps, gaps):" % len(steps))
    for what, us in idle.most_common(25):
        print("  %8.2f %5d  %s" % (us / 1e3, count[what], what[:150]))
    return 0


def main():
    ap = argparse.ArgumentParser(usage="python3 bench/gpu_idle.py [--last K] -- PROGRAM.py [ARGS...]")
    ap.add_argument("--last", type=int, default=3, help="how many of the last steps to report (3)")
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    prog = a.program[1:] if a.program[:1] == ["--"] else a.program
    if not prog or a.last < 1:
        ap.error("a program to run, and --last at least 1")
    if not torch.cuda.is_available():
        print("gpu_idle: no GPU")
        return 1
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                              torch.profiler.ProfilerActivity.CUDA])
    sys.argv = prog
    sys.path.insert(0, os.path.dirname(os.path.abspath(prog[0])))   # its neighbours, as python3 PROG would
    with prof:
        try:
            runpy.run_path(prog[0], run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                print("gpu_idle: the program exited %s" % e.code)
    return report(prof, a.last)


if __name__ == "__main__":
    sys.exit(main())
