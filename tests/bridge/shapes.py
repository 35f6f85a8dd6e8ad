"""Programs of the shapes users write, for the bridge's end-to-end tests on
the CPU (Debian's torch 1.13 and torchvision 0.14): each trains a few steps
on random data in plain PyTorch and prints "step N loss X" after each.

  --shape resnet18 | resnet50   torchvision's ResNets (BatchNorm2d, stages of
                                blocks whose first differs), SGD
  --shape encdec                an encoder-decoder: two lists, the decoder's
                                blocks cross-attend to the encoder's output
  --shape unet                  a U-Net: long skips, passed positionally and
                                by keyword
  --shape dict                  blocks in an nn.ModuleDict
  --shape nested                nested nn.Sequentials of blocks
  --shape accum                 gradient accumulation x4 with a LR scheduler
  --shape gan                   a generator and a discriminator, two Adams
                                (--late: the second Adam made after the first forward;
                                --late-from K: the discriminator and its Adam first
                                used at step K, the generator trained alone before)
  --shape lazy                  the ModuleDict of blocks, each block's first layer an nn.LazyLinear
                                made by a dummy batch before the optimizer
  --shape layerdrop             the ModuleDict of blocks, b0 and b2 skipped in the first step
  --shape sngan                 the GAN with spectral_norm on the discriminator's layers
  --shape gp                    the GAN with WGAN-GP's gradient penalty (torch.autograd.grad,
                                create_graph) in the discriminator's loss
  --shape pinn                  a physics-informed MLP: the loss holds the model's gradient
                                with respect to its input (torch.autograd.grad, create_graph
                                through every unit), and a boundary term, Adam
  --shape wnorm                 1-D convolutions under the old weight_norm (a forward pre-hook
                                on each makes its weight), AdamW
  --shape moe                   blocks of a mixture of experts (top-2 of 4), whose load-balancing
                                loss each keeps on itself in training and the program adds to
                                its own (--eval-first: two validation batches in eval mode under
                                no_grad before the first step, as Lightning's sanity check)
  --shape snapshot              the ModuleDict of blocks, copy.deepcopy'd after its first step (a
                                best-model snapshot), compared with the trained model at the end
  --shape saved                 the ModuleDict of blocks saved whole (torch.save into a buffer) and
                                loaded back at each step, the copy kept until the next (a model
                                pickled under a plan is the program's own; the loaded one runs
                                placed); with --save PATH, its state_dict saved to PATH and read
                                back too (a diagnostic pass writes memsplit's own file instead)
  --shape lstm                  an LSTM language model with a validation pass
  --shape packed                a tagger of two LSTMs over packed sequences of several lengths
                                (the same lengths each step; --vary: new ones each step)
  --shape deep                  80 blocks: more layers than a plan has stages
  --shape helper                a module trained by its own optimizer, called
                                inside the model's forward
  --shape frozen                fine-tuning: the first half of the blocks frozen
                                (requires_grad off, in the optimizer all the same)
  --shape distill               distillation: a frozen teacher run under no_grad
                                and an EMA copy of the student, neither in an
                                optimizer (HELD lists them for shapes.sh)
  --shape pyramid               MLP blocks of falling widths, each adding its
                                second layer's output to its first's (a residual
                                inside the block), Adam
  --shape jit                   blocks in a ModuleDict, one of them compiled by
                                torch.jit.script and one by torch.jit.trace (whose
                                submodules run inside TorchScript, where no hook runs)
  --shape ckptseq               an nn.Sequential of blocks run by checkpoint_sequential
                                (reentrant; 4 segments): each recomputed in backward
  --shape siamese               one model called on two batches before one backward
                                (--once: on the two joined, one call of twice the batch)
  --shape vit | densenet | mobilenet
                                torchvision's small ViT (a class token and
                                position embedding in the root's own code),
                                DenseNet (every layer reads all before it),
                                MobileNetV2 (inverted residuals), AdamW
Options: --steps N, --batch B, --dim D (model width), --size S (image side), --late, --late-from K,
--once, --device D (the GAN, ModuleDict, PINN and packed shapes: on a GPU), --vary (the
language models: batches of 9 and 17 tokens in turn; packed: new lengths each step), --keep (the
ModuleDict's: each step's outputs kept in a list, not detached, as a program that gathers its
predictions for the epoch's metrics does: memory that grows step after step), --hard-exit (ends
with os._exit: Python's exit handlers never run, as in a program killed).
"""
import argparse
import copy
import gc
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import Block  # noqa: E402


class CrossBlock(nn.Module):
    """A decoder block: self-mixing, then attention to the encoder's output."""

    def __init__(self, d):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.kv = nn.Linear(d, d), nn.Linear(d, 2 * d)
        self.ff = Block(d)

    def forward(self, x, memory):
        h = self.norm1(x)
        q = self.q(h)
        k, v = self.kv(self.norm2(memory)).chunk(2, dim=-1)
        att = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        return self.ff(x + att @ v)


class EncDec(nn.Module):
    def __init__(self, vocab, d, n):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.encoder = nn.ModuleList([Block(d) for _ in range(n)])
        self.decoder = nn.ModuleList([CrossBlock(d) for _ in range(n)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, src, tgt):
        m = self.embed(src)
        for b in self.encoder:
            m = b(m)
        x = self.embed(tgt)
        for b in self.decoder:
            x = b(x, memory=m)
        return self.head(self.norm(x))


class Conv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)

    def forward(self, x):
        return F.relu(self.c2(F.relu(self.c1(x))))


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.conv = Conv(2 * cout, cout)

    def forward(self, x, skip=None):
        return self.conv(torch.cat([self.up(x), skip], dim=1))


class UNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.d1, self.d2, self.d3 = Conv(3, c), Conv(c, 2 * c), Conv(2 * c, 4 * c)
        self.mid = Conv(4 * c, 8 * c)
        self.u3, self.u2, self.u1 = Up(8 * c, 4 * c), Up(4 * c, 2 * c), Up(2 * c, c)
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, x):
        s1 = self.d1(x)
        s2 = self.d2(F.max_pool2d(s1, 2))
        s3 = self.d3(F.max_pool2d(s2, 2))
        h = self.mid(F.max_pool2d(s3, 2))
        h = self.u3(h, s3)                 # the skip positionally
        h = self.u2(h, skip=s2)            # and by keyword
        h = self.u1(h, skip=s1)
        return self.out(h)


class DictNet(nn.Module):
    def __init__(self, vocab, d, n, reverse=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleDict({"b%d" % i: Block(d) for i in range(n)})
        self.head = nn.Linear(d, vocab)
        self.reverse = reverse      # the blocks called last registered first
        self.skip = ()              # the blocks LayerDrop skips in this step

    def forward(self, idx):
        x = self.embed(idx)
        for name in (reversed(list(self.blocks)) if self.reverse else self.blocks):
            if name not in self.skip:
                x = self.blocks[name](x)
        return self.head(x)


class Nested(nn.Module):
    def __init__(self, vocab, d, n):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.body = nn.Sequential(*[nn.Sequential(*[Block(d) for _ in range(n)]) for _ in range(3)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.body(self.embed(idx)))


class WithHelper(nn.Module):
    """Blocks that call, after the third, a module the program holds and
    trains itself, by an optimizer of its own (no child of this model)."""

    def __init__(self, vocab, d, n, helper):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, vocab)
        self.helper = [helper]        # a plain list: not registered

    def forward(self, idx):
        x = self.embed(idx)
        for i, b in enumerate(self.blocks):
            x = b(x)
            if i == 2:
                x = x + self.helper[0](x)
        return self.head(x)


class LSTMLM(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        h, _ = self.lstm(self.embed(idx))
        return self.head(h)


class Tagger(nn.Module):
    """Two LSTMs over packed sequences (pack_padded_sequence in the root's
    own code): what crosses between them is a PackedSequence, whose
    batch_sizes an LSTM takes on the CPU only."""

    def __init__(self, vocab, d):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.rnn1 = nn.LSTM(d, 2 * d, batch_first=True)
        self.rnn2 = nn.LSTM(2 * d, 2 * d, batch_first=True)
        self.head = nn.Linear(2 * d, vocab)

    def forward(self, idx, lengths):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
        x = pack_padded_sequence(self.embed(idx), lengths, batch_first=True, enforce_sorted=False)
        x, _ = self.rnn1(x)
        x, _ = self.rnn2(x)
        x, _ = pad_packed_sequence(x, batch_first=True, total_length=idx.shape[1])
        return self.head(x)


class WNBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        wn = nn.utils.weight_norm       # the old API: a forward pre-hook makes the weight at each call
        self.c1, self.c2 = wn(nn.Conv1d(c, c, 5, padding=2)), wn(nn.Conv1d(c, c, 5, padding=2))

    def forward(self, x):
        return x + self.c2(F.leaky_relu(self.c1(F.leaky_relu(x, 0.1)), 0.1))


class WNNet(nn.Module):
    """A vocoder-like stack of 1-D convolutions under weight_norm (HiFi-GAN's,
    wav2vec2's positional convolution): the first and last convolutions are
    units of their own, each with its pre-hook."""

    def __init__(self, c, n):
        super().__init__()
        wn = nn.utils.weight_norm
        self.pre = wn(nn.Conv1d(1, c, 7, padding=3))
        self.blocks = nn.Sequential(*[WNBlock(c) for _ in range(n)])
        self.post = wn(nn.Conv1d(c, 1, 7, padding=3))

    def forward(self, x):
        return torch.tanh(self.post(self.blocks(self.pre(x))))


class MoE(nn.Module):
    """Top-2 routing over 4 expert MLPs, written as newcomers write it: each
    expert runs on the rows routed to it, and the load-balancing loss is
    kept on the module (self.aux) for the program to add to its own."""

    def __init__(self, d, n=4, k=2):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, n)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                     for _ in range(n))

    def forward(self, x):
        h = x.reshape(-1, x.shape[-1])
        probs = self.router(h).softmax(-1)
        w, idx = probs.topk(self.k, dim=-1)
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            hit = idx == e
            rows = hit.any(-1).nonzero(as_tuple=True)[0]
            if rows.numel():
                out = out.index_add(0, rows, (w * hit).sum(-1)[rows].unsqueeze(-1) * expert(h[rows]))
        if self.training:       # a load-balancing loss only in training, as programs keep it
            share = F.one_hot(idx[:, 0], len(self.experts)).float().mean(0)
            self.aux = len(self.experts) * (share * probs.mean(0)).sum()
        return out.reshape(x.shape)


class MoEBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln, self.moe = nn.LayerNorm(d), MoE(d)

    def forward(self, x):
        return x + self.moe(self.ln(x))


HELD = []   # the models the distill shape holds beside the one it trains (shapes.sh counts their bytes)


class CkptSeq(nn.Module):
    def __init__(self, vocab, d, n):
        super().__init__()
        import inspect
        from torch.utils.checkpoint import checkpoint_sequential
        self.embed = nn.Embedding(vocab, d)
        self.body = nn.Sequential(*[Block(d) for _ in range(n)])
        self.head = nn.Linear(d, vocab)
        # (torch 2 asks which implementation; 1.13 has only the reentrant one)
        kw = {"use_reentrant": True} if "use_reentrant" in inspect.signature(checkpoint_sequential).parameters else {}
        self.run_body = lambda x: checkpoint_sequential(self.body, 4, x, **kw)

    def forward(self, idx):
        return self.head(self.run_body(self.embed(idx)))


class Down(nn.Module):
    """A pyramid's block: narrower out than in, and a residual inside it."""

    def __init__(self, cin, cout):
        super().__init__()
        self.fc, self.norm, self.fc2 = nn.Linear(cin, cout), nn.LayerNorm(cout), nn.Linear(cout, cout)

    def forward(self, x):
        h = F.relu(self.norm(self.fc(x)))
        return h + self.fc2(h)


class Pyramid(nn.Module):
    def __init__(self, d_in, widths, ncls):
        super().__init__()
        self.blocks = nn.ModuleList([Down(i, o) for i, o in zip([d_in] + widths[:-1], widths)])
        self.head = nn.Linear(widths[-1], ncls)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def lm_loss(logits, tgt):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def tokens(a, g, vocab):
    return torch.randint(0, vocab, (a.batch, 17), generator=g).to(a.device)


def s_family(shape):
    """The shapes --device moves to a GPU (tests/gpu/bridge.sh, section shapes)."""
    if shape in ("gan", "sngan", "gp"):
        return "gan"
    if shape in ("pinn", "packed"):
        return shape
    if shape in ("dict", "reversed", "jit", "layerdrop", "lazy", "frozen", "accum", "siamese", "helper", "snapshot",
                 "saved"):
        return "dict"
    return None


def saved_and_loaded(model, path):
    """model saved whole into a buffer and loaded back; with path, its
    state_dict saved there and read back into it."""
    import inspect
    import io
    whole = {"weights_only": False} if "weights_only" in inspect.signature(torch.load).parameters else {}
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    back = torch.load(buf, **whole)
    if path:
        torch.save(model.state_dict(), path)
        model.load_state_dict(torch.load(path))
    return back


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--late", action="store_true")
    ap.add_argument("--late-from", type=int, default=0)
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--vary", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--save", default=None)
    ap.add_argument("--hard-exit", action="store_true")
    ap.add_argument("--eval-first", action="store_true")
    a = ap.parse_args()
    if a.device != "cpu" and s_family(a.shape) is None:
        sys.exit("shapes.py: --device %s is for the GAN, ModuleDict, PINN and packed shapes only" % a.device)
    dev = torch.device(a.device)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    vocab = 256
    s = a.shape
    if s in ("resnet18", "resnet50", "vit", "densenet", "mobilenet"):   # image classifiers
        import torchvision
        from torchvision.models import densenet, mobilenetv2, vision_transformer
        model = {"vit": lambda: vision_transformer.VisionTransformer(
                     image_size=a.size, patch_size=8, num_layers=6, num_heads=2, hidden_dim=a.dim, mlp_dim=2 * a.dim,
                     num_classes=10),
                 "densenet": lambda: densenet.DenseNet(growth_rate=8, block_config=(2, 3, 4), num_init_features=16,
                                                       num_classes=10),
                 "mobilenet": lambda: mobilenetv2.MobileNetV2(num_classes=10, width_mult=0.25)}.get(
            s, lambda: getattr(torchvision.models, s)(num_classes=10))()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if s.startswith("resnet") else \
            torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step in range(a.steps):
            x = torch.randn(a.batch, 3, a.size, a.size, generator=g)
            y = torch.randint(0, 10, (a.batch,), generator=g)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s == "moe":
        model = nn.ModuleDict(dict(embed=nn.Embedding(vocab, a.dim),
                                   blocks=nn.ModuleList(MoEBlock(a.dim) for _ in range(4)),
                                   head=nn.Linear(a.dim, vocab)))

        def moe_forward(t):
            x = model["embed"](t)
            for b in model["blocks"]:
                x = b(x)
            return model["head"](x)

        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        if a.eval_first:        # as Lightning's sanity check: two validation batches before training
            model.eval()
            with torch.no_grad():
                for _ in range(2):
                    t = tokens(a, g, vocab)
                    print("validation loss %.4f" % lm_loss(moe_forward(t[:, :-1]), t[:, 1:]).item(), file=sys.stderr)
            model.train()
        for step in range(a.steps):
            t = tokens(a, g, vocab)
            aux = 0
            loss = lm_loss(moe_forward(t[:, :-1]), t[:, 1:])
            for b in model["blocks"]:
                aux = aux + b.moe.aux
            loss = loss + 0.01 * aux
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s == "wnorm":
        model = WNNet(2 * a.dim, 6)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.8, 0.99))
        for step in range(a.steps):
            x = torch.randn(a.batch, 1, 512, generator=g)
            loss = F.l1_loss(model(x), x.flip(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s == "packed":
        model = Tagger(vocab, a.dim).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        lengths = torch.randint(10, 41, (4 * a.batch,), generator=g)      # on the CPU, as torch wants them
        for step in range(a.steps):
            t = torch.randint(1, vocab, (4 * a.batch, 40), generator=g).to(dev)
            if a.vary:
                lengths = torch.randint(10, 41, (4 * a.batch,), generator=g)
            mask = (torch.arange(40)[None, :] < lengths[:, None]).to(dev)
            loss = F.cross_entropy(model(t, lengths)[mask], t[mask])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s == "pinn":
        # u(x, y) on the unit square with u_x + u_y = sin(pi x) and u = 0 on x = 0: the residual
        # differentiates the model's output with respect to its input inside the step, kept
        # differentiable, so the outer backward runs through each unit's backward again
        width = 4 * a.dim
        layers = [nn.Linear(2, width), nn.Tanh()]
        for _ in range(6):
            layers += [nn.Linear(width, width), nn.Tanh()]
        model = nn.Sequential(*layers, nn.Linear(width, 1)).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for step in range(a.steps):
            x = torch.rand(64 * a.batch, 2, generator=g).to(dev).requires_grad_(True)
            u = model(x)
            du, = torch.autograd.grad(u.sum(), x, create_graph=True)
            residual = du.sum(dim=1, keepdim=True) - torch.sin(3.14159265 * x[:, :1])
            edge = torch.rand(16 * a.batch, 2, generator=g).to(dev)
            edge[:, 0] = 0
            loss = (residual ** 2).mean() + (model(edge) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s == "pyramid":
        # (split inside its second block, the engine's order of a residual's gradient sum is the
        # record pass's only if the rerun keeps a node where the record crossed: docs/program-record.md)
        model = Pyramid(2 * a.dim, [8 * a.dim, 6 * a.dim, 4 * a.dim, 3 * a.dim, 2 * a.dim, a.dim], 10)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for step in range(a.steps):
            x = torch.randn(16 * a.batch, 2 * a.dim, generator=g)
            y = torch.randint(0, 10, (16 * a.batch,), generator=g)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s == "unet":
        model = UNet(a.dim // 4)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step in range(a.steps):
            x = torch.randn(a.batch, 3, a.size, a.size, generator=g)
            opt.zero_grad(set_to_none=True)
            loss = (model(x) - x.mean(dim=1, keepdim=True)).pow(2).mean()
            loss.backward()
            opt.step()
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    elif s in ("gan", "sngan", "gp"):
        z_dim = a.dim
        # sngan: the discriminator's weights under spectral_norm (a parametrization: torch
        # makes each weight from its parameter at every access, also when it is registered)
        sn = nn.utils.parametrizations.spectral_norm if s == "sngan" else (lambda m: m)
        G = nn.Sequential(nn.Linear(z_dim, 4 * a.dim), nn.ReLU(), nn.Linear(4 * a.dim, 64))
        D = nn.Sequential(sn(nn.Linear(64, 4 * a.dim)), nn.LeakyReLU(0.2), sn(nn.Linear(4 * a.dim, 1)))
        G, D = G.to(dev), D.to(dev)
        og = torch.optim.Adam(G.parameters(), lr=2e-4)
        # --late: the discriminator's optimizer made after the generator's first forward
        od = None if a.late or a.late_from else torch.optim.Adam(D.parameters(), lr=2e-4)
        for step in range(a.steps):
            real = torch.randn(a.batch, 64, generator=g).to(dev)
            z = torch.randn(a.batch, z_dim, generator=g).to(dev)
            fake = G(z)
            if step < a.late_from:
                # --late-from K: the generator alone (fitted to the data) for K iterations; the
                # discriminator and its optimizer first come in at step K
                og.zero_grad(set_to_none=True)
                g_loss = F.mse_loss(fake, real)
                g_loss.backward()
                og.step()
                print("step %d loss %.4f" % (step, g_loss.item()), flush=True)
                continue
            if od is None:
                od = torch.optim.Adam(D.parameters(), lr=2e-4)
            od.zero_grad(set_to_none=True)
            d_loss = F.softplus(-D(real)).mean() + F.softplus(D(fake.detach())).mean()
            if s == "gp":
                # WGAN-GP's gradient penalty: the discriminator's gradient at points between
                # the real and the fake samples, by torch.autograd.grad inside the step, kept
                # differentiable (create_graph) for the discriminator's backward
                e = torch.rand(a.batch, 1, generator=g).to(dev)
                mix = (e * real + (1 - e) * fake.detach()).requires_grad_(True)
                grad, = torch.autograd.grad(D(mix).sum(), mix, create_graph=True)
                d_loss = d_loss + 10 * ((grad.norm(2, dim=1) - 1) ** 2).mean()
            d_loss.backward()
            gc.collect()    # as the accum shape's (below): the cyclic collector kept out of the steps
            od.step()
            og.zero_grad(set_to_none=True)
            g_loss = F.softplus(-D(fake)).mean()
            g_loss.backward()
            gc.collect()
            og.step()
            # the iteration's loss as memsplit reports it: the sum of what went to backward()
            print("step %d loss %.4f" % (step, d_loss.item() + g_loss.item()), flush=True)
    elif s == "distill":
        # the teacher: wider, frozen, in eval mode, run under no_grad; the EMA: a copy of the
        # student the program averages into after each step. Neither is in an optimizer
        teacher = DictNet(vocab, 2 * a.dim, 4).eval()
        teacher.requires_grad_(False)
        model = DictNet(vocab, a.dim, 6)
        ema = copy.deepcopy(model).requires_grad_(False)
        HELD[:] = [teacher, ema]
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for step in range(a.steps):
            t = tokens(a, g, vocab)
            with torch.no_grad():
                soft = F.softmax(teacher(t[:, :-1]) / 2.0, dim=-1)
            opt.zero_grad(set_to_none=True)
            logits = model(t[:, :-1])
            kl = F.kl_div(F.log_softmax(logits / 2.0, dim=-1), soft, reduction="batchmean")
            loss = lm_loss(logits, t[:, 1:]) + kl
            loss.backward()
            opt.step()
            with torch.no_grad():
                for e, p in zip(ema.parameters(), model.parameters()):
                    e.mul_(0.99).add_(p, alpha=0.01)
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
    else:
        # (the helper only where the program uses it: a module the program holds and never
        # trains is the program's memory all the same, and the distill shape's case)
        helper = nn.Sequential(nn.Linear(a.dim, 2 * a.dim), nn.GELU(), nn.Linear(2 * a.dim, a.dim)) \
            if s == "helper" else None
        model = {"encdec": lambda: EncDec(vocab, a.dim, 3), "dict": lambda: DictNet(vocab, a.dim, 6),
                 "reversed": lambda: DictNet(vocab, a.dim, 6, reverse=True),
                 "helper": lambda: WithHelper(vocab, a.dim, 6, helper),
                 "deep": lambda: DictNet(vocab, a.dim // 2, 80),
                 "nested": lambda: Nested(vocab, a.dim, 4), "accum": lambda: DictNet(vocab, a.dim, 6),
                 "siamese": lambda: DictNet(vocab, a.dim, 4), "ckptseq": lambda: CkptSeq(vocab, a.dim, 8),
                 "frozen": lambda: DictNet(vocab, a.dim, 6), "jit": lambda: DictNet(vocab, a.dim, 6),
                 "layerdrop": lambda: DictNet(vocab, a.dim, 6), "lazy": lambda: DictNet(vocab, a.dim, 6),
                 "snapshot": lambda: DictNet(vocab, a.dim, 6), "saved": lambda: DictNet(vocab, a.dim, 6),
                 "lstm": lambda: LSTMLM(vocab, a.dim)}[s]()
        if s == "frozen":
            # fine-tuning as it is often written: the lower half frozen, every parameter
            # handed to the optimizer all the same (it skips those with no gradient)
            model.embed.requires_grad_(False)
            for name in list(model.blocks)[:3]:
                model.blocks[name].requires_grad_(False)
        if s == "lazy":
            # each block's first layer a LazyLinear, made by a dummy batch (in training mode,
            # gradients on) before the optimizer, as torch's docs have it
            for b in model.blocks.values():
                b.fc1 = nn.LazyLinear(4 * a.dim)
            model(torch.zeros(2, 8, dtype=torch.long))
        model = model.to(dev)
        if helper is not None:
            helper = helper.to(dev)
        if s == "jit":
            model.blocks["b2"] = torch.jit.script(model.blocks["b2"])
            model.blocks["b4"] = torch.jit.trace(model.blocks["b4"], torch.randn(1, 8, a.dim, device=dev))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        opt_helper = torch.optim.SGD(helper.parameters(), lr=1e-2) if s == "helper" else None
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9) if s == "accum" else None
        accum = 4 if s == "accum" else 1
        kept_outputs = []
        for step in range(a.steps):
            if s == "saved":
                # before the step's forward, so that the trial's two steps hold two copies at once
                kept = saved_and_loaded(model, a.save)
                HELD[:] = [kept]      # held, trained by no optimizer: its bytes are the program's
            opt.zero_grad(set_to_none=True)
            total = 0.0
            if s == "layerdrop":        # blocks b0 and b2 skipped in the first step, none after
                model.skip = ("b0", "b2") if step == 0 else ()
            for _ in range(accum):
                t = tokens(a, g, vocab)
                if a.vary:          # batches of two lengths in turn (9 and 17 tokens)
                    t = t[:, :9 + 8 * (step % 2)]
                if s == "encdec":
                    loss = lm_loss(model(t[:, :8], t[:, 8:-1]), t[:, 9:])
                elif s == "siamese":
                    # two views (the tokens and their mirror) through one model, one loss over both:
                    # both forwards' activations live until the backward, one micro-batch
                    u = torch.cat([t, t.flip(1)]) if a.once else None
                    if a.once:
                        loss = lm_loss(model(u[:, :-1]), u[:, 1:])
                    else:
                        la, lb = model(t[:, :-1]), model(t.flip(1)[:, :-1])
                        loss = 0.5 * (lm_loss(la, t[:, 1:]) + lm_loss(lb, t.flip(1)[:, 1:]))
                else:
                    out = model(t[:, :-1])
                    loss = lm_loss(out, t[:, 1:])
                    if a.keep:
                        kept_outputs.append(out)      # for the epoch's metrics, not detached: each step's stays
                (loss / accum).backward()
                total += loss.item() / accum
            if s == "accum":
                # the rows of the optimizer phase depend on when Python's cyclic collector runs
                # (a collection frees tensors that objects in reference cycles hold): the runs
                # shapes.sh compares byte for byte (per-operator trace, allocator's record) make
                # different Python objects, so their collections fall at different points, and a
                # fresh clone's differ again. One collection here puts them at the same point
                gc.collect()
            opt.step()
            if opt_helper is not None:
                opt_helper.step()
                opt_helper.zero_grad(set_to_none=True)
            if sched is not None:
                sched.step()
            if s == "lstm":                       # a validation pass after each step
                model.eval()
                with torch.no_grad():
                    t = tokens(a, g, vocab)
                    lm_loss(model(t[:, :-1]), t[:, 1:])
                model.train()
            if s == "snapshot" and step == 0:
                best = copy.deepcopy(model)       # a best-model snapshot, taken as training goes on
            print("step %d loss %.4f" % (step, total), flush=True)
        if s == "snapshot":
            # the snapshot computes with its own weights, not the model's it was copied from
            with torch.no_grad():
                t = tokens(a, g, vocab)
                d = (model(t) - best(t)).abs().max().item()
            print("snapshot: its own weights %s (%.4f)" % ("yes" if d > 1e-6 else "NO", d), flush=True)
        if s == "saved":
            # the model loaded back computes as the one saved; the copy loaded before the last
            # step computes with its own weights, the model's before that step
            back = saved_and_loaded(model, None)
            with torch.no_grad():
                t = tokens(a, g, vocab)
                y = model(t)
                d = (y - back(t)).abs().max().item()
                e = (y - kept(t)).abs().max().item()
            print("saved: the loaded model computes as the one saved %s (%.2g), with its own weights %s" %
                  ("yes" if d == 0 else "NO", d, "yes" if e > 1e-6 else "NO"), flush=True)
            del kept


if __name__ == "__main__":
    rc = main()
    if "--hard-exit" in sys.argv:       # as a program killed, or one that ends with os._exit: no atexit runs
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc or 0)
    sys.exit(rc)
