"""torch's allocator history of a program, to check a stage's measured peak
against (docs/bridge.md, "Workspaces and libraries a split stage does not
have"). Two uses:

  ALLOC_HISTORY=out.pkl python3 alloc_history.py PROGRAM.py ARGS...
      runs PROGRAM.py (under memsplit too: memsplit train --plan P --
      python3 alloc_history.py ...) with cuda:0's allocator history on, and
      writes it with torch.cuda.max_memory_allocated() at exit
  python3 alloc_history.py --read out.pkl [SIZE_MIB K]
      the blocks live at the history's peak, by where they were made (or at
      the K-th allocation of SIZE_MIB MiB), with the events before it; needs
      no torch (it reads the file on a machine without a GPU)
"""
import collections
import os
import pickle
import sys

_SKIP = ("_track.py", "_ops.py", "eval_frame.py", "_compile.py")


def where(e):
    frames = [f for f in (e.get("frames") or []) if not f["filename"].endswith(_SKIP)]
    return " < ".join("%s:%d:%s" % (f["filename"].split("/")[-1], f["line"], f["name"]) for f in frames[:4]) \
        or "(autograd's engine: no Python frame)"


def live_at(trace, size=None, k=0):
    """(event index, {addr: (index, event)}): at the peak of live bytes, or
    at the k-th allocation of `size` MiB."""
    live, cur, best, n = {}, 0, (-1, 0, {}), 0
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = (i, e)
            cur += e["size"]
            if size is not None and round(e["size"] / 2**20, 2) == size:
                n += 1
                if n == k:
                    return i, dict(live)
        elif e["action"] == "free_requested" and e["addr"] in live:
            cur -= live.pop(e["addr"])[1]["size"]
        if size is None and cur > best[1]:
            best = (i, cur, dict(live))
    return best[0], best[2]


def read(path, size=None, k=0):
    d = pickle.load(open(path, "rb"))
    trace = d["traces"][0]
    at, live = live_at(trace, size, k)
    total = sum(e["size"] for _, e in live.values())
    print("%s: %d events; max_memory_allocated %.2f MiB; at event %d: %.2f MiB live in %d blocks" %
          (path, len(trace), d["max_allocated"] / 2**20, at, total / 2**20, len(live)))
    by, count = collections.Counter(), collections.Counter()
    for _, e in live.values():
        by[where(e)] += e["size"]
        count[where(e)] += 1
    for w, b in by.most_common(20):
        print("  %9.2f MiB %4d  %s" % (b / 2**20, count[w], w))
    print("  the events before it:")
    for e in trace[max(0, at - 10):at + 1]:
        print("    %-15s %9.2f MiB  %s" % (e["action"], e["size"] / 2**20, where(e)))


def run(out, argv):
    import runpy
    import atexit
    import torch
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=400000)

    def dump():
        snap = torch.cuda.memory._snapshot()
        with open(out, "wb") as f:
            pickle.dump({"traces": snap["device_traces"], "max_allocated": torch.cuda.max_memory_allocated()}, f)
    atexit.register(dump)
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--read":
        read(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else None, int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    elif len(sys.argv) >= 2 and os.environ.get("ALLOC_HISTORY"):
        run(os.environ["ALLOC_HISTORY"], sys.argv[1:])
    else:
        sys.exit(__doc__)
