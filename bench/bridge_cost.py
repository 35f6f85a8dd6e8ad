"""Where the bridge's own time goes in a whole training iteration, on the
CPU or a GPU, by the bridge's functions (issue 40).

The GPU's paths of a diagnose-only trial (`--pass trial`) and of a rerun
(`--pass train`): no tensor tracker, the module hooks, the backward and
optimizer wrappers, the step's relabels, the events written to a socket
that a process of its own reads as memsplit would. On the CPU only the
GPU's counters and CUDA events are missing. Each of the bridge's entry
points is timed where a program calls it (its own thread, backward's
included); a call inside another is counted in its caller's time too, and
"bridge" is the time outside the program, once.

  python3 bench/bridge_cost.py [--model resnet152] [--pass trial|train] [--steps N]
  python3 bench/bridge_cost.py --device cuda --batch 128 --size 224 --amp --bridge gpu-pack/bridge
  ... --parts: also the parts of a transition and of a relabel (the counters,
  the clock's event, the library's call, a storage's key): each part's
  wrapper costs about a microsecond, so the parts' callers read higher

On a GPU (--device cuda) the GPU's counters and CUDA events are read as in
a trial, and the program first runs alone in the same process: its median
step against the bridge's, on the same host and GPU. Needs the bridge
built (make bridge, or the pack's). A program's step pays this time on its
CPU; where the CPU is the step's bound (ResNet-152 at batch 128 on an H100
host), the step slows by it.
"""
import argparse
import collections
import os
import socket
import sys
import tempfile
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SESSION = ("pre_hook", "post_hook", "transition", "backward_begins", "backward_ends", "step_begins", "step_ends",
           "relabel", "relabel_many", "register_static", "static_move", "apply_static", "send")
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
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: the GPU's counters and CUDA events too")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=32, help="image height and width")
    ap.add_argument("--amp", action="store_true", help="fp16 autocast and a GradScaler (cuda)")
    ap.add_argument("--parts", action="store_true",
                    help="time the parts of a transition and of a relabel too (their wrappers add to their callers)")
    ap.add_argument("--bridge", default=os.path.join(HERE, "..", "build", "bridge"),
                    help="the built bridge: its libmemsplit_bridge.so (default build/bridge)")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if not cuda:
        torch.set_num_threads(1)
    import torchvision
    model = getattr(torchvision.models, a.model)(num_classes=10).to(dev)
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)   # (alone's)
    amp = a.amp and cuda
    scaler = torch.cuda.amp.GradScaler(enabled=amp)

    def step():
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    def steps(n):
        """The median step's ms of n (each to the GPU's end)."""
        ms = []
        for _ in range(n):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize()
            ms.append((time.perf_counter() - t0) * 1e3)
        return sorted(ms)[len(ms) // 2]

    alone = None
    if cuda:                          # the program alone first, in this process, on this GPU
        steps(3)
        alone = steps(a.steps)
    server = listen()
    drain(server)
    sys.path.insert(0, os.path.join(a.bridge, "python"))
    from memsplit_bridge import _lib, _session
    lib = _lib.Lib(os.path.join(a.bridge, "libmemsplit_bridge.so"))
    timed_here = {_session.Session: SESSION, _session._BackwardMark: ("__call__",),
                  _session._BorrowMark: ("__call__",)}
    for cls, names in timed_here.items():
        for n in names:
            if hasattr(cls, n):         # (an older bridge, compared with --bridge, may lack some)
                setattr(cls, n, timed("%s.%s" % (cls.__name__, n), getattr(cls, n)))
    if a.parts:
        for n in ("stats", "clock", "root_stream", "storage_key"):
            if hasattr(_session.Session, n):
                setattr(_session.Session, n, timed("Session.%s" % n, getattr(_session.Session, n)))
        for n in ("transition", "where"):       # the library's calls (ctypes), as the session makes them
            setattr(lib, n, timed("lib.%s" % n, getattr(lib, n)))
    s = _session.Session(torch, lib, {"steps": 0, "pass": a.pass_})
    if not s.per_interval:
        lib.c.msb_batch_transitions(1)      # as start() does for a rerun
    if cuda:
        _session._keep_peaks(torch, s)
        if a.parts:
            for n in ("nested_stats", "reset_peaks"):
                s.real[n] = timed("torch." + n, s.real[n])
    s.hear_all()
    _session._wrap(torch.Tensor, "backward", lambda q: s.backward_begins(q), lambda q: s.backward_ends(),
                   lambda q: s.backward_failed())
    _session._install_step_wrappers(torch, s)
    # an optimizer made now, as a program makes its own under memsplit: its step is wrapped
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    for _ in range(3):               # the first registers the model; the hooks give way at its end
        step()
    spent.clear()
    calls.clear()
    t0 = time.perf_counter()
    med = steps(a.steps)
    wall = (time.perf_counter() - t0) / a.steps
    n = a.steps
    print("bridge_cost: %s on %s, --pass %s, %d units, %d steps: step %.2f ms (median %.2f), the bridge %.3f ms "
          "of it" % (a.model, a.device, a.pass_, s.n_blocks, n, wall * 1e3, med, spent["bridge"] / n * 1e3))
    if alone is not None:
        print("  the program alone in this process: median %.2f ms; with the bridge %+.1f%%" %
              (alone, (med / alone - 1) * 100))
    for name, t in sorted(spent.items(), key=lambda kv: -kv[1]):
        if name != "bridge":
            print("  %-28s %8.3f ms a step  %6d calls a step  %6.2f us a call" %
                  (name, t / n * 1e3, calls[name] // n, t / max(calls[name], 1) * 1e6))


if __name__ == "__main__":
    main()
