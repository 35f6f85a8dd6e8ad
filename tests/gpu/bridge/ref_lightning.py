"""The reference model (tests/bridge/ref_model.py) trained by a
LightningModule, as the user whose question started memsplit does:
`--precision 16-mixed` (or bf16-mixed), one GPU. Reports what torch itself
counted (--report) for the tests to compare with memsplit's profile."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

try:
    import lightning as L
except ImportError:                      # the older package name
    import pytorch_lightning as L

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bridge"))
from ref_model import Model  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq, vocab):
        self.n, self.seq, self.vocab = n, seq, vocab

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, self.vocab, (self.seq + 1,), generator=g)


class LM(L.LightningModule):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.model = Model(a.vocab, a.dim, a.heads, a.blocks)
        self.times, self.t0 = [], None

    def training_step(self, batch, i):
        logits = self.model(batch[:, :-1])
        return F.cross_entropy(logits.float().reshape(-1, self.a.vocab), batch[:, 1:].reshape(-1))

    def on_train_batch_start(self, batch, i):
        if self.a.grow_at and self.trainer.global_step + 1 >= self.a.grow_at and getattr(self, "extra", None) is None:
            self.extra = torch.ones(int(self.a.grow_mb * 2**20) // 4, device=self.device)   # kept from here on
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, out, batch, i):
        torch.cuda.synchronize()
        self.times.append((time.perf_counter() - self.t0) * 1e3)
        loss = float(out["loss"]) if isinstance(out, dict) else float(out)
        print("step %d loss %.4f ms %.2f" % (i, loss, self.times[-1]), flush=True)
        self.losses = getattr(self, "losses", []) + [loss]
        self.write_report()

    def write_report(self):
        if self.a.report:
            opt = self.trainer.optimizers[0]
            nb = lambda ts: sum(t.numel() * t.element_size() for t in ts)
            state = [v for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
            with open(self.a.report, "w") as f:
                json.dump({"param": nb(self.parameters()), "optim": nb(state), "step_ms": self.times,
                           "losses": getattr(self, "losses", []),
                           "max_allocated": torch.cuda.max_memory_allocated(),
                           "max_reserved": torch.cuda.max_memory_reserved()}, f)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=15)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--precision", default="16-mixed")
    ap.add_argument("--report", default="")
    ap.add_argument("--ckpt-dir", default="", help="a checkpoint after every step there; fit resumes from 'last'")
    ap.add_argument("--grow-at", type=int, default=0, help="from this step on, keep --grow-mb MiB more")
    ap.add_argument("--grow-mb", type=float, default=0)
    a = ap.parse_args()
    torch.manual_seed(0)
    lm = LM(a)
    import atexit
    atexit.register(lm.write_report)   # memsplit stops a trial inside the last step
    data = torch.utils.data.DataLoader(Tokens(a.steps * a.batch, a.seq, a.vocab), batch_size=a.batch)
    ckpt = [getattr(L, "pytorch", L).callbacks.ModelCheckpoint(dirpath=a.ckpt_dir, save_last=True, every_n_train_steps=1)] \
        if a.ckpt_dir else []
    trainer = L.Trainer(accelerator="gpu", devices=1, precision=a.precision, max_steps=a.steps, logger=False,
                        enable_checkpointing=bool(a.ckpt_dir), callbacks=ckpt, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(lm, data, ckpt_path="last" if a.ckpt_dir else None)


if __name__ == "__main__":
    main()
