"""Runs the placement snippet `memsplit plan` printed (argv[1]) on the
reference model of tests/bridge/models.py and prints whether every listed
module landed on its device and the model still runs."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import models  # noqa: E402

ns = {}
exec(open(sys.argv[1]).read(), ns)
a = type("A", (), {"model": "ref", "vocab": 128, "dim": 32, "blocks": 6, "seq": 16, "ckpt": False})()
m = ns["place"](models.build(a))
placement = ns["PLACEMENT"]
ok = all(next(m.get_submodule(n).parameters()).device.type == torch.device(d).type for n, d in placement)
out = m(torch.randint(0, 128, (2, 16)))
print("snippet", ok and tuple(out.shape) == (2, 16, 128), len(placement))
