"""The reference model's shape (issue 12): a `transformers` ModuleList of
(attn, ff) pairs between `segment1` and `segment2`, trained in plain PyTorch.
Small by default so it runs on the CPU in seconds; sizes from the command
line: --blocks --dim --seq --batch --steps --amp (bf16 autocast)."""
import argparse

import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(nn.functional, "scaled_dot_product_attention"):   # torch 2.x: fused attention
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:                                                        # torch 1.13: T x T scores
            att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Model(nn.Module):
    def __init__(self, vocab, d, heads, blocks):
        super().__init__()
        self.segment1 = nn.Embedding(vocab, d)
        self.transformers = nn.ModuleList(
            [nn.ModuleList([Attn(d, heads), nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(),
                                                          nn.Linear(4 * d, d))]) for _ in range(blocks)])
        self.segment2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab))

    def forward(self, idx):
        x = self.segment1(idx)
        for attn, ff in self.transformers:
            x = attn(x) + x
            x = ff(x) + x
        return self.segment2(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--report", default="", help="write a JSON of what torch itself counted here")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Model(a.vocab, a.dim, a.heads, a.blocks).to(a.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    import atexit
    import time
    times = []
    if a.report:    # at exit too: memsplit stops a trial inside the last step's optimizer
        atexit.register(lambda: _report(a.report, model, opt, times))
    for step in range(a.steps):
        t0 = time.perf_counter()
        idx = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g).to(a.device)
        with torch.autocast(device_type=a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.amp):
            logits = model(idx[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        lv = loss.item()        # waits for the step: the time below is the step's
        times.append((time.perf_counter() - t0) * 1e3)
        print("step %d loss %.4f ms %.2f" % (step, lv, times[-1]), flush=True)
        if a.report:
            _report(a.report, model, opt, times)


def _report(path, model, opt, times):
    """What torch itself counts, for the tests to compare the profile with."""
    import json
    dev = next(model.parameters()).device
    # bytes on the model's device, as the caching allocator counts them (512-byte blocks)
    blk = (lambda n: (n + 511) // 512 * 512) if dev.type == "cuda" else (lambda n: n)
    nb = lambda ts: sum(blk(t.numel() * t.element_size()) for t in ts if t.device == dev)
    state = [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    out = {"param": nb(model.parameters()), "grad": nb(p.grad for p in model.parameters() if p.grad is not None),
           "optim": nb(state), "step_ms": times}
    if torch.cuda.is_available():
        out["max_allocated"] = torch.cuda.max_memory_allocated()
        out["max_reserved"] = torch.cuda.max_memory_reserved()
        free, total = torch.cuda.mem_get_info()
        out["context"] = total - free - torch.cuda.memory_reserved()   # beyond the allocator (no ballast: uncapped)
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
