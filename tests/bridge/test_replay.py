"""A step's relabels on a plan's stages, batched (issue 40).

Without the tensor tracker (a GPU rerun on real devices, a GPU diagnosis)
the bridge registers each gradient and optimizer-state storage itself at
the step's end. On a plan each goes to its layer's stage. They go out in
one msb_replay per step, with a device per event, where they went one
ctypes call and one line each. This runs Session.relabel's own code with
the real C library, over a socket this test reads as the parent would;
only the tracker is left out (the CPU always has one).

Run: MEMSPLIT_BRIDGE_LIB=build/bridge/libmemsplit_bridge.so /usr/bin/python3 tests/bridge/test_replay.py
"""
import ctypes
import json
import os
import socket
import sys
import tempfile
import time
import unittest
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

import torch  # noqa: E402

from memsplit_bridge import _history, _lib, _session  # noqa: E402
from memsplit_bridge._lib import CAT, PH_OPTIMIZER  # noqa: E402

LIB = os.environ.get("MEMSPLIT_BRIDGE_LIB") or os.path.join(HERE, "..", "..", "build", "bridge",
                                                             "libmemsplit_bridge.so")


class Stages:
    """The applier's answer the relabels ask for: each layer's stage."""

    def __init__(self, stage_of_layer):
        self.stage_of_layer = stage_of_layer


class Replay(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        path = os.path.join(cls.dir, "s")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        os.environ["MEMSPLIT_BRIDGE_SOCK"] = path
        cls.lib = _lib.Lib(LIB)
        cls.conn, _ = server.accept()
        server.close()
        cls.conn.settimeout(5)
        cls.buf = b""

    def lines(self):
        """Every line the library wrote since the last call."""
        self.conn.setblocking(False)
        try:
            while True:
                chunk = self.conn.recv(1 << 20)
                if not chunk:
                    break
                self.buf += chunk
        except BlockingIOError:
            pass
        finally:
            self.conn.settimeout(5)
        *done, self.buf = self.buf.split(b"\n")
        return [json.loads(x) for x in done]

    def session(self, stage_of_layer):
        s = _session.Session(torch, self.lib, {})
        s.applier = Stages(stage_of_layer)
        self.assertIsNone(s.tracker)
        self.assertIsNone(s.record)
        return s

    def test_a_steps_relabels_go_to_their_stages_in_one_batch(self):
        self.assertTrue(self.lib.connected)
        self.lines()
        s = self.session({0: 0, 1: 1, 2: 1})
        params = [torch.nn.Parameter(torch.rand(64 + 8 * i)) for i in range(3)]
        grads = [torch.rand_like(p) for p in params]
        run = _history.Run(self.lib)
        for layer, (p, g) in enumerate(zip(params, grads)):
            s.relabel(g, CAT["grad"], layer, owner=p, run=run, at_start=True)
        self.assertEqual(self.lines(), [])               # nothing before the flush
        run.flush(PH_OPTIMIZER)
        out = self.lines()
        self.assertEqual([x["ev"] for x in out], ["m"])  # one line for the step
        m = out[0]
        self.assertEqual(m["o"], "aaa")
        self.assertEqual(m["d"], [0, 1, 1])
        self.assertEqual(m["c"], [CAT["grad"]] * 3)
        self.assertEqual(m["l"], [0, 1, 2])
        self.assertEqual(m["p"], PH_OPTIMIZER)
        for layer, g in enumerate(grads):
            key, nbytes = s.storage_key(g)
            self.assertEqual(m["k"][layer], key)
            self.assertEqual(m["b"][layer], nbytes)
            self.assertEqual(self.lib.owner_device(key), s.applier.stage_of_layer[layer])
            self.assertEqual(self.lib.owner(key, CAT["grad"]), layer)
        # the next step: the same storages are only relabelled where their label changed; a new
        # storage for an owner replaces its old one (freed, then allocated on its stage)
        run = _history.Run(self.lib)
        fresh = torch.rand_like(params[2])
        for layer, (p, g) in enumerate(zip(params, grads[:2] + [fresh])):
            s.relabel(g, CAT["grad"], layer, owner=p, run=run, at_start=True)
        run.flush(PH_OPTIMIZER)
        out = self.lines()
        self.assertEqual([x["ev"] for x in out], ["m"])
        self.assertEqual(out[0]["o"], "fa")
        self.assertEqual(out[0]["k"], [s.storage_key(grads[2])[0], s.storage_key(fresh)[0]])
        self.assertEqual(out[0]["d"], [0, 1])
        self.assertIsNone(self.lib.owner_device(s.storage_key(grads[2])[0]))
        self.assertEqual(self.lib.owner_device(s.storage_key(fresh)[0]), 1)
        # a step that changes nothing sends nothing and looks up no storage; a new label, a view
        # into a storage, and a new storage at another address are looked up and sent
        looked = []
        real = s.storage_key
        s.storage_key = lambda t: looked.append(t) or real(t)
        run = _history.Run(self.lib)
        for layer, (p, g) in enumerate(zip(params, grads[:2] + [fresh])):
            s.relabel(g, CAT["grad"], layer, owner=p, run=run, at_start=True)
        run.flush(PH_OPTIMIZER)
        self.assertEqual((looked, self.lines()), ([], []))
        run = _history.Run(self.lib)
        flat = torch.rand(params[1].numel() + 8)
        view = flat[8:]
        moved = torch.rand_like(params[2])
        s.relabel(grads[0], CAT["grad"], 2, owner=params[0], run=run, at_start=True)   # its label changed
        s.relabel(view, CAT["grad"], 1, owner=params[1], run=run, at_start=True)
        s.relabel(moved, CAT["grad"], 2, owner=params[2], run=run, at_start=True)
        run.flush(PH_OPTIMIZER)
        self.assertEqual(len(looked), 3)
        out = self.lines()
        self.assertEqual(out[0]["o"], "rfafa")
        self.assertEqual(self.lib.owner(s.storage_key(grads[0])[0], CAT["grad"]), 2)
        self.assertEqual(self.lib.owner(s.storage_key(flat)[0], CAT["grad"]), 1)
        self.assertEqual(out[0]["b"][2], s.storage_key(flat)[1])      # the whole storage the view is in

    def test_storages_that_change_hands_stay_counted(self):
        # the allocator gives the gradients it freed at zero_grad to other parameters' next ones: two
        # parameters' gradients swap storages, and a third's (no gradient this step) goes to one of them.
        # One by one, a new storage at an address whose record was still there took its place and then
        # lost its own to that record's free (ResNet-18 on the CPU: 44.7 MB of gradients counted after
        # step 1, 23.5 MB after step 8)
        self.lines()
        s = self.session({0: 0, 1: 0, 2: 0})
        params = [torch.nn.Parameter(torch.rand(256)) for _ in range(3)]
        a, b, c = (torch.rand(256) for _ in range(3))
        self.lib.c.msb_live.restype = ctypes.c_uint64
        base = self.lib.c.msb_live(0, CAT["grad"])         # the other tests' storages

        def step(grads):
            run = _history.Run(self.lib)
            s.relabel_many([(g, layer, p) for layer, (p, g) in enumerate(zip(params, grads)) if g is not None],
                           CAT["grad"], run, at_start=True)
            run.flush(PH_OPTIMIZER)
            self.lines()
            live = [g for g in grads if g is not None]
            return self.lib.c.msb_live(0, CAT["grad"]) - base, sum(s.storage_key(g)[1] for g in live)

        got, truth = step([a, b, c])
        self.assertEqual(got, truth)
        got, truth = step([b, a, c])             # the first two swapped
        self.assertEqual(got, truth)
        self.assertEqual((self.lib.owner(s.storage_key(a)[0], CAT["grad"]),
                          self.lib.owner(s.storage_key(b)[0], CAT["grad"])), (1, 0))
        got, truth = step([c, a, None])           # the third's storage, freed unseen, to the first
        self.assertEqual(got, truth)
        self.assertEqual(self.lib.owner(s.storage_key(c)[0], CAT["grad"]), 0)
        self.assertIsNone(self.lib.owner_device(s.storage_key(b)[0]))
        got, truth = step([b, a, c])              # the third has one again
        self.assertEqual(got, truth)
        for layer, g in enumerate((b, a, c)):
            self.assertEqual(self.lib.owner(s.storage_key(g)[0], CAT["grad"]), layer)

    def test_the_parameters_walked_again_only_when_they_may_change(self):
        s = self.session({0: 0, 1: 0})
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        s.root = model
        s.param_layer = {id(p): i // 2 for i, p in enumerate(model.parameters())}
        first = s.grad_params()
        self.assertEqual(first, list(model.parameters()))
        walks = []
        real = model.parameters
        model.parameters = lambda *a, **k: walks.append(1) or real(*a, **k)
        self.assertEqual(s.grad_params(), first)
        self.assertEqual(walks, [])                             # nothing changed: no walk
        old = model[1].bias
        model[1].bias = torch.nn.Parameter(torch.rand(2))        # a parameter replaced, the layers as many
        s.param_layer[id(model[1].bias)] = s.param_layer.pop(id(old))
        self.assertEqual(s.grad_params(), list(real()))
        self.assertEqual(walks, [1])
        self.assertFalse(any(p is old for p in s.grad_params()))
        # held weakly: a parameter dropped past register_parameter goes, and the walk is made again
        b0 = model[0].bias
        dropped = weakref.ref(b0)
        model[0]._parameters["bias"] = torch.nn.Parameter(torch.rand(4))
        s.param_layer[id(model[0].bias)] = s.param_layer.pop(id(b0))   # as many layers: the walk's key the same
        del b0, old, first
        self.assertIsNone(dropped())
        self.assertEqual(s.grad_params(), list(real()))

    def test_a_cap_refuses_in_its_place(self):
        # a stage's cap refuses an allocation as msb_alloc does: event x, the events before it first
        self.lines()
        self.lib.c.msb_set_capacity(3, 1000)
        s = self.session({0: 2, 1: 3})
        small, big = torch.rand(16), torch.rand(4096)
        pa, pb, pc = (torch.nn.Parameter(torch.rand(1)) for _ in range(3))
        run = _history.Run(self.lib)
        s.relabel(small, CAT["optim"], 0, owner=(id(pa), "m"), run=run)
        s.relabel(big, CAT["optim"], 1, owner=(id(pb), "m"), run=run)
        s.relabel(small + 1, CAT["optim"], 1, owner=(id(pc), "m"), run=run)
        kept = s.static_keys[(id(pc), "m"), CAT["optim"]]
        run.flush(PH_OPTIMIZER)
        out = self.lines()
        self.assertEqual([x["ev"] for x in out], ["m", "x", "m"])
        self.assertEqual(out[0]["d"], [2])
        self.assertEqual((out[1]["d"], out[1]["b"], out[1]["cap"]), (3, s.storage_key(big)[1], 1000))
        self.assertEqual(out[2]["d"], [3])
        self.assertIsNone(self.lib.owner_device(s.storage_key(big)[0]))
        self.assertEqual(self.lib.owner_device(kept), 3)
        self.lib.c.msb_set_capacity(3, 0)

    def test_device_zero_throughout_sends_no_devices(self):
        # the trial's record (one device) keeps its lines as they were
        self.lines()
        run = _history.Run(self.lib)
        t = torch.rand(32)
        run.add(b"a", s_key(t), 128, CAT["act"], 1, t=5.0)
        run.add(b"f", s_key(t), 0, 0, 0, t=6.0)
        run.flush(PH_OPTIMIZER)
        out = self.lines()
        self.assertEqual([x["ev"] for x in out], ["m"])
        self.assertNotIn("d", out[0])
        self.assertEqual(out[0]["o"], "af")

    def test_a_batch_line_says_every_number_exactly(self):
        """The batch's numbers, written by hand in C: the largest 64-bit
        key and size, zero, a layer of -1 (outside any), whole microseconds."""
        self.lines()
        keys, sizes = [2 ** 64 - 4096, 4096, 10 ** 12], [2 ** 64 - 1, 1, 512]
        self.lib.replay(b"aaf", keys, sizes, [7, 0, 0], [-1, 0, 0], PH_OPTIMIZER, [0.0, 9.5, 123456789.4])
        out = self.lines()
        self.assertEqual([x["ev"] for x in out], ["m"])
        m = out[0]
        self.assertEqual((m["o"], m["k"], m["b"], m["c"], m["l"], m["t"]),
                         ("aa", keys[:2], sizes[:2], [7, 0], [-1, 0], [0, 10]))   # 10**12 was never made: no f
        self.lib.replay(b"ff", keys[:2], [0, 0], [0, 0], [0, 0], PH_OPTIMIZER, [1.0, 2.0])
        self.assertEqual(self.lines()[0]["o"], "ff")

    def test_transitions_wait_in_a_rerun_and_keep_their_order(self):
        """msb_batch_transitions (a rerun): a unit boundary's line waits
        for the next other line, which it precedes, or for the flusher
        (about 10 ms); off, each goes at once."""
        self.lines()
        c = self.lib.c
        try:
            c.msb_batch_transitions(1)
            t0 = time.monotonic()
            for layer in (1, 2, 3):
                self.lib.transition(layer, 1, -1, -1, -1, -1, -1, -1, 0)
            early = self.lines()
            if time.monotonic() - t0 < 0.008:             # (a machine that stalled here flushed them)
                self.assertEqual(early, [])               # waiting
            self.lib.send("step", n=1)
            self.assertEqual([(x["ev"], x.get("l")) for x in early + self.lines()],
                             [("w", 1), ("w", 2), ("w", 3), ("step", None)])
            self.lib.transition(4, 2, -1, -1, -1, -1, -1, -1, 0)
            deadline = time.time() + 2
            got = []
            while not got and time.time() < deadline:     # the flusher's, with no other line after it
                time.sleep(0.005)
                got = self.lines()
            self.assertEqual([(x["ev"], x["l"], x["p"]) for x in got], [("w", 4, 2)])
            self.lib.transition(5, 1, -1, -1, -1, -1, -1, -1, 0)
            c.msb_batch_transitions(0)                     # turning it off sends what waits
            self.assertEqual([x["l"] for x in self.lines()], [5])   # (the flusher may have: one line either way)
        finally:
            c.msb_batch_transitions(0)
        self.lib.transition(6, 1, -1, -1, -1, -1, -1, -1, 0)
        self.assertEqual([x["l"] for x in self.lines()], [6])   # at once again

    def test_a_device_out_of_range_is_refused_whole(self):
        self.lines()
        n = 2
        rc = self.lib.c.msb_replay(n, b"aa", (_lib._u64 * n)(4096, 8192), (_lib._u64 * n)(8, 8),
                                   (_lib._int * n)(4, 4), (_lib._int * n)(0, 0), (_lib._int * n)(0, -1),
                                   PH_OPTIMIZER, (_lib._dbl * n)(1.0, 2.0))
        self.assertEqual(rc, -1)
        self.assertEqual(self.lines(), [])
        self.assertIsNone(self.lib.owner_device(4096))


def s_key(t):
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return st.data_ptr()


if __name__ == "__main__":
    unittest.main()
