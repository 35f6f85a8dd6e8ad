"""Prints, as JSON, what the bridge's rows must say about a test model's
parameters, given the rows' names (a JSON list in --names): each row owns
the parameters of the modules it names and of their submodules; a
parameter shared by several modules is counted once, at its first owner in
registration order; the parameters of modules no row names (the root's
own, those of a module opened to reach the units) belong to the first row.
Same model arguments as models.py."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="ref")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--names", required=True, help="a JSON file with the rows' names")
    a, _ = ap.parse_known_args()
    names = json.load(open(a.names))
    m = models.build(a)
    row_of = {}
    for i, name in enumerate(names):
        for path in name.split(","):
            if path and not path.startswith("("):
                row_of[path] = i
    out = [0] * len(names)
    seen = set()
    for path, mod in m.named_modules():
        row, p = 0, path
        while True:               # the nearest named ancestor (or the module itself)
            if p in row_of:
                row = row_of[p]
                break
            if not p:
                break
            p = p.rsplit(".", 1)[0] if "." in p else ""
        for prm in mod._parameters.values():
            if prm is not None and id(prm) not in seen:
                seen.add(id(prm))
                out[row] += prm.numel() * prm.element_size()
    print(json.dumps({"param": out}))


if __name__ == "__main__":
    main()
