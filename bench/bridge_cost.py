"""Where the bridge's own time goes in a whole training iteration, on the
CPU, by the bridge's functions (issue 40).

The GPU's paths of a diagnose-only trial (`--pass trial`) and of a rerun
(`--pass train`): no tensor tracker, the module hooks, the backward and
optimizer wrappers, the step's relabels, the events written to a socket
that a process of its own reads as memsplit would. Only the GPU's counters and
CUDA events are missing (the CPU has none). Each of the bridge's entry
points is timed where a program calls it (its own thread, backward's
included); a call inside another is counted in its caller's time too, and
"bridge" is the time outside the program, once.

  python3 bench/bridge_cost.py [--model resnet152] [--pass trial|train] [--steps N]

Needs the bridge built (make bridge). A program's step on a GPU host pays
this time on its CPU; where the CPU is the step's bound (ResNet-152 at
batch 128 on an H100 host), the step slows by it.
"""
import argparse
import collections
import os
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "bridge", "python"))

import torch  # noqa: E402

from memsplit_bridge import _lib, _session  # noqa: E402

TIMED = {_session.Session: ("pre_hook", "post_hook", "transition", "backward_begins", "backward_ends", "step_begins",
                            "step_ends", "relabel", "send"),
         _session._BackwardMark: ("__call__",), _session._BorrowMark: ("__call__",)}
spent = collections.defaultdict(float)
calls = collections.Counter()
local = threading.local()


def timed(name, f):
    def wrapper(*a, **k):
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            dt = time.perf_counter() - t0
            local.depth = depth
            spent[name] += dt
            calls[name] += 1
            if depth == 0:
                spent["bridge"] += dt
    return wrapper


def listen():
    """A socket the library writes its events to, read and dropped here."""
    path = os.path.join(tempfile.mkdtemp(), "s")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    os.environ["MEMSPLIT_BRIDGE_SOCK"] = path
    return server


def drain(server):
    """In a process of its own, as memsplit reads (a thread here would
    take the interpreter's lock from the program at each line)."""
    if os.fork() == 0:
        conn, _ = server.accept()
        while conn.recv(1 << 20):
            pass
        os._exit(0)
    server.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet152")
    ap.add_argument("--pass", dest="pass_", default="trial", choices=("trial", "train"))
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    import torchvision
    model = getattr(torchvision.models, a.model)(num_classes=10)
    x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
    server = listen()
    drain(server)
    lib = _lib.Lib(os.path.join(HERE, "..", "build", "bridge", "libmemsplit_bridge.so"))
    for cls, names in TIMED.items():
        for n in names:
            setattr(cls, n, timed("%s.%s" % (cls.__name__, n), getattr(cls, n)))
    s = _session.Session(torch, lib, {"steps": 0, "pass": a.pass_})
    s.hear_all()
    _session._wrap(torch.Tensor, "backward", lambda q: s.backward_begins(q), lambda q: s.backward_ends(),
                   lambda q: s.backward_failed())
    _session._install_step_wrappers(torch, s)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):               # the first registers the model; the hooks give way at its end
        step()
    spent.clear()
    calls.clear()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    wall = (time.perf_counter() - t0) / a.steps
    n = a.steps
    print("bridge_cost: %s, --pass %s, %d units, %d steps: step %.2f ms, the bridge %.3f ms of it" %
          (a.model, a.pass_, s.n_blocks, n, wall * 1e3, spent["bridge"] / n * 1e3))
    for name, t in sorted(spent.items(), key=lambda kv: -kv[1]):
        if name != "bridge":
            print("  %-28s %8.3f ms a step  %6d calls a step  %6.2f us a call" %
                  (name, t / n * 1e3, calls[name] // n, t / max(calls[name], 1) * 1e6))


if __name__ == "__main__":
    main()
