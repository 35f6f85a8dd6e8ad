"""What the bridge reads from Python frames and the program's objects.

The innermost module (issue 40): the hooks of a module inside a unit, below
its top, keep quiet, so the module an OOM names comes from the frames of
the thread that ran out, both where the bridge observes (Session.innermost)
and where the ballast runs alone (_watch_unobserved's traceback).

Models trained together (issue 37): found from the program's optimizers at
the first training forward (Session.co_trained), and named as the program
names them (_model_names).

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

    def test_running_tells_a_nested_call_from_a_stale_stack(self):
        seen = []
        model = Model(lambda: seen.append((_session._running(torch, model.blocks[1]),
                                           _session._running(torch, model))))
        model(torch.randn(2, 4))
        self.assertEqual(seen, [(False, True), (True, True), (False, True)])
        self.assertFalse(_session._running(torch, model))     # returned: a stack holding it is stale

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


class Trainer:
    """A program's own trainer object, holding its models as attributes."""

    def __init__(self):
        self.gen, self.disc = nn.Linear(2, 2), nn.Linear(2, 1)

    def names(self):
        return _session._model_names(torch, [self.gen, self.disc])


class Models(unittest.TestCase):
    def test_co_trained_in_the_optimizers_order(self):
        G, D, C = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3)), nn.Sequential(nn.Linear(3, 1)), nn.Linear(3, 1)
        held = nn.ModuleList([D])          # the program's own container of D: the largest module wins
        frozen = nn.Linear(3, 3)           # noqa: F841 (alive, in no optimizer: not trained)
        s = _session.Session(torch, None, {})
        s.optimizers = [torch.optim.SGD(G.parameters(), lr=0.1),
                        torch.optim.Adam(list(C.parameters()) + list(D.parameters()))]
        self.assertEqual(s.co_trained(G), [C, held])
        s.optimizers = [torch.optim.SGD(G.parameters(), lr=0.1)]
        self.assertEqual(s.co_trained(G), [])          # one model: nothing to look for

    def test_one_walk_while_registering(self):
        # the models trained beside one and the models held are looked for in one
        # walk of the live objects while register() runs; a look at another time
        # walks anew (it sees what the program made since)
        G, C = nn.Linear(3, 3), nn.Linear(3, 1)
        s = _session.Session(torch, None, {})
        s.optimizers = [torch.optim.SGD(list(G.parameters()) + list(C.parameters()), lr=0.1)]
        walks = []
        real = _session._live_modules
        _session._live_modules = lambda t: walks.append(1) or real(t)
        try:
            s.keep_live = True
            self.assertEqual(s.co_trained(G), [C])
            self.assertEqual(s.co_trained(G), [C])
            self.assertEqual(len(walks), 1)
            s.live, s.keep_live = None, False
            s.co_trained(G)
            s.co_trained(G)
            self.assertEqual(len(walks), 3)
        finally:
            _session._live_modules = real

    def test_names_from_locals(self):
        G, D = nn.Linear(2, 2), nn.Linear(2, 1)
        self.assertEqual(_session._model_names(torch, [G, D]), ["G", "D"])

    def test_names_from_a_trainer_and_a_module(self):
        self.assertEqual(Trainer().names(), ["gen", "disc"])
        lm = nn.Module()
        lm.generator, lm.discriminator = nn.Linear(2, 2), nn.Linear(2, 1)

        def training_step(self):        # a LightningModule's method: self holds the models
            return _session._model_names(torch, [self.generator, self.discriminator])
        self.assertEqual(training_step(lm), ["generator", "discriminator"])

    def test_a_name_a_module_has_itself_is_not_taken(self):
        train, D = nn.Linear(2, 2), nn.Linear(2, 1)
        self.assertEqual(_session._model_names(torch, [train, D]), ["model0", "D"])

    def test_names_where_the_program_has_none(self):
        models = [nn.Linear(2, 2) for _ in range(2)]
        self.assertEqual(_session._model_names(torch, [models[0], models[1]]), ["model0", "model1"])


if __name__ == "__main__":
    unittest.main()
