"""The GPU's source of the tensor-level record (_history.Allocator), over a
stand-in for torch.cuda.memory: what it asks the caching allocator to keep,
and how it turns the allocator's trace into the record's rows. The CPU has
no caching allocator, so this is the only run its code gets off a GPU
(tests/gpu/bridge.sh runs it for real). Then the record above the source
(_history.Record): which layer each of the optimizer phase's new tensors
is, when the allocator gives an address out again. And the dispatch
tracker's count of an operator's workspace (_track.Workspace) over a
stand-in for the allocator's counters.

Run: /usr/bin/python3 tests/bridge/test_allocator.py
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

from memsplit_bridge import _history, _track  # noqa: E402


class Memory:
    """torch.cuda.memory's three calls the source makes; `old` is a torch
    whose _record_memory_history has no skip_actions."""

    def __init__(self, trace, old=False, clears=False):
        self.trace, self.old, self.calls, self.clears = trace, old, [], clears
        self.meta = ""

    def alloc(self, addr, size):
        """The allocator gives a block out, with the thread's metadata."""
        self.trace.append(ev("alloc", addr, size, self.meta))

    def free(self, addr, size):
        self.trace.append(ev("free_completed", addr, size, self.meta))

    def _record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=0,
                               clear_history=False, **kw):
        if self.old and kw:
            raise TypeError("_record_memory_history() got an unexpected keyword argument 'skip_actions'")
        self.calls.append((enabled, context, max_entries, clear_history, kw.get("skip_actions")))
        if clear_history and self.clears:
            self.trace = []

    def _set_memory_metadata(self, text):
        self.meta = text

    def _snapshot(self):
        return {"segments": [{"blocks": []}], "device_traces": [list(self.trace)]}


class Torch:
    def __init__(self, memory):
        self.cuda = type("cuda", (), {"memory": memory})()


def ev(action, addr, size, tag="", t=0):
    return {"action": action, "addr": addr, "size": size, "user_metadata": tag, "time_us": t, "stream": 0}


TRACE = [ev("segment_alloc", 1 << 30, 2 << 20), ev("alloc", 4096, 512, "3", 10), ev("free_requested", 4096, 512, "4", 11),
         ev("free_completed", 4096, 512, "4", 12), ev("alloc", 8192, 1024, "", 13), ev("oom", 0, 1 << 40)]


class AllocatorSource(unittest.TestCase):
    def test_keeps_only_what_the_record_reads(self):
        mem = Memory(TRACE)
        a = _history.Allocator(Torch(mem))
        self.assertEqual(a.take(), ([], False))           # never started: no trace asked for
        a.start(0)
        enabled, context, entries, clear, skip = mem.calls[-1]
        self.assertEqual((enabled, context, clear), ("all", None, True))
        self.assertIn("free_requested", skip)
        self.assertNotIn("alloc", skip)
        self.assertNotIn("free_completed", skip)
        rows, overflow = a.take()
        self.assertEqual(rows, [(True, 4096, 512, "3", 10), (False, 4096, 512, "4", 12), (True, 8192, 1024, "", 13)])
        self.assertFalse(overflow)
        self.assertEqual(len(mem.calls), 2)               # the take started the next interval's trace

    def test_torch_without_skip_actions(self):
        mem = Memory(TRACE, old=True)
        a = _history.Allocator(Torch(mem))
        a.start(0)
        a.start()
        self.assertEqual([c[4] for c in mem.calls], [None, None])   # asked once, then never again
        self.assertFalse(a.skip)
        self.assertEqual(len(a.take()[0]), 3)

    def test_a_full_trace_is_said(self):
        mem = Memory(TRACE)
        a = _history.Allocator(Torch(mem))
        a.start(0)
        keep, _history._MAX_ENTRIES = _history._MAX_ENTRIES, len(TRACE)
        try:
            self.assertTrue(a.take()[1])
        finally:
            _history._MAX_ENTRIES = keep


class Lib:
    """The ledger's calls the record makes: replays kept, owners given."""

    def __init__(self, owners):
        self.owners, self.replays = owners, []

    def now_us(self):
        return 0.0

    def warn(self, kind, text):
        pass

    def owner(self, key, cat):
        return self.owners.get(key)

    def owner_device(self, key):
        return None

    def replay(self, ops, keys, sizes, cats, layers, phase, times, devs=None):
        self.replays.append((bytes(ops), list(keys), list(layers), phase))


class Session:
    def __init__(self, lib):
        self.lib, self.phase, self.sent = lib, 0, []

    def send(self, kind, **fields):
        self.sent.append(fields)


class OptimizerTemporaries(unittest.TestCase):
    def test_an_address_given_out_again_is_a_new_tensor(self):
        """In the optimizer phase the program makes a tensor of its own (the
        next micro-batch's tokens), frees it, and the optimizer's operator
        then gets the same address for a parameter's temporary: only the
        temporary is that parameter's layer's."""
        import torch
        param, tmp = torch.randn(8), torch.randn(8)
        p_addr, t_addr = param.data_ptr(), tmp.data_ptr()
        lib = Lib({p_addr: 1})
        src = _history.Emulated()
        rec = _history.Record(torch, Session(lib), src)
        rec.transition(-1, _history.PH_OPTIMIZER, {"layer": -1})
        src.alloc(t_addr, 544)              # the program's own tensor, outside any operator of the step
        src.free(t_addr)
        n = rec.op_begins()
        src.alloc(t_addr, 32)               # the operator's output, at the address given out again
        rec.optimizer_op((param,), tmp, n)
        rec.drain()
        ops, keys, layers, phase = lib.replays[-1]
        self.assertEqual(phase, _history.PH_OPTIMIZER)
        self.assertEqual(ops, b"afa")
        self.assertEqual(keys, [t_addr] * 3)
        self.assertEqual(layers, [-1, -1, 1])

    def test_a_new_tensor_at_a_gradients_old_address_is_nobodys(self):
        """The ledger still has a freed gradient's address (it learns at the
        next drain); a tensor the program makes there between micro-batches,
        and what is made from it, are no parameter's."""
        import torch
        fresh, made = torch.randn(8), torch.randn(8)
        lib = Lib({fresh.data_ptr(): 1})       # the gradient that was there, as the ledger has it
        src = _history.Emulated()
        rec = _history.Record(torch, Session(lib), src)
        rec.transition(-1, _history.PH_OPTIMIZER, {"layer": -1})
        n = rec.op_begins()
        src.alloc(fresh.data_ptr(), 32)        # randint: no tensor input
        rec.optimizer_op((), fresh, n, {"generator": None})
        n = rec.op_begins()
        src.alloc(made.data_ptr(), 32)
        rec.optimizer_op((fresh,), made, n)
        rec.drain()
        self.assertEqual(lib.replays[-1][2], [-1, -1])

    def test_on_the_gpus_source(self):
        """The same through the caching allocator's trace (the stand-in):
        the optimizer's operator tags the allocations it makes."""
        import torch
        param, tmp = torch.randn(8), torch.randn(8)
        p_addr, t_addr = param.data_ptr(), tmp.data_ptr()
        lib = Lib({p_addr: 1})
        mem = Memory([], clears=True)
        src = _history.Allocator(Torch(mem))
        rec = _history.Record(torch, Session(lib), src)
        rec.start(0)
        rec.transition(-1, _history.PH_OPTIMIZER, {"layer": -1})
        mem.alloc(t_addr, 1024)             # the program's own, at the address the temporary gets next
        mem.free(t_addr, 1024)
        n = rec.op_begins()
        mem.alloc(t_addr, 512)
        rec.optimizer_op((param,), tmp, n)
        rec.drain()
        ops, keys, layers, phase = lib.replays[-1]
        self.assertEqual((ops, layers), (b"afa", [-1, -1, 1]))
        self.assertEqual(mem.trace, [])     # the drain's take started the next trace

    def test_the_gpus_optimizer_mode(self):
        """The optimizer phase's own dispatch mode (what runs on a GPU, where
        no tracker sees the operators), here over CPU tensors: it tags each
        operator before it runs and names the parameter its output is for."""
        import torch
        param = torch.randn(8)
        lib = Lib({param.data_ptr(): 2})
        mem = Memory([], clears=True)
        sess = Session(lib)
        rec = _history.Record(torch, sess, _history.Allocator(Torch(mem)))
        rec.start(0)
        rec.transition(-1, _history.PH_OPTIMIZER, {"layer": -1})
        sess.phase = _history.PH_OPTIMIZER
        rec.optimizer_begins()
        try:
            state = torch.zeros_like(param)       # Adam's state, made for the parameter
            tag = mem.meta
            mem.alloc(state.data_ptr(), 32)       # what the caching allocator would keep, with the tag
            loose = torch.randn(4)                # no parameter's
            mem.alloc(loose.data_ptr(), 16)
        finally:
            rec.optimizer_ends()
        self.assertEqual(tag, "1.1")
        self.assertIsNone(rec.mode)
        rec.drain()
        self.assertEqual(lib.replays[-1][2], [2, -1])

    def test_tags_carry_the_interval(self):
        self.assertEqual([_history._tag_seq(t) for t in ("12", "12.3", "", "x")], [12, 12, 0, 0])
        self.assertEqual([_history._tag_op(t) for t in ("12", "12.3", "", "7.x")], [0, 3, 0, 0])


class Counters:
    """The caching allocator's allocated and reserved counters, as
    torch._C._cuda_memoryStats nests them, and its peak reset."""

    def __init__(self):
        self.a = self.a_peak = self.r = self.r_peak = 0
        self.devices = []

    def alloc(self, n, reserve=0):
        self.a += n
        self.r += reserve
        self.a_peak, self.r_peak = max(self.a_peak, self.a), max(self.r_peak, self.r)

    def stats(self, device):
        self.devices.append(device)
        return {"allocated_bytes": {"all": {"current": self.a, "peak": self.a_peak}},
                "reserved_bytes": {"all": {"current": self.r, "peak": self.r_peak}}}

    def reset(self, device):
        self.devices.append(device)
        self.a_peak, self.r_peak = self.a, self.r


class GpuSession:
    def __init__(self, counters):
        self.real = {"nested_stats": counters.stats, "reset_peaks": counters.reset}
        self.dev_index = 1
        self.peaks = [0, 0]


class OperatorWorkspace(unittest.TestCase):
    def test_what_an_operator_gives_back_inside_itself(self):
        c = Counters()
        c.alloc(1000, 4096)                   # the program's tensors before
        s = GpuSession(c)
        w = _track.Workspace(s)
        w.begin("lstm")
        c.alloc(300)                          # its output
        c.alloc(2000, 2048)                   # its workspace, the segment it took
        c.alloc(-2000)                        # given back before it returns
        self.assertEqual(w.end("lstm"), 2000)
        self.assertEqual(s.peaks, [3300, 6144])     # the program's own peaks know it
        w.begin("add")
        c.alloc(300)
        self.assertEqual(w.end("add"), 0)            # an output alone: nothing inside
        # made and freed between two operators, outside the dispatcher (none of torch's own
        # allocations are): no operator's, and its peak is not counted (Workspace's limit)
        c.alloc(5000)
        c.alloc(-5000)
        w.begin("mul")
        self.assertEqual(w.end("mul"), 0)
        self.assertEqual(set(c.devices), {1})        # the session's GPU's counters
        # the highest peaks since the last transition read them (Session.stats), then anew
        self.assertEqual(w.interval(), (3300, 6144))
        self.assertEqual(w.interval(), (0, 0))

    def test_the_tests_stand_in(self):
        w = _track.TestWorkspace("mm=4096, addmm=512,x=y")     # what does not parse: nothing
        mm = type("op", (), {"__name__": "mm.default"})()
        relu = type("op", (), {"__name__": "relu.default"})()
        w.begin(mm)
        self.assertEqual((w.end(mm), w.end(relu), w.interval()), (4096, 0, (0, 0)))


if __name__ == "__main__":
    unittest.main()
