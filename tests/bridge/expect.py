"""Prints, as JSON, what the bridge's rows must say about a test model's
parameters: the bytes of the parameters each layer owns (layer 0 the modules
before the block list, then each block, then the modules after), a shared
parameter counted once, at its first owner in registration order. Same
arguments as models.py."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

POST = {"ref": ["segment2"], "seq": ["head"], "hf": ["transformer.ln_f", "lm_head"]}
LIST = {"ref": "transformers", "seq": "body", "hf": "transformer.h"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="ref")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--ckpt", action="store_true")
    a, _ = ap.parse_known_args()
    m = models.build(a)
    lst = m.get_submodule(LIST[a.model])
    n = len(lst)
    out = [0] * (n + 2)
    seen = set()
    for path, mod in m.named_modules():
        if path.startswith(LIST[a.model] + "."):
            layer = int(path[len(LIST[a.model]) + 1:].split(".")[0]) + 1
        elif any(path == p or path.startswith(p + ".") for p in POST[a.model]):
            layer = n + 1
        else:
            layer = 0
        for p in mod._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                out[layer] += p.numel() * p.element_size()
    print(json.dumps({"param": out}))


if __name__ == "__main__":
    main()
