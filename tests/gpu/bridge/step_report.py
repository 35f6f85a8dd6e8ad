"""What the GPU suite's programs report of themselves (--report FILE): their
step times and torch's own counters, to hold memsplit's figures against.
Imported, it also says at a CUDA out-of-memory error that ends the program
what the device held beyond PyTorch's memory at that moment (one stderr line,
"at OOM: ..."): the programs section compares it between the program under
memsplit and under the ballast alone where the two die in different modules."""
import json
import sys

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


def _at_oom(kind, exc, tb):
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom) and torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
        print("at OOM: device free %d of %d B; PyTorch reserved %d, allocated %d; beyond PyTorch %d B "
              "(context, libraries, a ballast)" % (free, total, reserved, allocated, total - free - reserved),
              file=sys.stderr, flush=True)
    _previous(kind, exc, tb)


_previous = sys.excepthook
sys.excepthook = _at_oom
