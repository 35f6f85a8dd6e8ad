"""HF transformers' GPT2LMHeadModel, built from a config with random
weights, trained by a LightningModule on one GPU (bf16-mixed by default)."""
import argparse
import json
import time

import torch

try:
    import lightning as L
except ImportError:
    import pytorch_lightning as L
from transformers import GPT2Config, GPT2LMHeadModel


class LM(L.LightningModule):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.model = GPT2LMHeadModel(GPT2Config(n_layer=a.layers, n_embd=a.dim, n_head=a.heads,
                                                n_positions=a.seq, vocab_size=a.vocab))
        self.times = []

    def training_step(self, batch, i):
        return self.model(input_ids=batch, labels=batch).loss

    def on_train_batch_start(self, batch, i):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, out, batch, i):
        torch.cuda.synchronize()
        self.times.append((time.perf_counter() - self.t0) * 1e3)
        loss = float(out["loss"])
        print("step %d loss %.4f ms %.2f" % (i, loss, self.times[-1]), flush=True)
        self.write_report()

    def write_report(self):
        if self.a.report:
            with open(self.a.report, "w") as f:
                free, total = torch.cuda.mem_get_info()
                json.dump({"step_ms": self.times, "max_allocated": torch.cuda.max_memory_allocated(),
                           "context": total - free - torch.cuda.memory_reserved()}, f)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--precision", default="bf16-mixed")
    ap.add_argument("--report", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, a.vocab, (a.steps * a.batch, a.seq), generator=g)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch)
    trainer = L.Trainer(accelerator="gpu", devices=1, precision=a.precision, max_steps=a.steps, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    lm = LM(a)
    import atexit
    atexit.register(lm.write_report)   # memsplit stops a trial inside the last step
    trainer.fit(lm, loader)


if __name__ == "__main__":
    main()
