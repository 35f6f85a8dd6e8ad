"""Tensor tracking through the dispatcher (docs/bridge.md, "Tensor tracking").

A TorchDispatchMode sees every operator's outputs; a storage not seen
before is an allocation, reported to the C ledger with the layer the
program is in. Frees are found through C++ weak references to the storages,
checked before each allocation (all of them on the CPU, so the order of
frees and allocations, and every peak, is exact; the newest on a GPU, where
the caching allocator's own counters give the exact totals, and all of them
at every layer transition). A refusal by the ledger's cap becomes
torch.cuda.OutOfMemoryError raised from the operator that crossed it.

What an operator takes and gives back inside itself (cuDNN's workspace of
an LSTM or a convolution) is no output: on a GPU the caching allocator's
peak during the operator, less its count after, says it, and the ledger
counts it as a transient of the operator's stage and layer (Workspace).
"""
import os
import threading

from ._history import optimizer_sources
from ._lib import CAT, PH_BACKWARD, PH_INIT

_GPU_RECENT = 64     # storages checked at each allocation on a GPU
# the ledger key of an operator's workspace: allocated and freed at once, never a storage's
# address (address 1 is in the page no process maps)
_WORKSPACE_KEY = 1


class Workspace:
    """The bytes an operator took from the GPU's caching allocator and gave
    back before it returned: the allocator's peak since begin() (which
    resets it) less its count at end(). Reading it resets the peaks the
    session reads at each transition (Session.stats), so end() keeps the
    highest seen since the last transition (interval()) and the program's
    own view of its peaks (Session.peaks) up to date. One GPU: the
    session's root device, where the tracker's stages are (virtual
    devices, the record pass). Two C calls an operator. Not counted:
    what is made and freed between two operators outside the dispatcher
    (none of torch's operators), and, while another thread of the
    program runs an operator on the same GPU at the same moment, which of
    the two took it."""

    def __init__(self, session):
        self.s = session
        self.stats, self.reset = session.real["nested_stats"], session.real["reset_peaks"]
        self.peak = self.rpeak = 0

    def begin(self, func):
        self.reset(self.s.dev_index)

    def end(self, func):
        st = self.stats(self.s.dev_index)
        a, r = st.get("allocated_bytes", {}).get("all", {}), st.get("reserved_bytes", {}).get("all", {})
        peak, rpeak = a.get("peak", 0), r.get("peak", 0)
        self.peak, self.rpeak = max(self.peak, peak), max(self.rpeak, rpeak)
        p = self.s.peaks
        p[0], p[1] = max(p[0], peak), max(p[1], rpeak)
        return max(0, peak - a.get("current", 0))

    def interval(self):
        """The highest peaks since the last call: (allocated, reserved)."""
        out = self.peak, self.rpeak
        self.peak = self.rpeak = 0
        return out


class TestWorkspace:
    """A stand-in for Workspace where there is no allocator to read (the
    CPU): MEMSPLIT_BRIDGE_TEST_WORKSPACE="OP=BYTES[,OP=BYTES]" says that
    each call of operator OP (its overload's name, aten's mm.default: "mm")
    took BYTES inside itself. Everything from the ledger on runs as on a
    GPU."""

    def __init__(self, spec):
        self.bytes = {}
        for item in spec.split(","):
            name, _, n = item.partition("=")
            if n.strip().isdigit():      # a test's variable: what does not parse counts nothing
                self.bytes[name.strip()] = int(n)

    def begin(self, func):
        pass

    def end(self, func):
        name = getattr(func, "__name__", "").split(".")[0]
        return self.bytes.get(name, 0)

    def interval(self):
        return 0, 0


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
        # what an operator takes and gives back inside itself (Workspace): on a GPU, once the
        # session knows its device; on the CPU only the tests' stand-in (TestWorkspace)
        self.workspace = None
        spec = os.environ.get("MEMSPLIT_BRIDGE_TEST_WORKSPACE")
        self.test_workspace = TestWorkspace(spec) if spec else None

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

    def workspace_begins(self, func):
        """Before an operator: the counter that will say what it takes
        inside itself, or None (not counted: no GPU yet, a CPU program,
        the allocator's record, another process)."""
        s = self.s
        if not s.on or os.getpid() != self.pid:
            return None
        w = self.test_workspace
        if w is None and s.cuda and self.emulate is None:
            if self.workspace is None:
                self.workspace = Workspace(s)
            w = self.workspace
        if w is not None:
            w.begin(func)
        return w

    def interval_peaks(self):
        """The allocator's highest peaks since the last transition that
        the operators' counting reset: (allocated, reserved), 0s without."""
        return self.workspace.interval() if self.workspace is not None else (0, 0)

    def seen(self, func, args, out, n=None, kwargs=None, w=None):
        s = self.s
        if not s.on or os.getpid() != self.pid:
            return
        inside = w.end(func) if w is not None else 0
        self.outputs(func, args, out, n, kwargs)
        if inside:
            self.took_inside(func, args, inside)

    def took_inside(self, func, args, nbytes):
        """An operator took nbytes and gave them back before it returned:
        allocated and freed at once, after its outputs, as a transient of
        its layer on the stage it ran on (where its inputs are on virtual
        devices, as on two GPUs): the ledger's peak is then the allocator's
        during the operator, and a cap refuses it as a GPU would."""
        if self.emulate is not None:     # as the GPU's allocator reports a workspace: made and freed
            self.emulate.alloc(_WORKSPACE_KEY, nbytes)
            self.emulate.free(_WORKSPACE_KEY, nbytes)
            return
        s = self.s
        ap = s.applier
        dev, layer = 0, s.layer
        if s.phase == 3:       # the optimizer's: with the parameter it works on, as its outputs are
            layer = next((x for x in (self.source_layer(k) for k in self.input_keys(args)) if x is not None),
                         layer)
        if ap is not None:
            # outside every placed module on virtual devices (backward, the optimizer, between
            # steps), where its inputs are, as on two GPUs; inside one, that module's stage
            dev = self.input_device(args) if ap.virtual and not ap.exec else None
            if dev is None:
                dev = ap.stage_now()
        rc = self.lib.alloc(dev, _WORKSPACE_KEY, nbytes, CAT["transient"], layer)
        if rc == 0:
            self.lib.free(_WORKSPACE_KEY)
        elif rc == 1:
            self.refused(func, nbytes, dev if ap is not None else None)

    def outputs(self, func, args, out, n, kwargs):
        s = self.s
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
            if s.load_stage is not None:
                dev = s.load_stage      # made by torch.load's restore: where that storage was saved from
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
                self.refused(func, b, d)

    def refused(self, func, b, d):
        """The ledger's cap refused b bytes on stage d (None: no plan): the
        OOM as the program would meet it on a GPU of that size."""
        s = self.s
        s.oom(b, "cap", "", stage=d)
        cap = int(s.cfg.get("capacity", 0))
        where = ""
        if s.applier is not None:
            cap = int(s.applier.stages[d].get("capacity") or 0)
            where = " of stage %d (%s), less the device's reserve," % (d, s.applier.devices[d])
        raise self.torch.cuda.OutOfMemoryError(
            "CUDA out of memory (memsplit: the emulated capacity%s of %d bytes is reached). Tried to "
            "allocate %d bytes in %s." % (where, cap, b, _func_name(func)))

    def input_keys(self, args):
        """The storage keys of an operator's tensor inputs on the tracked
        device, in order (a list argument's in its order)."""
        for a in args:
            for t in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(t, self.torch.Tensor) and t.device.type == self.s.track_type:
                    _, key, _ = self.storage_of(t)
                    if key:
                        yield key

    def input_device(self, args):
        """On virtual devices, the ledger device of an operator's first input
        that the ledger knows: backward runs where the forward's tensors are,
        as on two GPUs (a tied lm_head's, and the loss it feeds, on its
        weight's stage, whichever layer's backward the program is in). None
        when no input is known (then the layer's stage)."""
        for key in self.input_keys(args):
            d = self.lib.owner_device(key)
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
            w = tracker.workspace_begins(func)
            out = func(*args, **(kwargs or {}))
            with tracker.lock:
                tracker.seen(func, args, out, n, kwargs, w)
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
