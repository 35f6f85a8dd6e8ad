"""HF transformers' LlamaForCausalLM, built from a LlamaConfig with random
weights (16 layers, hidden 2048, intermediate 5632, 32 heads over 8 key/value
heads, vocab 32000 by default), trained by a LightningModule on one GPU
(bf16-mixed by default), AdamW, batch 4 x 2048 tokens."""
import argparse
import atexit
import time

import torch

try:
    import lightning as L
except ImportError:
    import pytorch_lightning as L
from transformers import LlamaConfig, LlamaForCausalLM

import step_report   # beside this script


class LM(L.LightningModule):
    def __init__(self, a):
        super().__init__()
        self.a = a
        cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.dim, intermediate_size=a.ff, num_hidden_layers=a.layers,
                          num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                          max_position_embeddings=max(a.seq, 2048), use_cache=False)
        self.model = LlamaForCausalLM(cfg).float()
        self.times = []

    def training_step(self, batch, i):
        return self.model(input_ids=batch, labels=batch).loss

    def on_train_batch_start(self, batch, i):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, out, batch, i):
        torch.cuda.synchronize()
        self.times.append((time.perf_counter() - self.t0) * 1e3)
        loss = float(out["loss"]) if isinstance(out, dict) else float(out)
        print("step %d loss %.4f ms %.2f" % (i, loss, self.times[-1]), flush=True)
        self.write_report()

    def write_report(self):
        if self.a.report:
            step_report.write(self.a.report, self.times)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--ff", type=int, default=5632, help="the MLP's intermediate size")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32000)
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
    atexit.register(lm.write_report)   # memsplit stops a trial inside the last step
    trainer.fit(lm, loader)


if __name__ == "__main__":
    main()
