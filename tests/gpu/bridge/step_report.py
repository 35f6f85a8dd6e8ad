"""What the GPU suite's programs report of themselves (--report FILE): their
step times and torch's own counters, to hold memsplit's figures against."""
import json

import torch


def write(path, times):
    """step_ms, and on a GPU torch's allocated and reserved peaks and what
    the device holds beyond the allocator (the context and libraries)."""
    out = {"step_ms": times}
    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        out.update(max_allocated=torch.cuda.max_memory_allocated(), max_reserved=torch.cuda.max_memory_reserved(),
                   context=total - free - torch.cuda.memory_reserved())
    with open(path, "w") as f:
        json.dump(out, f)
