"""The innermost module found from Python frames (issue 40): the hooks of a
module inside a unit, below its top, keep quiet, so the module an OOM names
comes from the frames of the thread that ran out, both where the bridge
observes (Session.innermost) and where the ballast runs alone
(_watch_unobserved's traceback).

Run: /usr/bin/python3 tests/bridge/test_frames.py  (torch 1.13 or 2.x, CPU)
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from memsplit_bridge import _session  # noqa: E402


class Probe(nn.Module):
    """Calls `at` from inside its forward, through a helper method (no module frame)."""

    def __init__(self, at):
        super().__init__()
        self.lin, self.at = nn.Linear(4, 4), at

    def forward(self, x):
        return self._inner(self.lin(x))

    def _inner(self, x):
        self.at()
        return x


class Block(nn.Module):
    def __init__(self, at):
        super().__init__()
        self.norm, self.probe = nn.LayerNorm(4), Probe(at)

    def forward(self, x):
        return x + self.probe(self.norm(x))


class Model(nn.Module):
    def __init__(self, at):
        super().__init__()
        self.blocks = nn.ModuleList([Block(at) for _ in range(3)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Sent:
    def __init__(self):
        self.events = []

    def send(self, ev, **f):
        self.events.append(dict(f, ev=ev))

    def finish(self, reason, exc=None):
        self.events.append(dict(ev="done", reason=reason))


class Frames(unittest.TestCase):
    def test_innermost_is_the_deepest_module_running(self):
        seen = []
        model = Model(lambda: seen.append(s.innermost()))
        s = _session.Session(torch, None, {})
        s.path_of = {id(m): p for p, m in model.named_modules()}
        model(torch.randn(2, 4))
        paths = [s.path_of[id(m)] for m in seen]
        # the probe's helper frame is no module frame: the probe itself is innermost
        self.assertEqual(paths, ["blocks.%d.probe" % i for i in range(3)])

    def test_innermost_falls_back_to_the_stack(self):
        s = _session.Session(torch, None, {})
        self.assertIsNone(s.innermost())
        m = nn.Linear(2, 2)
        s.stack = [m]
        self.assertIs(s.innermost(), m)      # no module frame here: a backward's thread

    def test_a_module_outside_the_model_is_not_named(self):
        seen = []
        model = Model(lambda: seen.append(s.innermost()))
        s = _session.Session(torch, None, {})
        s.path_of = {id(model): ""}         # only the root is the program's model
        model(torch.randn(2, 4))
        self.assertEqual(seen, [model] * 3)

    @unittest.skipUnless(hasattr(torch.cuda, "OutOfMemoryError"), "torch has no OutOfMemoryError")
    def test_unobserved_oom_names_the_innermost_path(self):
        def boom():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (a test)")
        model = Model(boom)
        sent = Sent()
        hook = sys.excepthook
        calls = []
        sys.excepthook = lambda *a: calls.append(a)
        try:
            _session._watch_unobserved(torch, sent)
            try:
                model(torch.randn(2, 4))
            except torch.cuda.OutOfMemoryError:
                sys.excepthook(*sys.exc_info())
        finally:
            sys.excepthook = hook
        oom = [e for e in sent.events if e["ev"] == "oom"]
        self.assertEqual(len(oom), 1)
        self.assertEqual(oom[0]["module"], "blocks.0.probe")
        self.assertEqual(oom[0]["type"], "Probe")
        self.assertEqual(len(calls), 1)      # the program's own hook still runs


if __name__ == "__main__":
    unittest.main()
