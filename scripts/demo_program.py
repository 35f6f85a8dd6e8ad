"""The user's case for `make demo`: a PyTorch training script of the shape
whose question started memsplit, written as its user wrote it. A
`transformers` list of (attention, feed-forward) pairs unpacked in the
forward, BatchNorm in the feed-forward, its own loss module, AdamW; plain
PyTorch, unchanged by memsplit. It prints "step N loss X" after each step.

Runs on the GPU when there is one (torch 2.x), else on the CPU (Debian's
torch 1.13). Sizes: --blocks --dim --heads --seq --batch --vocab --steps;
--log FILE appends the script's own output (and its traceback) there."""
import argparse
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.norm = nn.BatchNorm1d(4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.up(x)
        h = self.norm(h.reshape(b * t, -1)).reshape(b, t, -1)
        return self.down(F.gelu(h))


class LMLoss(nn.Module):
    """The script's own loss module."""

    def forward(self, logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class Model(nn.Module):
    def __init__(self, vocab, d, heads, blocks):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.transformers = nn.ModuleList([nn.ModuleList([Attention(d, heads), FeedForward(d)])
                                           for _ in range(blocks)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.embed(idx)
        for attn, ff in self.transformers:
            x = x + attn(x)
            x = x + ff(x)
        return self.head(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--log", default="")
    a = ap.parse_args()
    if a.log:
        sys.stdout = sys.stderr = open(a.log, "a", buffering=1)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = Model(a.vocab, a.dim, a.heads, a.blocks).to(dev)
    loss_fn = LMLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    g = torch.Generator().manual_seed(1)
    for step in range(a.steps):
        batch = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g).to(dev)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(batch[:, :-1]), batch[:, 1:])
        loss.backward()
        opt.step()
        print("step %d loss %.4f" % (step, loss.item()), flush=True)


if __name__ == "__main__":
    main()
