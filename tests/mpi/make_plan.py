#!/usr/bin/env python3
"""make_plan.py — a plan file for a p x d layout of a model, for the MPI tests.

Usage: make_plan.py OUT --model NAME --layers L --seq T --d-model C --heads H --vocab V
                    --stages P --replicas D [--zero] [--schedule gpipe|1f1b]
                    --micro-batch U --n-micro M (per step, over every replica)
                    [--recompute] [--devices N]

Predictions are zeros (no profile behind them): these plans only say how to
lay the model out, which is what the layout tests need."""
import argparse, json

a = argparse.ArgumentParser()
a.add_argument("out")
for k in ("layers", "seq", "d-model", "heads", "vocab", "stages", "replicas", "micro-batch", "n-micro"):
    a.add_argument("--" + k, type=int, required=True)
a.add_argument("--model", required=True)
a.add_argument("--zero", action="store_true")
a.add_argument("--recompute", action="store_true")
a.add_argument("--schedule", default="1f1b")
a.add_argument("--devices", type=int, default=0)
o = a.parse_args()
p, d = o.stages, o.replicas
n_dev = max(o.devices, p * d)
cats = ["param", "master", "grad", "optim", "act", "transient", "comm", "reserve"]
stages = []
for s in range(p):
    st = {"device": s, "layers": [s * o.layers // p, (s + 1) * o.layers // p - 1], "recompute": o.recompute,
          "predicted_peak_bytes": 0, "bytes": {c: 0 for c in cats},
          "fwd_ms": 0, "bwd_ms": 0, "comm_ms": 0, "opt_ms": 0}
    if d > 1:
        st["replica_devices"] = [r * p + s for r in range(d)]  # rank r*p+s on device r*p+s
    stages.append(st)
plan = {"version": 2,
        "model": {"name": o.model, "n_layers": o.layers, "seq_len": o.seq, "d_model": o.d_model,
                  "n_head": o.heads, "vocab": o.vocab},
        "devices": [{"index": i, "device": "cpu/v%d" % i, "capacity_bytes": 0} for i in range(n_dev)],
        "precision": "fp32", "schedule": o.schedule, "micro_batch": o.micro_batch, "n_micro": o.n_micro,
        "global_batch": o.micro_batch * o.n_micro, "headroom": 0.05, "link_gbps": 200.0,
        "replicas": d, "zero": o.zero, "stages": stages, "predicted_step_ms": 0, "profile": {},
        "reasoning": None}
json.dump(plan, open(o.out, "w"), indent=1)
