"""A program that wraps its model in DistributedDataParallel (one process,
gloo): under a plan that splits the model memsplit must refuse it."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import models  # noqa: E402

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(20000 + os.getpid() % 20000))
dist.init_process_group("gloo", rank=0, world_size=1)
m = models.build(type("A", (), {"model": "ref", "vocab": 128, "dim": 32, "blocks": 6, "seq": 16, "ckpt": False})())
torch.nn.parallel.DistributedDataParallel(m)
print("wrapped")
