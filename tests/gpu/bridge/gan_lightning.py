"""A GAN as Lightning's docs write one: a generator and a discriminator,
two Adam optimizers, manual optimization (the discriminator's step, then
the generator's, in one training_step), on random data. Each step prints
`step N loss X ms Y`, X the discriminator's loss plus the generator's (what
the step passed to backward)."""
import argparse
import atexit
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import lightning as L
except ImportError:
    import pytorch_lightning as L

import step_report   # beside this script


def mlp(d_in, width, depth, d_out):
    layers, d = [], d_in
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.LeakyReLU(0.2)]
        d = width
    return nn.Sequential(*layers, nn.Linear(d, d_out))


class GAN(L.LightningModule):
    def __init__(self, a):
        super().__init__()
        self.automatic_optimization = False
        self.a = a
        self.generator = mlp(a.noise, a.width, a.depth, a.dim)
        self.discriminator = mlp(a.dim, a.width, a.depth, 1)
        self.times = []

    def training_step(self, batch, i):
        z, real = batch
        opt_g, opt_d = self.optimizers()
        fake = self.generator(z)
        ones = torch.ones(real.shape[0], 1, device=real.device)
        d_loss = F.binary_cross_entropy_with_logits(self.discriminator(real), ones) + \
            F.binary_cross_entropy_with_logits(self.discriminator(fake.detach()), torch.zeros_like(ones))
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        g_loss = F.binary_cross_entropy_with_logits(self.discriminator(fake), ones)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        return {"loss": (d_loss + g_loss).detach()}

    def on_train_batch_start(self, batch, i):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, out, batch, i):
        torch.cuda.synchronize()
        self.times.append((time.perf_counter() - self.t0) * 1e3)
        loss = float(out["loss"] if isinstance(out, dict) else out)
        print("step %d loss %.4f ms %.2f" % (i, loss, self.times[-1]), flush=True)

    def configure_optimizers(self):
        return (torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.999)),
                torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--noise", type=int, default=256)
    ap.add_argument("--dim", type=int, default=4096, help="a sample's size")
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--depth", type=int, default=6, help="hidden layers of each model")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--precision", default="32-true")
    ap.add_argument("--report", default="", help="write a JSON of step times and torch's own peak here")
    a = ap.parse_args()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    n = a.steps * a.batch
    data = torch.utils.data.TensorDataset(torch.randn(n, a.noise, generator=g), torch.randn(n, a.dim, generator=g))
    # one epoch of `steps` batches: in manual optimization Lightning's max_steps counts each optimizer's step
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch)
    trainer = L.Trainer(accelerator="gpu", devices=1, precision=a.precision, max_epochs=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    gan = GAN(a)
    if a.report:    # at exit too: memsplit stops a trial inside the last step
        atexit.register(lambda: step_report.write(a.report, gan.times))
    trainer.fit(gan, loader)


if __name__ == "__main__":
    main()
