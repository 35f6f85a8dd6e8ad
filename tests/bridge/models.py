"""Small programs for the bridge's end-to-end tests, one per model shape the
issue names; each trains a few steps on random data in plain PyTorch.

  --model ref        the reference model's shape (tests/bridge/ref_model.py)
  --model seq        an nn.Sequential of identical blocks
  --model hf         a HF-style GPT: transformer.wte/wpe/drop, transformer.h
                     (blocks called with keyword arguments), transformer.ln_f,
                     lm_head tied to wte
  --model flat       no repeated block list at all
  --model bn         blocks with BatchNorm (its running statistics stay fp32)
  --model leak       block 1 keeps a tensor that the last block uses directly
                     (a module moving tensors across stages by itself)
Options: --accum N (gradient accumulation), --ckpt (activation
checkpointing of every block), --two-opt (two optimizers), --workers N
(a DataLoader with worker processes), --amp (bf16 autocast), --sleep S
(sleep before training, for the interruption test), --step-fn (the loss
computed in a function, as Lightning's training_step: the logits are freed
before backward), --lightning-order (zero_grad after the forward and before
backward, as Lightning's optimizer closure does: last step's gradients live
through the forward), --labels (hf: the model computes its loss inside its
own forward from labels=, as GPT2LMHeadModel does, and returns (loss,
logits)), --move-each-step (the
program moves the model to its device again after every step, as Lightning
does at fit start and for test), --save/--load PATH (state_dict and
optimizer state through torch.save, loaded with map_location), --resume
PATH (a checkpoint after every step; on start, continue from it when it
is there, as Lightning's ckpt_path="last"; with --atomic saved to PATH.tmp
and renamed over PATH with os.replace; with --backup the one there renamed
to PATH.bak before each save; with --through-open, here and for --save,
saved into the file the program opens itself, open(PATH, "wb") then
torch.save into it), --grow-at N --grow-mb M (from
step N the program keeps an extra M MiB on its device: memory the first
steps never showed), --clip N (gradient clipping to norm N before each
optimizer step), --topk DIR [--stale PATH] (after every step a checkpoint
saved into DIR through Lightning's TorchCheckpointIO, or a stand-in with
its module path, class and methods where Lightning is not installed, and
the one it replaces removed, as ModelCheckpoint with save_top_k=1 does;
the first one replaced is PATH, a best model a run before this one listed;
with --link-last DIR/last.ckpt a link to each one saved, made as
ModelCheckpoint's save_last="link" makes it, and on start the run resumed
from it where it is, the best model it names the first one replaced),
--rotate DIR (after every step a checkpoint DIR/ckpt_N.pt through
torch.save, and the one before it removed with os.remove: the last one kept),
--keep-dirs DIR (on start, continue from the latest DIR/step-N/model.pt
unless --fresh; after every step a checkpoint DIR/step-N/model.pt in a folder
of its own, checked with os.path.isfile, and every other step-* folder
removed with shutil.rmtree: the last one kept, as HF's Trainer with
save_total_limit=1 keeps its checkpoint-N folders), --hf-dirs DIR (after
every step a folder DIR/checkpoint-N, as HF's Trainer saves: the config in
JSON, the model's weights through safetensors (or, where it is not
installed, a stand-in that writes and reads outside Python's open as its
Rust core does: tests/bridge/stand_ins), the optimizer's state through
torch.save, the trainer's state in JSON, read back; on start, unless
--fresh, continue from the latest folder, its optimizer state where there
is one, as resume_from_checkpoint=True does; --hf-extra: also a
tokenizer.json and an extra.bin in each, which a run before without it never
made there), --hard-exit (ends with
os._exit(0) after its last step: Python's exit handlers never run),
--term-self (ends by a SIGTERM to itself after its last step, as a
scheduler's ends a job), --kill-self (ends by a SIGKILL to itself: no
handler of any kind runs).
"""
import argparse
import contextlib
import io
import json
import os
import re
import shutil
import signal
import sys
import time

import torch
import torch.nn as nn
import torch.utils.checkpoint as ckpt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_model import Model as RefModel  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x, scale: float = 1.0):
        return x + scale * self.fc2(torch.relu(self.fc1(self.norm(x))))


class SeqModel(nn.Module):
    def __init__(self, vocab, d, n):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.body = nn.Sequential(*[Block(d) for _ in range(n)])
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.body(self.embed(idx)))


class HFStyle(nn.Module):
    def __init__(self, vocab, d, n, seq, use_ckpt=False):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(vocab, d), wpe=nn.Embedding(seq, d),
                                              drop=nn.Dropout(0.0), h=nn.ModuleList([Block(d) for _ in range(n)]),
                                              ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight      # tied, as GPT-2 does
        self.use_ckpt = use_ckpt

    def forward(self, input_ids=None, labels=None):
        t = self.transformer
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = t.drop(t.wte(input_ids) + t.wpe(pos))
        for block in t.h:
            if self.use_ckpt:
                x = ckpt.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x, scale=1.0)
        logits = self.lm_head(t.ln_f(x))
        if labels is None:
            return logits
        # the loss in the model's own forward, outside every module (HF's
        # loss_function: the logits upcast, shifted labels)
        shift = logits[:, :-1, :].float().reshape(-1, logits.shape[-1])
        loss = nn.functional.cross_entropy(shift, labels[:, 1:].reshape(-1))
        return loss, logits


class BNBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.bn = nn.BatchNorm1d(d)

    def forward(self, x):
        b, t, d = x.shape
        return x + torch.relu(self.bn(self.fc(x).reshape(b * t, d)).reshape(b, t, d))


class BNModel(SeqModel):
    def __init__(self, vocab, d, n):
        super().__init__(vocab, d, n)
        self.body = nn.Sequential(*[BNBlock(d) for _ in range(n)])


class LeakBlock(Block):
    """Keeps its output in a shared list: the last block adds it, never passed
    as an input, so a split that puts them apart must notice."""
    def __init__(self, d, shared, first, last):
        super().__init__(d)
        self.shared, self.first, self.last = shared, first, last

    def forward(self, x):
        y = super().forward(x)
        if self.first:
            self.shared[:] = [y]
        if self.last and self.shared:
            y = y + self.shared[0]
        return y


class LeakModel(SeqModel):
    def __init__(self, vocab, d, n):
        super().__init__(vocab, d, n)
        shared = []
        self.body = nn.Sequential(*[LeakBlock(d, shared, i == 0, i == n - 1) for i in range(n)])


class Flat(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.a = nn.Linear(d, 2 * d)
        self.b = nn.Linear(2 * d, d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        return self.head(self.b(torch.relu(self.a(self.embed(idx)))))


def build(a):
    if a.model == "ref":
        return RefModel(a.vocab, a.dim, 4, a.blocks)
    if a.model == "seq":
        return SeqModel(a.vocab, a.dim, a.blocks)
    if a.model == "hf":
        return HFStyle(a.vocab, a.dim, a.blocks, a.seq, a.ckpt)
    if a.model == "bn":
        return BNModel(a.vocab, a.dim, a.blocks)
    if a.model == "leak":
        return LeakModel(a.vocab, a.dim, a.blocks)
    return Flat(a.vocab, a.dim)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="ref", choices=["ref", "seq", "hf", "flat", "bn", "leak"])
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--two-opt", action="store_true")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--sleep", type=float, default=0)
    ap.add_argument("--move-each-step", action="store_true")
    ap.add_argument("--save", default="")
    ap.add_argument("--load", default="")
    ap.add_argument("--torch-profiler", action="store_true", help="train inside torch.profiler.profile()")
    ap.add_argument("--step-fn", action="store_true", help="the loss in a function, as Lightning's training_step")
    ap.add_argument("--lightning-order", action="store_true", help="zero_grad between the forward and backward")
    ap.add_argument("--closure", action="store_true",
                    help="the forward and backward inside optimizer.step(closure), as Lightning runs them")
    ap.add_argument("--labels", action="store_true", help="hf: the loss computed inside the model's forward")
    ap.add_argument("--resume", default="", help="checkpoint after every step; continue from it when there")
    ap.add_argument("--atomic", action="store_true", help="--resume: save to PATH.tmp, then os.replace over PATH")
    ap.add_argument("--backup", action="store_true", help="--resume: the checkpoint there renamed to PATH.bak first")
    ap.add_argument("--through-open", action="store_true", help="--resume, --save: saved into open(PATH, 'wb')")
    ap.add_argument("--grow-at", type=int, default=0, help="from this step on, keep --grow-mb MiB more")
    ap.add_argument("--grow-mb", type=float, default=0)
    ap.add_argument("--clip", type=float, default=0, help="clip the gradients' norm to this before each step")
    ap.add_argument("--topk", default="", help="keep one checkpoint in this folder, as ModelCheckpoint(save_top_k=1)")
    ap.add_argument("--stale", default="", help="--topk: the best model a run before this one listed")
    ap.add_argument("--rotate", default="", help="keep the last checkpoint in this folder, the one before removed")
    ap.add_argument("--link-last", action="store_true", help="--topk: last.ckpt a link to each, resumed from")
    ap.add_argument("--keep-dirs", default="", help="keep the last checkpoint folder DIR/step-N, resuming from it")
    ap.add_argument("--fresh", action="store_true", help="--keep-dirs, --hf-dirs: do not resume")
    ap.add_argument("--hard-exit", action="store_true",
                    help="end with os._exit(0) after the last step (Python's exit handlers never run)")
    ap.add_argument("--term-self", action="store_true",
                    help="end by a SIGTERM to itself after the last step, as a scheduler's")
    ap.add_argument("--kill-self", action="store_true",
                    help="end by a SIGKILL to itself after the last step (no handler of any kind runs)")
    ap.add_argument("--hf-dirs", default="", help="a checkpoint-N folder per step as HF's Trainer, resumed from")
    ap.add_argument("--hf-extra", action="store_true",
                    help="--hf-dirs: also a tokenizer.json (text) and an extra.bin (binary, Python's open) in each "
                         "folder, files a run before without them never made there")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = build(a).to(dev)
    params = list(model.parameters())
    if a.two_opt:
        half = len(params) // 2
        opts = [torch.optim.AdamW(params[:half], lr=1e-3), torch.optim.SGD(params[half:], lr=1e-2, momentum=0.9)]
    else:
        opts = [torch.optim.AdamW(params, lr=1e-3)]
    if a.load:
        ck = torch.load(a.load, map_location=dev)
        model.load_state_dict(ck["model"])
        for o, st in zip(opts, ck["opts"]):
            o.load_state_dict(st)
        del ck, st      # the loaded copy is not kept (it would count on the first device)
    data = torch.randint(0, a.vocab, (64, a.seq + 1), generator=torch.Generator().manual_seed(1))
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers, shuffle=False)
    if a.sleep:
        print("ready", flush=True)
        time.sleep(a.sleep)
    step, it = 0, iter(loader)
    prof = torch.profiler.profile() if a.torch_profiler else contextlib.nullcontext()
    with prof:
        train(a, model, opts, loader, dev)
    if a.model == "bn":
        print("bn dtypes", sorted({str(b.dtype) for m in model.modules() for b in m.buffers() if b.is_floating_point()}))


def training_step(a, model, idx, dev):
    """The loss as Lightning's training_step computes it: the logits are
    local, so only what the loss saved outlives the call."""
    with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=a.amp):
        if a.labels:
            return model(input_ids=idx[:, :-1], labels=idx[:, :-1])[0]
        logits = model(input_ids=idx[:, :-1]) if a.model == "hf" else model(idx[:, :-1])
        return nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab), idx[:, 1:].reshape(-1))


def lightning_closure(a, model, opts, idx, dev):
    """What Lightning's optimizer.step(closure) runs: training_step, then
    zero_grad, then backward."""
    loss = training_step(a, model, idx, dev)
    for o in opts:
        o.zero_grad(set_to_none=True)
    loss.backward()
    return loss


def next_batch(it, loader):
    """The next batch, the loader started again when it runs out."""
    try:
        return next(it), it
    except StopIteration:
        it = iter(loader)
        return next(it), it


def checkpoint_io():
    """Lightning's TorchCheckpointIO, or where Lightning is not installed a
    stand-in under its module path with its methods: the bytes through a
    buffer (Lightning's _atomic_save), a removal where the file is."""
    try:
        from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
        return TorchCheckpointIO()
    except ImportError:
        pass
    import io
    import types

    class TorchCheckpointIO:
        def save_checkpoint(self, checkpoint, path, storage_options=None):
            buf = io.BytesIO()
            torch.save(checkpoint, buf)
            with open(path, "wb") as f:
                f.write(buf.getvalue())

        def load_checkpoint(self, path, map_location=None):
            return torch.load(path, map_location=map_location)

        def remove_checkpoint(self, path):
            if os.path.exists(path):
                os.remove(path)

    mod = types.ModuleType("lightning_fabric.plugins.io.torch_io")
    mod.TorchCheckpointIO = TorchCheckpointIO
    sys.modules[mod.__name__] = mod
    return TorchCheckpointIO()


def link_checkpoint(path, link):
    """link a link to path, made as ModelCheckpoint's save_last="link"
    makes it: what is at link removed, a relative link, a copy where links
    cannot be made."""
    if os.path.islink(link) or os.path.isfile(link):
        os.remove(link)
    elif os.path.isdir(link):
        shutil.rmtree(link)
    try:
        os.symlink(os.path.relpath(path, os.path.dirname(link)), link)
    except OSError:
        shutil.copy(path, link)


def safetensors_torch():
    """safetensors.torch, or where it is not installed the stand-in of
    tests/bridge/stand_ins."""
    try:
        import safetensors.torch
    except ImportError:
        sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "stand_ins"))
        import safetensors.torch
    return safetensors.torch


def step_dirs(top, prefix="step"):
    """The N of each PREFIX-N folder in top, in order."""
    return sorted(int(m.group(1)) for m in (re.fullmatch(prefix + r"-(\d+)", n) for n in os.listdir(top)) if m)


def train(a, model, opts, loader, dev):
    step, it = 0, iter(loader)
    ckio, best = (checkpoint_io(), a.stale or None) if a.topk else (None, None)
    if a.resume and os.path.exists(a.resume):
        ck = torch.load(a.resume, map_location=dev)
        model.load_state_dict(ck["model"])
        for o, st in zip(opts, ck["opts"]):
            o.load_state_dict(st)
        step = ck["step"]
        for _ in range(step * a.accum):     # the data where the saved run stopped
            _, it = next_batch(it, loader)
        del ck, st
        print("resumed at step %d" % step, flush=True)
    last = os.path.join(a.topk, "last.ckpt") if a.topk and a.link_last else None
    if last is not None and os.path.lexists(last):
        ck = ckio.load_checkpoint(last, map_location=dev)
        model.load_state_dict(ck["model"])
        step, best = ck["step"], ck["best"]
        for _ in range(step * a.accum):
            _, it = next_batch(it, loader)
        del ck
        print("resumed at step %d from last.ckpt" % step, flush=True)
    found = step_dirs(a.hf_dirs, "checkpoint") if a.hf_dirs and not a.fresh else []
    if found:
        here = os.path.join(a.hf_dirs, "checkpoint-%d" % found[-1])
        model.load_state_dict(safetensors_torch().load_file(os.path.join(here, "model.safetensors")))
        with open(os.path.join(here, "trainer_state.json")) as f:
            step = json.load(f)["global_step"]
        has_opt = os.path.isfile(os.path.join(here, "optimizer.pt"))
        if has_opt:
            for o, st in zip(opts, torch.load(os.path.join(here, "optimizer.pt"), map_location=dev)):
                o.load_state_dict(st)
        for _ in range(step * a.accum):
            _, it = next_batch(it, loader)
        print("resumed at step %d from checkpoint-%d (optimizer state: %s)" % (step, step, "yes" if has_opt else "no"),
              flush=True)
    if a.keep_dirs and not a.fresh:
        found = step_dirs(a.keep_dirs)
        if found:
            ck = torch.load(os.path.join(a.keep_dirs, "step-%d" % found[-1], "model.pt"), map_location=dev)
            model.load_state_dict(ck["model"])
            step = ck["step"]
            for _ in range(step * a.accum):
                _, it = next_batch(it, loader)
            del ck
            print("resumed at step %d from its folder" % step, flush=True)
    extra = None
    while step < a.steps:
        if a.grow_at and step + 1 >= a.grow_at and extra is None:
            extra = torch.ones(int(a.grow_mb * 2**20) // 4, device=dev)
        if a.closure:                # the first optimizer runs the iteration inside its step, as Lightning's does
            idx, it = next_batch(it, loader)
            idx = idx.to(dev)
            loss = opts[0].step(lambda: lightning_closure(a, model, opts, idx, dev))
            for o in opts[1:]:
                o.step()
        else:
            if not a.lightning_order:
                for o in opts:
                    o.zero_grad(set_to_none=True)
            for _ in range(a.accum):
                idx, it = next_batch(it, loader)
                idx = idx.to(dev)
                if a.step_fn or a.labels:
                    loss = training_step(a, model, idx, dev)     # the outputs are gone before backward
                else:
                    with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=a.amp):
                        logits = model(input_ids=idx[:, :-1]) if a.model == "hf" else model(idx[:, :-1])
                        loss = nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab),
                                                           idx[:, 1:].reshape(-1))
                if a.lightning_order and _ == 0:
                    for o in opts:       # Lightning's closure: training_step, zero_grad, backward
                        o.zero_grad(set_to_none=True)
                (loss / a.accum).backward()
            if a.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            for o in opts:
                o.step()
        print("step %d loss %.4f" % (step, loss.item()), flush=True)
        step += 1
        if a.move_each_step:
            model.to(dev)
        if a.save and a.through_open:
            with open(a.save, "wb") as f:
                torch.save({"model": model.state_dict(), "opts": [o.state_dict() for o in opts]}, f)
        elif a.save:
            torch.save({"model": model.state_dict(), "opts": [o.state_dict() for o in opts]}, a.save)
        if a.resume:
            if a.backup and os.path.exists(a.resume):
                os.replace(a.resume, a.resume + ".bak")
            to = a.resume + ".tmp" if a.atomic else a.resume
            ck = {"model": model.state_dict(), "opts": [o.state_dict() for o in opts], "step": step}
            if a.through_open:
                with open(to, "wb") as f:
                    torch.save(ck, f)
            else:
                torch.save(ck, to)
            if a.atomic:
                os.replace(to, a.resume)
        if a.rotate:
            torch.save({"model": model.state_dict(), "step": step}, os.path.join(a.rotate, "ckpt_%d.pt" % step))
            if step > 1:
                os.remove(os.path.join(a.rotate, "ckpt_%d.pt" % (step - 1)))
        if a.keep_dirs:
            here = os.path.join(a.keep_dirs, "step-%d" % step)
            os.makedirs(here, exist_ok=True)
            torch.save({"model": model.state_dict(), "step": step}, os.path.join(here, "model.pt"))
            if not os.path.isfile(os.path.join(here, "model.pt")):
                raise RuntimeError("the checkpoint just saved is not in %s" % here)
            for n in step_dirs(a.keep_dirs):
                if n != step:
                    shutil.rmtree(os.path.join(a.keep_dirs, "step-%d" % n))
        if a.hf_dirs:
            here = os.path.join(a.hf_dirs, "checkpoint-%d" % step)
            os.makedirs(here, exist_ok=True)
            with open(os.path.join(here, "config.json"), "w") as f:
                json.dump({"model": a.model, "blocks": a.blocks}, f)
            safetensors_torch().save_file({k: v.detach().clone() for k, v in model.state_dict().items()},
                                          os.path.join(here, "model.safetensors"))
            torch.save([o.state_dict() for o in opts], os.path.join(here, "optimizer.pt"))
            with open(os.path.join(here, "trainer_state.json"), "w") as f:
                json.dump({"global_step": step, "run": os.getpid()}, f)    # as HF's log_history: the run's own
            if a.hf_extra:
                with open(os.path.join(here, "tokenizer.json"), "w") as f:
                    json.dump({"step": step}, f)
                with open(os.path.join(here, "extra.bin"), "wb") as f:
                    f.write(os.urandom(64))
            with open(os.path.join(here, "trainer_state.json")) as f:
                if json.load(f)["global_step"] != step:
                    raise RuntimeError("the trainer's state just written is not in %s" % here)
        if ckio is not None:
            path = os.path.join(a.topk, "step=%d.ckpt" % step)
            ckio.save_checkpoint({"model": model.state_dict(), "step": step, "best": path}, path)
            if best is not None:
                ckio.remove_checkpoint(best)
            best = path
            if last is not None:
                link_checkpoint(path, last)


if __name__ == "__main__":
    main()
    if "--hard-exit" in sys.argv:
        sys.stdout.flush()
        os._exit(0)
    if "--term-self" in sys.argv or "--kill-self" in sys.argv:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGTERM if "--term-self" in sys.argv else signal.SIGKILL)
        time.sleep(30)
