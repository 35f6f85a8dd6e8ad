"""sdpa_time.py — torch's scaled_dot_product_attention (cuDNN's flash
kernels on an H200 with torch 2.x) on bench/attn_tune.cu's two shapes,
causal bf16: forward, and forward + backward minus forward, cudaEvent
median of 15; then torch.profiler's per-kernel times of five
forward + backward calls, so cuDNN's main kernels can be set beside
attn_tune's (issue 15). A developer's tool: it needs a GPU and torch.

    python3 bench/sdpa_time.py [WARM]

WARM (default 3): warm-up calls before each timing; hundreds keep the GPU
busy long enough to see a power-bound step's clocks. The backward figure
includes autograd's gradient additions for q, k, v (three elementwise
kernels in the profiler's list)."""
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

WARM = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def med(f, n=15):
    for _ in range(WARM):
        f()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[n // 2]


def device_us(e):
    """an event's own device time (the attribute's name moved in torch 2.x)"""
    return getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0))


for name, B, nh, T, hs in [("seed17", 15, 16, 2048, 128), ("gpt2s", 16, 12, 1024, 64)]:
    q, k, v = (torch.randn(B, nh, T, hs, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    go = torch.randn(B, nh, T, hs, device="cuda", dtype=torch.bfloat16)

    def fb():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(go)

    fwd = med(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    both = med(fb)
    fl = 2.0 * B * nh * T * T * hs  # attn_tune's convention: causal, bwd 2.5x
    print(f"{name} sdpa fwd {fwd:.3f} ms {fl / fwd / 1e9:.1f} TFLOP/s  "
          f"bwd {both - fwd:.3f} ms {2.5 * fl / (both - fwd) / 1e9:.1f} TFLOP/s")
    for _ in range(WARM):
        fb()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fb()
        torch.cuda.synchronize()
    for e in sorted(prof.key_averages(), key=lambda e: -device_us(e))[:6]:
        print(f"   {device_us(e) / 5 / 1000:7.3f} ms/iter  x{e.count / 5:.0f}  {e.key[:90]}")
