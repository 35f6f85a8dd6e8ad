"""HF GPT-2 trained a few steps, a checkpoint-N folder after each as HF's
Trainer writes them: save_pretrained (config.json, model.safetensors through
safetensors) and the optimizer's state through torch.save. transformers is
imported before torch, as many programs do: on its import it asks whether
torch is installed (importlib.util.find_spec) before anything imports it.

Run: python3 hf_checkpoints.py DIR STEPS
"""
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: I001 (before torch, on purpose)
import os
import sys

import torch


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1000, n_positions=128)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for step in range(1, steps + 1):
        x = torch.randint(0, 1000, (8, 128), device="cuda")
        loss = model(x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print("step %d loss %.4f" % (step, loss.item()), flush=True)
        here = os.path.join(out, "checkpoint-%d" % step)
        os.makedirs(here, exist_ok=True)
        model.save_pretrained(here)
        torch.save(opt.state_dict(), os.path.join(here, "optimizer.pt"))


if __name__ == "__main__":
    main()
