"""The GPU's source of the tensor-level record (_history.Allocator), over a
stand-in for torch.cuda.memory: what it asks the caching allocator to keep,
and how it turns the allocator's trace into the record's rows. The CPU has
no caching allocator, so this is the only run its code gets off a GPU
(tests/gpu/bridge.sh runs it for real).

Run: /usr/bin/python3 tests/bridge/test_allocator.py
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

from memsplit_bridge import _history  # noqa: E402


class Memory:
    """torch.cuda.memory's three calls the source makes; `old` is a torch
    whose _record_memory_history has no skip_actions."""

    def __init__(self, trace, old=False):
        self.trace, self.old, self.calls = trace, old, []

    def _record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=0,
                               clear_history=False, **kw):
        if self.old and kw:
            raise TypeError("_record_memory_history() got an unexpected keyword argument 'skip_actions'")
        self.calls.append((enabled, context, max_entries, clear_history, kw.get("skip_actions")))

    def _set_memory_metadata(self, text):
        pass

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


if __name__ == "__main__":
    unittest.main()
