"""Tensor tracking through the dispatcher (docs/bridge.md, "Tensor tracking").

A TorchDispatchMode sees every operator's outputs; a storage not seen
before is an allocation, reported to the C ledger with the layer the
program is in. Frees are found through C++ weak references to the storages,
checked before each allocation (all of them on the CPU, so the order of
frees and allocations, and every peak, is exact; the newest on a GPU, where
the caching allocator's own counters give the exact totals, and all of them
at every layer transition). A refusal by the ledger's cap becomes
torch.cuda.OutOfMemoryError raised from the operator that crossed it.
"""
import os
import threading

from ._history import optimizer_sources
from ._lib import CAT, PH_BACKWARD, PH_INIT

_GPU_RECENT = 64     # storages checked at each allocation on a GPU


class Tracker:
    def __init__(self, torch, session):
        self.torch, self.s = torch, session
        self.lib = session.lib
        self.live = {}           # key -> weak handle, in allocation order
        self.untyped = torch.UntypedStorage if hasattr(torch, "UntypedStorage") else torch._UntypedStorage
        self.cast_ops = set()
        for name in ("_to_copy", "to"):
            op = getattr(torch.ops.aten, name, None)
            if op is not None:
                self.cast_ops.add(op.default if hasattr(op, "default") else op)
        self.half = (torch.float16, torch.bfloat16)
        self.pid = os.getpid()
        self.lock = threading.RLock()   # the program's threads allocate too (start: every thread)
        # the allocator's record on the CPU (_history.Emulated): storages go to it as the GPU's
        # allocator would report them, and the record makes the ledger's events from them
        self.emulate = None

    def storage_of(self, t):
        try:
            st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
            return st, st.data_ptr(), st.nbytes()
        except Exception:        # sparse, meta or wrapper tensors have no plain storage
            return None, 0, 0

    def expire(self, key, handle):
        self.untyped._free_weak_ref(handle)
        del self.live[key]
        ap = self.s.applier
        if ap is not None and ap.watch:
            ap.watch.pop(key, None)      # the address is another storage's from now on
        if self.emulate is not None:
            self.emulate.free(key)
        else:
            self.lib.free(key)

    def sweep_all(self):
        with self.lock:
            for key, h in [kv for kv in list(self.live.items()) if self.untyped._expired(kv[1])]:
                self.expire(key, h)

    def sweep_recent(self):
        if not self.s.cuda:
            self.sweep_all()
            return
        items = list(self.live.items())[-_GPU_RECENT:]
        for key, h in items:
            if self.untyped._expired(h):
                self.expire(key, h)

    def ensure(self, t, key, nbytes, cat, layer):
        """A storage the dispatcher never made (loaded, from numpy): count it now."""
        if key in self.live or t.device.type != self.s.track_type:
            return      # CPU tensors of a GPU program (AdamW's step counters) are not the device's
        st, key2, _ = self.storage_of(t)
        if st is None or key2 != key:
            return
        self.record(st, key, nbytes, cat, layer, t.device.type == "cuda", t)

    def record(self, st, key, nbytes, cat, layer, cuda, t=None, dev=None):
        b = (nbytes + 511) // 512 * 512 if cuda else nbytes
        if self.emulate is not None:
            self.emulate.alloc(key, b)
            self.live[key] = st._weak_ref()
            return 0, b
        ap = self.s.applier
        if dev is None:
            dev = ap.ledger_device(t) if ap is not None and t is not None else 0
        rc = self.lib.alloc(dev, key, b, cat, layer)
        if rc == 0:
            self.live[key] = st._weak_ref()
        return rc, b

    def op_begins(self):
        """Emulating the allocator's record: an operator of the optimizer
        phase is tagged as the GPU's optimizer-phase mode tags it. None
        otherwise."""
        s = self.s
        if self.emulate is None or s.phase != 3 or not s.on or s.record is None or os.getpid() != self.pid:
            return None
        return s.record.op_begins()

    def seen(self, func, args, out, n=None, kwargs=None):
        s = self.s
        if not s.on or os.getpid() != self.pid:
            return
        outs = out if isinstance(out, (tuple, list)) else (out,)
        swept = False
        if self.emulate is not None and s.phase == 3 and n is not None:
            s.record.optimizer_op(args, out, n, kwargs)    # what the GPU's optimizer-phase mode does
        owners = self.optimizer_owners(args, len(outs)) if self.emulate is None else None
        for i, t in enumerate(outs):
            if not isinstance(t, self.torch.Tensor) or t.device.type != s.track_type:
                continue
            st, key, nbytes = self.storage_of(t)
            if not key or not nbytes:
                continue
            old = self.live.get(key)
            if old is not None:
                if not self.untyped._expired(old):
                    continue          # a view, or an op writing in place: the same storage
                self.expire(key, old)  # freed unseen and its address given out again

            if not swept:
                self.sweep_recent()
                swept = True
            if self.emulate is not None:      # the record says what it is, as on a GPU
                self.record(st, key, nbytes, 0, 0, False, t)
                continue
            # forward outputs are mostly what backward keeps; the rows use
            # only their sum, the OOM's breakdown shows the split
            cat = CAT["act"] if s.phase in (1, 4) else CAT["transient"]
            layer = s.layer
            if func in self.cast_ops and t.dtype in self.half and args:
                owner = self.param_owner(args[0])
                if owner is not None:
                    cat, layer = CAT["param"], owner      # autocast's 16-bit copy of a weight
            if s.applier is not None:
                s.applier.check_output(t)
            dev = owners[i][0] if owners is not None else None
            if dev is None and s.load_homes:
                dev = s.load_homes.pop(key, None)      # torch.load's storage, where it was saved (_homes)
            if dev is None and s.phase in (PH_BACKWARD, PH_INIT) and s.applier is not None and \
                    s.applier.virtual and not s.applier.exec:
                # outside every module, in backward or between steps (a copy.deepcopy of the model,
                # a snapshot): made where its inputs are, as on two GPUs
                dev = self.input_device(args)
            if owners is not None and owners[i][1] is not None:
                layer = owners[i][1]      # the optimizer's temporary counts with its parameter's layer
            rc, b = self.record(st, key, nbytes, cat, layer, t.device.type == "cuda", t, dev)
            if rc == 1:
                d = None
                if s.applier is not None:
                    d = dev if dev is not None else s.applier.ledger_device(t)
                s.oom(b, "cap", "", stage=d)
                cap = int(s.cfg.get("capacity", 0))
                where = ""
                if s.applier is not None:
                    cap = int(s.applier.stages[d].get("capacity") or 0)
                    where = " of stage %d (%s), less the device's reserve," % (d, s.applier.devices[d])
                raise self.torch.cuda.OutOfMemoryError(
                    "CUDA out of memory (memsplit: the emulated capacity%s of %d bytes is reached). Tried to "
                    "allocate %d bytes in %s." % (where, cap, b, _func_name(func)))

    def input_device(self, args):
        """On virtual devices, the ledger device of an operator's first input
        that the ledger knows: backward runs where the forward's tensors are,
        as on two GPUs (a tied lm_head's, and the loss it feeds, on its
        weight's stage, whichever layer's backward the program is in). None
        when no input is known (then the layer's stage)."""
        for a in args:
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, self.torch.Tensor) and t.device.type == self.s.track_type:
                    _, key, _ = self.storage_of(t)
                    d = self.lib.owner_device(key) if key else None
                    if d is not None:
                        return d
        return None

    def optimizer_owners(self, args, n_out):
        """In the optimizer step a new tensor is made for one parameter: the
        input at the same position of a list argument (foreach ops), else
        the first input that is a tensor (zeros_like(param)). [(device,
        layer)] of that input per output: its layer, so that the rows know
        each layer's temporaries; its device on virtual devices, which share
        one physical device, so the tensor counts where the parameter does."""
        s = self.s
        ap = s.applier
        if s.phase != 3:
            return None
        src = optimizer_sources(self.torch, args, n_out)
        out = []
        for x in src:
            d = layer = None
            if isinstance(x, self.torch.Tensor):
                _, key, _ = self.storage_of(x)
                if key:
                    if ap is not None and ap.virtual:
                        d = self.lib.owner_device(key)
                    layer = self.source_layer(key)
            out.append((d, layer))
        return out if len(out) == n_out else None

    def source_layer(self, key):
        """The layer of a parameter's tensors, or of a temporary the step
        already made for one (sqrt(v) / c: the quotient is that layer's too)."""
        for name in ("param", "master", "grad", "optim", "transient"):
            layer = self.lib.owner(key, CAT[name])
            if layer is not None:
                return layer
        return None

    def param_owner(self, src):
        if not isinstance(src, self.torch.Tensor):
            return None
        _, key, _ = self.storage_of(src)
        for cat in (CAT["master"], CAT["param"]):
            layer = self.lib.owner(key, cat) if key else None
            if layer is not None:
                return layer
        return None


def _func_name(func):
    return getattr(func, "__name__", None) or str(func)


def start(torch, session):
    from torch.utils._python_dispatch import TorchDispatchMode

    tracker = Tracker(torch, session)

    detach = torch.ops.aten.detach.default

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is detach and args and not isinstance(args[0], torch.Tensor):
                # torch 1.13: a Python-number operand saved for backward (x * 0.5)
                # reaches the mode as a float when non-reentrant checkpointing
                # packs it; the op it stands for returns a 0-dim tensor
                return torch.tensor(args[0])
            ap = session.applier
            if ap is not None:
                ap.check_inputs(func, args, kwargs)
            n = tracker.op_begins()
            out = func(*args, **(kwargs or {}))
            with tracker.lock:
                tracker.seen(func, args, out, n, kwargs)
            return out

    mode = _Mode()
    mode.__enter__()          # for the whole program: never left
    tracker.mode = mode
    _every_thread(mode)
    return tracker


def _every_thread(mode):
    """The dispatch mode is per thread: every thread the program starts
    (threading) enters it too, so its allocations count as the main
    thread's do."""
    real = getattr(threading.Thread, "_bootstrap_inner", None)
    if real is None or getattr(real, "_memsplit", False):
        return

    def _bootstrap_inner(self, *a, **k):
        try:
            mode.__enter__()
        except Exception:
            pass
        return real(self, *a, **k)

    _bootstrap_inner._memsplit = True
    threading.Thread._bootstrap_inner = _bootstrap_inner
