"""HF transformers' T5ForConditionalGeneration built from a T5Config with
random weights (t5-large's shape by default: 24 + 24 layers, d_model 1024,
d_ff 4096, 16 heads), trained in a plain loop under bf16 autocast with
AdamW on random token ids (input and labels of --seq tokens)."""
import argparse
import atexit
import time

import torch
from transformers import T5Config, T5ForConditionalGeneration

import step_report   # beside this script


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=24, help="encoder layers, and as many decoder layers")
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--ff", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=32128)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--report", default="", help="write a JSON of step times and torch's own peak here")
    a = ap.parse_args()
    torch.manual_seed(0)
    cuda = a.device.startswith("cuda")
    cfg = T5Config(vocab_size=a.vocab, d_model=a.dim, d_kv=a.kv, d_ff=a.ff, num_layers=a.layers,
                   num_decoder_layers=a.layers, num_heads=a.heads, dropout_rate=a.dropout, use_cache=False)
    model = T5ForConditionalGeneration(cfg).float().to(a.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    times = []
    if a.report:    # at exit too: memsplit stops a trial inside the last step's optimizer
        atexit.register(lambda: step_report.write(a.report, times))
    for step in range(a.steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        ids = torch.randint(1, a.vocab, (a.batch, a.seq), generator=g).to(a.device)
        labels = torch.randint(1, a.vocab, (a.batch, a.seq), generator=g).to(a.device)
        # the decoder's input: the labels shifted right after token 0 (T5's start, the pad), given
        # here since a config built by hand may name no decoder start token for labels= to use
        dec = torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], dim=1)
        with torch.autocast(device_type=a.device.split(":")[0], dtype=torch.bfloat16):
            loss = model(input_ids=ids, decoder_input_ids=dec, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        lv = loss.item()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        print("step %d loss %.4f ms %.2f" % (step, lv, times[-1]), flush=True)
        if a.report:
            step_report.write(a.report, times)


if __name__ == "__main__":
    main()
