#!/usr/bin/env python3
"""report.py — the benchmark's tables and targets, from bench/run.sh's raw
output: report.py RAW_DIR DEST_JSON.

Reads RAW_DIR/manifest.txt (one line per run: name impl model precision
warmup steps kernel_steps), each run's NAME.json (memsplit train --json or
torch_ref.py's object), NAME.kernels.json (the per-family breakdown) and
gemm_rate.json (the measured matrix rate). Prints:
  - the table: tokens/s, ms/step, MFU, peaks, losses, ratios vs torch.compile;
  - where the step goes, per kernel family, for each model and precision;
  - the issue's targets, each MET or MISSED by how much.
Writes DEST_JSON with everything (raw runs, breakdowns, rows, targets).
Exit 1 when a run gave no result. See bench/README.md for the definitions.
"""
import json
import os
import sys

GiB = float(1 << 30)
FLOPS_FORMULA = ("6 * (L * (4 + 2 * mlp_ratio) * d^2 + d * V) + 12 * L * T * d per token: every matmul of the "
                 "trainer (qkv, attention projection, MLP, LM head) forward and backward, plus attention's "
                 "QK^T and AV counted without the causal half (PaLM's convention)")

# (model, precision, what, numerator impl, denominator impl, metric, op, target)
TARGETS = [
    ("gpt2-small", "bf16", "tokens/s", "memsplit", "torch-compile", "tps", ">=", 1.15),
    ("gpt2-small", "bf16", "peak (pool vs reserved)", "memsplit", "torch-compile", "mem", "<=", 0.80),
    ("gpt2-small", "fp32", "tokens/s", "memsplit", "torch-compile", "tps", ">=", 1.00),
    ("seed17", "bf16", "tokens/s", "memsplit", "torch-compile", "tps", ">=", 1.05),
    ("seed17", "bf16", "peak (pool vs reserved)", "memsplit", "torch-eager", "mem", "<", 1.00),
    ("seed17", "bf16", "peak (pool vs reserved)", "memsplit", "torch-compile", "mem", "<", 1.00),
]
IMPL_LABEL = {"memsplit": "memsplit", "torch-eager": "torch eager", "torch-compile": "torch.compile"}


def load(path):
    """A JSON file: pretty-printed whole, or one object on its last line
    (after any stray output)."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    for candidate in (text, text.splitlines()[-1] if text else ""):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    return None


def last_log_line(raw, name):
    try:  # the log's last line says why (a timeout, a skip, an error)
        with open(os.path.join(raw, name + ".log")) as f:
            return ([l.strip() for l in f if l.strip()] or ["no output"])[-1]
    except OSError:
        return "no result"


def flops_per_token(shape):
    L, d, T, V = shape["n_layer"], shape["d_model"], shape["seq_len"], shape["vocab"]
    r = shape.get("mlp_ratio", 4)
    return 6 * (L * (4 + 2 * r) * d * d + d * V) + 12 * L * T * d


def make_row(raw, name, impl, model, prec, warmup, steps, rates):
    j = load(os.path.join(raw, name + ".json"))
    row = {"name": name, "impl": impl, "model": model, "precision": prec, "ok": False, "raw": j}
    if j is None or (impl == "memsplit" and not j.get("ok")):
        row["error"] = (j or {}).get("error") or last_log_line(raw, name)
        return row
    row["tps"] = j.get("tokens_per_s") or 0.0
    row["shape"] = j.get("shape")
    if impl == "memsplit":
        d = (j.get("devices") or [{}])[0]
        peak = d.get("peak_bytes") or 0
        reserve = (d.get("peak_by_category") or {}).get("reserve", 0)
        row["mem_dev"], row["mem"], row["alloc"] = peak, peak - reserve, None
        row["ms"] = j.get("step_ms") or None
        # memsplit ran warm-up + timed + traced steps: compare the first
        # warm-up + timed ones with torch's
        losses = (j.get("losses") or [])[:warmup + steps]
    else:
        row["mem_dev"], row["mem"] = j.get("device_used_bytes"), j.get("peak_reserved_bytes")
        row["alloc"] = j.get("peak_allocated_bytes")
        row["ms"] = j.get("step_ms")
        losses = j.get("losses") or []
    row["losses"] = losses
    row["loss"] = (losses[0], losses[-1]) if losses else (None, None)
    rate = rates.get(prec)
    if row["shape"] and rate and row["tps"]:
        row["flops_per_token"] = flops_per_token(row["shape"])
        row["mfu"] = row["tps"] * row["flops_per_token"] / (rate * 1e12)
    row["ok"] = True
    k = load(os.path.join(raw, name + ".kernels.json"))
    if k is not None:
        row["kernels"] = k
    return row


def gib(b):
    return f"{b / GiB:8.2f}" if isinstance(b, (int, float)) and b else "       -"


def print_table(rows, groups):
    hdr = (f"{'impl':<14} {'model':<11} {'prec':<5} {'tokens/s':>10} {'ms/step':>8} {'MFU':>6} {'pool GiB':>8} "
           f"{'dev GiB':>8} {'alloc GiB':>9} {'tok/s x':>7} {'pool x':>6}  loss first -> last  max|dloss|")
    print(hdr)
    print("-" * len(hdr))
    for g in groups:
        grp = [r for r in rows if (r["model"], r["precision"]) == g]
        base = next((r for r in grp if r["impl"] == "torch-compile" and r["ok"]), None)
        eager = next((r for r in grp if r["impl"] == "torch-eager" and r["ok"]), None)
        for r in grp:
            lead = f"{r['impl']:<14} {r['model']:<11} {r['precision']:<5}"
            if not r["ok"]:
                print(f"{lead} FAILED: {r.get('error', 'no result')[:90]}")
                continue
            tx = f"{r['tps'] / base['tps']:7.2f}" if base and base["tps"] else "      -"
            mx = f"{r['mem'] / base['mem']:6.2f}" if base and base.get("mem") and r.get("mem") else "     -"
            lf, ll = r["loss"]
            loss = f"{lf:.4f} -> {ll:.4f}" if lf is not None and ll is not None else "-"
            ms = f"{r['ms']:8.1f}" if r.get("ms") else "       -"
            mfu = f"{100 * r['mfu']:5.1f}%" if r.get("mfu") else "     -"
            dl = "-"
            if eager and r is not eager and r["losses"] and eager["losses"]:
                n = min(len(r["losses"]), len(eager["losses"]))
                dl = f"{max(abs(a - b) for a, b in zip(r['losses'][:n], eager['losses'][:n])):.2e}"
            print(f"{lead} {r['tps']:10.0f} {ms} {mfu} {gib(r['mem'])} {gib(r['mem_dev'])} "
                  f"{gib(r.get('alloc')):>9} {tx} {mx}  {loss:<18}  {dl}")


def kernel_error(r):
    """Why a run that was asked for kernel times has none, or None."""
    k, raw = r.get("kernels") or {}, r.get("raw") or {}
    if k.get("families"):
        return None
    return k.get("error") or raw.get("kernel_times_error") or (
        "no kernel times file" if raw.get("kernel_times") else None)


def print_kernels(rows, groups):
    for g in groups:
        for r in rows:
            if (r["model"], r["precision"]) == g and r["ok"] and kernel_error(r):
                print(f"\nno step breakdown for {r['name']}: {kernel_error(r)}")
        grp = [r for r in rows if (r["model"], r["precision"]) == g and (r.get("kernels") or {}).get("families")]
        if not grp:
            continue
        ks = [r["kernels"] for r in grp]
        print()
        steps = ", ".join(f"{IMPL_LABEL.get(r['impl'], r['impl'])} {r['kernels'].get('steps', '?')}" for r in grp)
        print(f"where the step goes: {g[0]} {g[1]} (traced steps: {steps}; ms per step, % of the traced step)")
        print(f"{'':<34}" + "".join(f"{IMPL_LABEL.get(r['impl'], r['impl']):>20}" for r in grp))
        for fam, v in ks[0]["families"].items():
            cells = "".join(f"{k['families'].get(fam, {}).get('ms', 0):11.2f} {k['families'].get(fam, {}).get('pct', 0):6.1f}%"
                            + " " for k in ks)
            print(f"  {v.get('label', fam):<32}{cells}")
        for key, label in (("kernel_ms", "kernels, summed"), ("busy_ms", "busy (union of intervals)"),
                           ("gap_ms", "gap: step - busy (launch/host)"), ("step_ms", "traced step")):
            pk = {"busy_ms": "busy_pct", "gap_ms": "gap_pct"}.get(key)
            cells = "".join(f"{k.get(key, 0):11.2f} " + (f"{k.get(pk, 0):6.1f}%" if pk else "       ") + " " for k in ks)
            print(f"  {label:<32}{cells}")
        # the gap by the length of its idle stretches (kernel_times.h)
        for key, label in (("under_5us", "  idle < 5 us (device launch)"), ("5_to_50us", "  idle 5-50 us"),
                           ("over_50us", "  idle > 50 us (host, waits)")):
            cells = "".join(f"{(k.get('idle') or {}).get(key, {}).get('ms', 0):11.2f} "
                            f"{(k.get('idle') or {}).get(key, {}).get('count', 0):6.0f}x " for k in ks)
            print(f"  {label:<32}{cells}")
        cells = "".join(f"{(k.get('idle') or {}).get('edges_ms', 0):11.2f}        " for k in ks)
        print(f"  {'  before/after the step':<32}{cells}")
        for r in grp:
            top = r["kernels"].get("top") or []
            if top:
                print(f"  longest kernels, {IMPL_LABEL.get(r['impl'], r['impl'])}:")
                for t in top[:5]:
                    print(f"    {t['ms']:9.2f} ms {t['pct']:5.1f}%  {t['calls']:6.1f}x  {t['family']:<12} {t['name'][:70]}")


def judge(rows):
    by = {(r["impl"], r["model"], r["precision"]): r for r in rows}
    out = []
    for model, prec, what, num, den, metric, op, target in TARGETS:
        a, b = by.get((num, model, prec)), by.get((den, model, prec))
        t = {"model": model, "precision": prec, "what": what, "num": num, "den": den, "op": op, "target": target}
        text = f"{model} {prec} {what} {IMPL_LABEL[num]} / {IMPL_LABEL[den]} {op} {target:.2f}x: "
        if not a or not b:
            continue  # not asked for in this call
        if not (a["ok"] and b["ok"] and a.get(metric) and b.get(metric)):
            t["met"] = None
            out.append((t, text + "not measured (" + (a.get("error") or b.get("error") or "no figure") + ")"))
            continue
        ratio = a[metric] / b[metric]
        met = ratio >= target if op == ">=" else ratio <= target if op == "<=" else ratio < target
        t.update(ratio=ratio, met=met)
        if met:
            text += f"{ratio:.3f}x MET"
        elif op == ">=":
            text += f"{ratio:.3f}x MISSED by {target - ratio:.3f}x (memsplit needs {100 * (target / ratio - 1):+.1f}% tokens/s)"
        else:
            text += f"{ratio:.3f}x MISSED by {ratio - target:.3f}x (memsplit needs {100 * (target / ratio - 1):+.1f}% memory)"
        out.append((t, text))
    return out


def main():
    raw, dest = sys.argv[1], sys.argv[2]
    gemm = load(os.path.join(raw, "gemm_rate.json"))
    rates = {p: (gemm or {}).get(f"{p}_tflops") for p in ("bf16", "fp32")}
    rows, groups = [], []
    try:
        manifest = [l.split() for l in open(os.path.join(raw, "manifest.txt")) if l.strip()]
    except OSError:
        manifest = []
    for name, impl, model, prec, w, s, _k in manifest:
        rows.append(make_row(raw, name, impl, model, prec, int(w), int(s), rates))
        if (model, prec) not in groups:
            groups.append((model, prec))
    try:
        gpu = open(os.path.join(raw, "gpu.txt")).read().strip()
    except OSError:
        gpu = None

    print()
    print(f"memsplit vs PyTorch on {gpu or 'an unknown GPU'}; same data and initial weights per model")
    ceil = ", ".join(f"{p} {rates[p]:.1f} TFLOP/s" for p in rates if rates[p])
    print(f"  MFU: model FLOPs/s over the matrix rate measured in this call ({ceil or 'not measured'}):")
    print(f"       {FLOPS_FORMULA}")
    print("  pool GiB: memsplit's peak WITHOUT its 'reserve' category (CUDA context, cuBLASLt")
    print("            workspace) vs torch.cuda.max_memory_reserved (the caching allocator's pool)")
    print("  dev GiB:  the whole device's use: memsplit's peak WITH reserve vs torch's total - free")
    print("  tok/s x, pool x: vs torch.compile of the same model and precision; max|dloss|: vs torch eager")
    print_table(rows, groups)
    print_kernels(rows, groups)
    verdicts = judge(rows)
    if verdicts:
        print()
        print("targets (issue 15):")
        for _t, text in verdicts:
            print("  " + text)
    failed = [r["name"] for r in rows if not r["ok"]]
    if os.path.exists(os.path.join(raw, "gemm_rate.log")) and gemm is None:
        failed.append("gemm_rate")
    with open(dest, "w") as f:
        json.dump({"gpu": gpu, "gemm_rate": gemm, "flops_per_token": FLOPS_FORMULA,
                   "runs": {r["name"]: r["raw"] for r in rows},
                   "kernels": {r["name"]: r.get("kernels") for r in rows},
                   "rows": [{k: v for k, v in r.items() if k not in ("raw", "kernels", "losses")} for r in rows],
                   "targets": [t for t, _ in verdicts]}, f, indent=1)
    print(f"raw results: {dest}")
    if failed:
        print(f"bench: no result from {', '.join(failed)} (logs in {raw})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
