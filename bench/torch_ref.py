#!/usr/bin/env python3
"""torch_ref.py — the PyTorch reference of memsplit's model, for the benchmark.

The same model as trainer/model.c, layer_embed.c, layer_block.c, layer_head.c:
  token embedding wte [V,C] + position embedding wpe [T,C];
  n_layer pre-norm blocks:
      x = x + attn_proj(causal_attention(qkv(LN1(x))))
      x = x + proj(gelu_tanh(fc(LN2(x))))        (biases on every linear)
  final LayerNorm; untied LM head Linear(C, V, bias=False);
  cross-entropy, mean over tokens.
LayerNorm eps 1e-5 with weight and bias. Initial weights follow memsplit's
recipe (std 0.02, wpe 0.01, output projections 0.02/sqrt(2*n_layer)), drawn
by torch's generator (only the distribution matches, not the values).

Training as memsplit does it: AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8,
weight decay 0.1 on every parameter, fused where available), global
gradient-norm clipping at 1.0.

Precision: bf16 = torch.autocast(bfloat16) over fp32 parameters (the standard
mixed-precision recipe); fp32 = no autocast and TF32 off.

Measures: tokens/s and mean step time over the timed steps (warm-up steps
excluded; under --mode compile the compile time is reported separately),
the whole run's peak memory from the start (max_memory_allocated and
max_memory_reserved, never reset), and the device-wide figure including the
CUDA context (total - free from cudaMemGetInfo), which is what memsplit's
peak with its "reserve" category counts.

Prints ONE JSON object on stdout; progress goes to stderr. Runs offline.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def log(msg):
    print(f"torch_ref: {msg}", file=sys.stderr, flush=True)


class Block(nn.Module):
    def __init__(self, C, n_head, hidden, manual_attention):
        super().__init__()
        self.n_head = n_head
        self.manual_attention = manual_attention
        self.ln1 = nn.LayerNorm(C, eps=1e-5)
        self.qkv = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C, eps=1e-5)
        self.fc = nn.Linear(C, hidden)
        self.proj = nn.Linear(hidden, C)

    def attention(self, x):
        B, T, C = x.shape
        nh = self.n_head
        # memsplit's qkv rows are [q | k | v], each head a contiguous C/nh slice.
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, nh, C // nh).transpose(1, 2)
        k = k.view(B, T, nh, C // nh).transpose(1, 2)
        v = v.view(B, T, nh, C // nh).transpose(1, 2)
        if self.manual_attention:  # only for old torch without SDPA (CPU checks)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // nh))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, T, C)

    def forward(self, x):
        x = x + self.attn_proj(self.attention(self.ln1(x)))
        x = x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, n_layer, C, n_head, T, V, mlp_ratio=4, manual_attention=False):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(
            [Block(C, n_head, mlp_ratio * C, manual_attention) for _ in range(n_layer)])
        self.lnf = nn.LayerNorm(C, eps=1e-5)
        self.lm_head = nn.Linear(C, V, bias=False)
        self._init(n_layer)

    @torch.no_grad()
    def _init(self, n_layer):
        std, proj_std = 0.02, 0.02 / math.sqrt(2.0 * n_layer)
        nn.init.normal_(self.wte.weight, std=std)
        nn.init.normal_(self.wpe.weight, std=0.01)
        nn.init.normal_(self.lm_head.weight, std=std)
        for b in self.blocks:
            for lin, s in ((b.qkv, std), (b.attn_proj, proj_std), (b.fc, std), (b.proj, proj_std)):
                nn.init.normal_(lin.weight, std=s)
                nn.init.zeros_(lin.bias)

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.lm_head(self.lnf(x))
        return F.cross_entropy(logits.view(B * T, -1).float(), targets.reshape(B * T))


def splitmix_normals(seed, layer, tensor, n, std):
    """memsplit's initial values for one tensor (model.c: ms_layer_init_host):
    a splitmix64 stream seeded from (seed, layer, tensor index), Box-Muller
    pairs computed in double, rounded to float."""
    import numpy as np
    M = (1 << 64) - 1
    s0 = ((seed * 0x100000001B3) & M) ^ (layer << 20) ^ tensor
    draws = 2 * ((n + 1) // 2)
    with np.errstate(over="ignore"):
        k = np.arange(1, draws + 1, dtype=np.uint64)
        z = np.uint64(s0) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / 9007199254740992.0)
    u1, u2 = u[0::2], u[1::2]
    r = np.sqrt(-2.0 * np.log(u1))
    std = float(np.float32(std))  # memsplit keeps init_std as a float
    out = np.empty(draws, dtype=np.float64)
    out[0::2] = r * np.cos(6.283185307179586 * u2) * std
    out[1::2] = r * np.sin(6.283185307179586 * u2) * std
    return torch.from_numpy(out[:n].astype(np.float32))


def _s64(x):
    """A 64-bit pattern as the int64 that torch stores for it."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def _lshr(z, k):
    """Logical right shift of int64 bit patterns (torch's >> is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def splitmix_normals_torch(seed, layer, tensor, n, std, device, chunk=1 << 24):
    """splitmix_normals computed with torch on `device` (the GPU: seed17's
    1.4 G values take minutes in numpy and well under a second there).
    int64 products wrap like uint64 ones, so the bit patterns are the same;
    the double-precision log/sqrt/cos/sin of the device may differ from the
    host's in the last bit of a double, which after rounding to float
    changes about one value in 10^8 by one float ulp."""
    s0 = _s64(((seed * 0x100000001B3) & ((1 << 64) - 1)) ^ (layer << 20) ^ tensor)
    golden, m1, m2 = _s64(0x9E3779B97F4A7C15), _s64(0xBF58476D1CE4E5B9), _s64(0x94D049BB133111EB)
    std = float(torch.tensor(std, dtype=torch.float32))
    draws = 2 * ((n + 1) // 2)
    out = torch.empty(draws, dtype=torch.float32, device=device)
    for a in range(0, draws, chunk):  # chunk is even: Box-Muller pairs stay whole
        b = min(draws, a + chunk)
        z = torch.arange(a + 1, b + 1, dtype=torch.int64, device=device) * golden + s0
        z = (z ^ _lshr(z, 30)) * m1
        z = (z ^ _lshr(z, 27)) * m2
        z = z ^ _lshr(z, 31)
        u = (_lshr(z, 11).double() + 0.5) * (1.0 / 9007199254740992.0)
        del z
        u1, u2 = u[0::2], u[1::2]
        r = torch.sqrt(-2.0 * torch.log(u1))
        out[a:b:2] = (r * torch.cos(6.283185307179586 * u2) * std).float()
        out[a + 1:b:2] = (r * torch.sin(6.283185307179586 * u2) * std).float()
    return out[:n]


@torch.no_grad()
def init_like_memsplit(model, n_layer, seed, on_device=False):
    """The exact initial weights memsplit draws (layer 0 = embedding, block i =
    layer i, head = n_layer + 1; tensor indices in model.c's add_tensor order).
    Biases are 0 and norm weights 1 there, as in GPT._init. on_device: drawn
    by torch where the parameters live (splitmix_normals_torch), else by
    numpy on the host."""
    std, proj_std = 0.02, 0.02 / math.sqrt(2.0 * n_layer)

    def put(param, layer, tensor, s):
        if on_device:
            v = splitmix_normals_torch(seed, layer, tensor, param.numel(), s, param.device)
        else:
            v = splitmix_normals(seed, layer, tensor, param.numel(), s)
        param.copy_(v.view_as(param))

    put(model.wte.weight, 0, 0, std)
    put(model.wpe.weight, 0, 1, 0.01)
    for i, b in enumerate(model.blocks, start=1):
        put(b.qkv.weight, i, 0, std)
        put(b.attn_proj.weight, i, 2, proj_std)
        put(b.fc.weight, i, 4, std)
        put(b.proj.weight, i, 6, proj_std)
    put(model.lm_head.weight, n_layer + 1, 0, std)


def make_optimizer(model, args, device):
    kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    fused = False
    if device.type == "cuda":
        try:
            opt = torch.optim.AdamW(model.parameters(), fused=True, **kw)
            fused = True
            return opt, fused
        except (TypeError, RuntimeError, ValueError) as e:  # older torch: no fused AdamW
            log(f"fused AdamW unavailable ({e}); using the default implementation")
    return torch.optim.AdamW(model.parameters(), **kw), fused


def token_batches(args, n_batches):
    """Host tensors [n_batches, B, T+1]; inputs are [:, :, :-1], targets [:, :, 1:].
    builtin: random bytes < 128 from a fixed seed (memsplit's built-in corpus is
    ASCII text, so the same token range); uniform: random over the whole vocab;
    anything else: a file whose bytes are the tokens, read as memsplit's
    ms_data_next reads it (windows of T+1 tokens, the next one T later, a
    window past the end restarts at 0), so both see the same batches."""
    B, T, V = args.batch, args.seq_len, args.vocab
    need = n_batches * B * (T + 1)
    g = torch.Generator().manual_seed(args.seed)
    if args.data == "builtin":
        toks = torch.randint(0, min(128, V), (need,), generator=g)
    elif args.data == "uniform":
        toks = torch.randint(0, V, (need,), generator=g)
    else:
        with open(args.data, "rb") as f:
            raw = f.read()
        if len(raw) < B * (T + 1):
            raise SystemExit(f"torch_ref: {args.data} has {len(raw)} bytes; one batch needs {B * (T + 1)}")
        if V < 256:
            raise SystemExit("torch_ref: a byte file needs --vocab >= 256")
        seqs, cur = [], 0
        for _ in range(n_batches * B):
            if cur + T + 1 > len(raw):
                cur = 0
            seqs.append(raw[cur:cur + T + 1])
            cur += T
        return torch.tensor([list(q) for q in seqs], dtype=torch.long).view(n_batches, B, T + 1)
    return toks.view(n_batches, B, T + 1)


# torch.profiler's trace categories of device work (kernels, copies, memsets)
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def trace_events(trace, categories):
    """[(name, start_ns, end_ns)] of a Chrome trace's complete events in the
    given categories (ts and dur are microseconds there)."""
    with open(trace) as f:
        doc = json.load(f)
    evs = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    out = []
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in categories and "dur" in e:
            start = int(round(float(e["ts"]) * 1000))
            out.append((e.get("name", ""), start, start + int(round(float(e["dur"]) * 1000))))
    return out


def profile_steps(step, sync, first, args, impl, cuda):
    """args.kernel_steps more steps under torch.profiler; writes their device
    intervals to args.kernel_times in the event format of memsplit's
    profiler/kernel_times.h (bench/kernel_times sums it per family). On the
    CPU (check runs) the CPU operators stand in for kernels."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    sync()
    with profile(activities=acts) as prof:
        t0 = time.perf_counter()
        for i in range(first, first + args.kernel_steps):
            step(i)
        sync()
        wall = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(trace)
        evs = trace_events(trace, DEVICE_CATEGORIES if cuda else ("cpu_op", None))  # None: a torch without kineto
    if not evs:
        raise RuntimeError("the profiler's trace has no device events")
    index, rows = {}, []
    for name, a, b in evs:
        rows.append([index.setdefault(name, len(index)), a, b])
    with open(args.kernel_times, "w") as f:
        json.dump({"impl": impl, "precision": args.precision, "source": "torch.profiler",
                   "steps": args.kernel_steps, "wall_ns": int(wall * 1e9),
                   "names": list(index), "events": rows}, f)
    log(f"kernel times: {len(rows)} intervals over {args.kernel_steps} profiled steps -> {args.kernel_times}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--n-head", type=int, default=12)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compile happens here)")
    p.add_argument("--data", default="builtin", help="builtin | uniform | PATH (bytes as tokens)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--init", choices=["torch", "memsplit"], default="torch",
                   help="memsplit: the exact weights memsplit starts from (needs numpy; seed 1337)")
    p.add_argument("--init-cache", metavar="PATH",
                   help="with --init memsplit: load the weights from PATH if it exists, else save them there "
                        "(the caller keys PATH by shape and seed)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--kernel-times", metavar="FILE",
                   help="after the timed steps, profile --kernel-steps more and write their kernel intervals "
                        "to FILE (the event format bench/kernel_times reads)")
    p.add_argument("--kernel-steps", type=int, default=3, help="steps profiled for --kernel-times")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (cpu: small shapes, checks only)")
    a = p.parse_args(argv)
    if a.d_model % a.n_head:
        p.error("--d-model must be a multiple of --n-head")
    if a.kernel_steps < 1:
        p.error("--kernel-steps must be >= 1")
    if a.steps < 1 or a.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if a.mode == "compile" and a.warmup < 1:
        p.error("--mode compile needs --warmup >= 1 (the first step compiles)")
    return a


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("torch_ref: no CUDA device visible (use --device cpu for a check run)")
    torch.manual_seed(args.seed)

    context_bytes = None
    if cuda:
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        free, total = torch.cuda.mem_get_info(device)  # creates the context
        context_bytes = total - free  # what the GPU holds before any tensor: memsplit's first "reserve"
    if args.precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        policy = "fp32: fp32 params and compute, no autocast, TF32 off"
    else:
        policy = "bf16: torch.autocast(bfloat16) over fp32 params (mixed precision)"
    manual_attention = not hasattr(F, "scaled_dot_product_attention")
    impl = f"torch-{args.mode}"
    log(f"torch {torch.__version__}, {impl}, {policy}")
    if manual_attention:
        log("no F.scaled_dot_product_attention in this torch: plain attention (not comparable)")

    t_build = time.perf_counter()
    # On a GPU the model is built and drawn there (torch >= 2.0 can build in
    # place): seed17's 1.4 G parameters take minutes to draw on the host.
    build_on_device = cuda and hasattr(torch, "set_default_device")
    with (torch.device(device) if build_on_device else contextlib.nullcontext()):
        model = GPT(args.n_layer, args.d_model, args.n_head, args.seq_len, args.vocab,
                    manual_attention=manual_attention)
    init = args.init
    if init == "memsplit" and cuda:
        model = model.to(device)
        init_like_memsplit(model, args.n_layer, args.seed, on_device=True)
        log(f"memsplit's initial weights drawn on the GPU in {time.perf_counter() - t_build:.1f} s")
    elif init == "memsplit" and args.init_cache and os.path.exists(args.init_cache):
        model.load_state_dict(torch.load(args.init_cache))
        log(f"memsplit's initial weights from {args.init_cache}")
    elif init == "memsplit":
        try:
            t0 = time.perf_counter()
            init_like_memsplit(model, args.n_layer, args.seed)
            log(f"memsplit's initial weights drawn in {time.perf_counter() - t0:.1f} s")
            if args.init_cache:  # drawing them takes seconds: the next run reuses them
                torch.save(model.state_dict(), args.init_cache)
        except ImportError:
            init = "torch"
            log("no numpy here: torch's own initialisation instead of memsplit's weights")
    model = model.to(device)
    if cuda:
        # drawing the weights used scratch memory that training never needs:
        # give it back and start the peaks here (memsplit draws on the host)
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    build_s = time.perf_counter() - t_build
    n_params = sum(p.numel() for p in model.parameters())
    opt, fused = make_optimizer(model, args, device)
    step_model = model
    if args.mode == "compile":
        if not hasattr(torch, "compile"):
            raise SystemExit("torch_ref: this torch has no torch.compile")
        step_model = torch.compile(model)
    n_total = args.warmup + args.steps
    batches = token_batches(args, n_total + (args.kernel_steps if args.kernel_times else 0))
    if cuda:
        batches = batches.pin_memory()
    bf16 = args.precision == "bf16"
    log(f"{n_params / 1e6:.1f} M parameters, B={args.batch} T={args.seq_len}, "
        f"{args.warmup} warm-up + {args.steps} timed steps, fused AdamW: {fused}")

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def step(i):
        xy = batches[i].to(device, non_blocking=True)
        x, y = xy[:, :-1], xy[:, 1:]
        if bf16:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                loss = step_model(x, y)
        else:
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    losses = []
    first_step_s = None
    device_used = 0
    sync()
    t_warm = time.perf_counter()
    for i in range(args.warmup):
        t0 = time.perf_counter()
        losses.append(step(i))
        sync()
        dt = time.perf_counter() - t0
        if i == 0:
            first_step_s = dt
        log(f"warm-up {i + 1}/{args.warmup}: loss {losses[-1].item():.4f}, {dt * 1e3:.1f} ms")
    warmup_s = time.perf_counter() - t_warm
    if cuda:
        free, total = torch.cuda.mem_get_info(device)
        device_used = max(device_used, total - free)

    sync()
    t0 = time.perf_counter()
    for i in range(args.warmup, n_total):
        losses.append(step(i))
    sync()
    elapsed = time.perf_counter() - t0
    loss_vals = [v.item() for v in losses]
    for i in range(args.warmup, n_total):
        if (i - args.warmup) % max(1, args.steps // 5) == 0 or i == n_total - 1:
            log(f"step {i - args.warmup + 1}/{args.steps}: loss {loss_vals[i]:.4f}")

    tokens = args.steps * args.batch * args.seq_len
    out = {
        "impl": impl,
        "precision": args.precision,
        "tokens_per_s": tokens / elapsed,
        "step_ms": elapsed / args.steps * 1e3,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device) if cuda else None,
        "loss_first": loss_vals[0],
        "loss_last": loss_vals[-1],
        "compile_s": first_step_s if args.mode == "compile" else None,
    }
    if cuda:
        free, total = torch.cuda.mem_get_info(device)
        device_used = max(device_used, total - free)
    out.update({
        # total - free on the device after the run (the caching allocator keeps
        # its peak pool, so this is the run's device-wide peak): context,
        # loaded kernels, library handles and the pool; other processes too.
        "device_used_bytes": device_used if cuda else None,
        "context_bytes": context_bytes,
        "first_step_s": first_step_s,
        "warmup_s": warmup_s,
        "timed_steps": args.steps,
        "warmup_steps": args.warmup,
        "n_params": n_params,
        "shape": {"n_layer": args.n_layer, "d_model": args.d_model, "n_head": args.n_head,
                  "seq_len": args.seq_len, "vocab": args.vocab, "batch": args.batch},
        "policy": policy,
        "fused_adamw": fused,
        "attention": "manual" if manual_attention else "sdpa",
        "data": args.data,
        "init": init,
        "losses": loss_vals,  # every step, warm-up included
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
    })
    out["build_s"] = build_s
    if args.kernel_times:
        # after every figure above is taken: the profiled steps are extra,
        # and what the profiler holds is in no peak
        out["kernel_times"] = args.kernel_times
        out["kernel_times_error"] = None
        try:
            profile_steps(step, sync, n_total, args, impl, cuda)
        except Exception as e:  # the speed and memory figures stand without it
            out["kernel_times_error"] = f"{type(e).__name__}: {e}"
            log(f"no kernel times: {out['kernel_times_error']}")
    if not all(math.isfinite(v) for v in loss_vals):
        log("warning: a non-finite loss")
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
