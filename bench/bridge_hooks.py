"""What the bridge's module hooks cost a program per module call, on the
CPU, with nothing else of the bridge running (no tensor tracker, no
parent): the Python the program pays at every nn.Module call in a
diagnose-only trial or a rerun on real devices (issue 40).

A model's training step (forward and backward) is timed alone, with the
bridge's global hooks (its Session registered as a trial registers it),
and with the hooks a whole iteration leaves: on the modules the hooks act
on only (Session.hear_needed). The difference per module call is printed,
with the calls per step.

  python3 bench/bridge_hooks.py [--model blocks|resnet50|resnet152] [--steps N]

Needs the bridge built (make bridge): it loads build/bridge's library,
unconnected, so that events cost nothing and only the hooks are timed.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "bridge", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from memsplit_bridge import _lib, _session  # noqa: E402


def model_of(name):
    if name.startswith("resnet"):
        import torchvision
        return getattr(torchvision.models, name)(num_classes=10), lambda: torch.randn(2, 3, 32, 32)

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm, self.up, self.act, self.down = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

        def forward(self, x):
            return x + self.down(self.act(self.up(self.norm(x))))

    m = nn.Sequential(nn.Linear(8, 8), *[Block(8) for _ in range(48)], nn.Linear(8, 1))
    return m, lambda: torch.randn(1, 8)


def step(model, x):
    model(x()).float().sum().backward()


def timed(model, x, steps):
    for _ in range(3):
        step(model, x)
    best = float("inf")
    for _ in range(5):               # the best of five runs of `steps` steps: the least disturbed
        t0 = time.perf_counter()
        for _ in range(steps):
            step(model, x)
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="blocks")
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, x = model_of(a.model)
    calls = [0]
    counter = nn.modules.module.register_module_forward_pre_hook(lambda m, i: calls.__setitem__(0, calls[0] + 1))
    step(model, x)
    counter.remove()
    alone = timed(model, x, a.steps)

    lib = _lib.Lib(os.path.join(HERE, "..", "build", "bridge", "libmemsplit_bridge.so"))
    s = _session.Session(torch, lib, {})
    s.hear_all()
    hooked = timed(model, x, a.steps)          # registers the model at its first step, as a trial does
    s.hear_needed()                            # what a whole iteration ends with: hooks on the heard modules
    local = timed(model, x, a.steps)
    for h in s.local_hooks:
        h.remove()
    print("bridge_hooks: %s, %d module calls a forward, %d units, %d modules hooked after the first iteration: "
          "step %.2f ms alone; global hooks %.2f ms, %.2f us a module call; after the first iteration %.2f ms, "
          "%.2f us a module call" % (a.model, calls[0], s.n_blocks, len(s.local_hooks) // 2, alone * 1e3,
                                     hooked * 1e3, (hooked - alone) * 1e6 / calls[0], local * 1e3,
                                     (local - alone) * 1e6 / calls[0]))


if __name__ == "__main__":
    main()
