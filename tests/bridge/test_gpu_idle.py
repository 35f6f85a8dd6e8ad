"""bench/gpu_idle.py's accounting, on made-up profiler events (the CPU has
no kernels to profile): steps are the windows of 10 ms or more between two
cudaDeviceSynchronize calls, the GPU's idle time is each step's time with
no kernel running (overlapping kernels counted once), and each gap is put
to what the CPU's thread was doing when it began.

Run: /usr/bin/python3 tests/bridge/test_gpu_idle.py
"""
import contextlib
import io
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))

from torch.autograd import DeviceType  # noqa: E402

import gpu_idle  # noqa: E402


def ev(dev, start, end, name="kernel"):
    return types.SimpleNamespace(device_type=dev, name=name, time_range=types.SimpleNamespace(start=start, end=end))


class GpuIdle(unittest.TestCase):
    def run_report(self, events, last):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = gpu_idle.report(types.SimpleNamespace(events=lambda: events), last)
        return rc, out.getvalue()

    def test_steps_idle_and_what_the_cpu_did(self):
        C, G = DeviceType.CPU, DeviceType.CUDA
        events, t = [], 0
        for step in range(4):
            events.append(ev(C, t, t + 100, "cudaDeviceSynchronize"))
            t += 100
            events += [ev(C, t + 10, t + 5000, "aten::conv2d"),
                       ev(G, t + 50, t + 8000), ev(G, t + 4000, t + 6000),    # overlapping: counted once
                       ev(G, t + 9000, t + 20000), ev(C, t + 7000, t + 7500, "aten::add")]
            t += 20500 + step        # the steps differ, so that the last three are the ones reported
            events.append(ev(C, t, t + 100, "cudaDeviceSynchronize"))
            t += 400                 # between two steps: under 10 ms, not a step
        rc, out = self.run_report(events, 3)
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertEqual(lines[0], "gpu_idle: step -3 wall 20.50 ms, kernels 18.95 ms, GPU idle 1.55 ms")
        self.assertEqual(lines[2], "gpu_idle: step -1 wall 20.50 ms, kernels 18.95 ms, GPU idle 1.55 ms")
        # per step: 50 us before the first kernel, 1000 us with the CPU past aten::add, 501-503 us at the end
        self.assertIn("      3.00     3  no op, after aten::add", lines)
        self.assertIn("      1.51     3  after the step's last kernel", lines)
        self.assertIn("      0.15     3  no op, after cudaDeviceSynchronize", lines)

    def test_a_gap_inside_an_op_names_the_innermost(self):
        C, G = DeviceType.CPU, DeviceType.CUDA
        events = [ev(C, 0, 10, "cudaDeviceSynchronize"), ev(G, 10, 1000),
                  ev(C, 500, 9000, "Optimizer.step#SGD.step"), ev(C, 900, 3000, "aten::_foreach_add_"),
                  ev(G, 2000, 20000), ev(C, 20000, 20010, "cudaDeviceSynchronize")]
        rc, out = self.run_report(events, 3)
        self.assertEqual(rc, 0)
        self.assertIn("      1.00     1  in aten::_foreach_add_", out.splitlines())

    def test_no_step_is_said(self):
        rc, out = self.run_report([ev(DeviceType.CPU, 0, 10, "aten::add")], 3)
        self.assertEqual(rc, 1)
        self.assertIn("no step (0 cudaDeviceSynchronize calls)", out)


if __name__ == "__main__":
    unittest.main()
