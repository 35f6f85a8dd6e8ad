"""The rerun's backward on one thread over distinct devices
(_session._one_backward_thread, docs/bridge.md "The autograd engine's
threads"): which plans switch torch's per-device threads off, and what a
torch without the switch (1.13) is told. torch stands in as a namespace
that records the call, so the decision runs on any torch; the switch itself
is torch's, measured on a GPU.

Run: /usr/bin/python3 tests/bridge/test_engine_threads.py
"""
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

from memsplit_bridge import _session  # noqa: E402


class Lib:
    def __init__(self):
        self.warnings = []

    def warn(self, kind, text):
        self.warnings.append((kind, text))


def fake_torch(switch=True):
    """torch with set_multithreading_enabled recording its calls and
    returning a guard (torch 2.0's gives the threads back when dropped)."""
    calls = []
    autograd = types.SimpleNamespace()
    if switch:
        def set_multithreading_enabled(mode):
            calls.append(mode)
            return ("guard", len(calls))
        autograd.set_multithreading_enabled = set_multithreading_enabled
    return types.SimpleNamespace(autograd=autograd, __version__="9.9"), calls


class OneBackwardThread(unittest.TestCase):
    def setUp(self):
        os.environ.pop("MEMSPLIT_BRIDGE_TEST_ENGINE_THREADS", None)
        self.s = types.SimpleNamespace(lib=Lib())

    def run_plan(self, devices, switch=True):
        torch, calls = fake_torch(switch)
        _session._one_backward_thread(torch, self.s, {d: [i] for i, d in enumerate(devices)})
        return calls

    def test_distinct_devices_run_one_thread(self):
        self.assertEqual(self.run_plan(["cuda:0", "cpu"]), [False])
        self.assertEqual(self.s.one_backward_thread, ("guard", 1))     # held for the run, not dropped
        self.assertEqual(self.run_plan(["cuda:0", "cuda:1"]), [False])
        self.assertEqual(self.run_plan(["cuda:1", "cuda:0", "cpu"]), [False])
        self.assertEqual(self.s.lib.warnings, [])

    def test_one_device_keeps_torchs_threads(self):
        # virtual devices: every stage on one physical device, whose one thread keeps the record's order
        self.assertEqual(self.run_plan(["cuda:0"]), [])
        self.assertEqual(self.run_plan(["cpu"]), [])
        self.assertEqual(self.run_plan(["cuda:0/0", "cuda:0/1"]), [])
        self.assertEqual(self.s.lib.warnings, [])

    def test_measuring_switch_keeps_torchs_threads(self):
        os.environ["MEMSPLIT_BRIDGE_TEST_ENGINE_THREADS"] = "1"
        try:
            self.assertEqual(self.run_plan(["cuda:0", "cpu"]), [])
        finally:
            del os.environ["MEMSPLIT_BRIDGE_TEST_ENGINE_THREADS"]

    def test_torch_without_the_switch_is_said(self):
        self.assertEqual(self.run_plan(["cuda:0", "cpu"], switch=False), [])
        (kind, text), = self.s.lib.warnings
        self.assertEqual(kind, "backward")
        self.assertIn("torch 9.9 runs the backward of each of cpu, cuda:0 on a thread of its own", text)


if __name__ == "__main__":
    unittest.main()
