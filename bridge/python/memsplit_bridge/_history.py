"""The GPU's tensor-level record without a Python call per operator
(docs/program-record.md, "Cheap on the GPU").

PyTorch's caching allocator can keep, in C++, every allocation and free it
makes (torch.cuda.memory._record_memory_history), each with the metadata
string its thread set last (_set_memory_metadata). At each transition the
bridge sets that string to the new interval's number and holds the
interval's `w` event back; at each drain (backward's end, the step's end, an
OOM, the program's end) it turns the allocator's trace into the ledger's
events, in order with the transitions it held: the stream the per-operator
trace sends, at the allocator's cost (about 1 us an allocation).

What the allocator cannot say, and what stands in:
- The metadata is per thread. An allocation whose thread has not been
  tagged since its interval began (a thread of the program's own) counts in
  the latest interval that an allocation before it was tagged with: the
  trace is in the allocator's order. Backward's thread is tagged by its
  marks, and by a hook on the tensor backward starts from.
- Categories: an allocation in a forward is an activation, anywhere else a
  transient; parameters, gradients and optimizer state are relabelled at
  the drains before them. Autocast's 16-bit copies of weights count with the
  activations of the unit that made them.
- In the optimizer phase a small dispatch mode (a Python call per optimizer
  operator, none in forward or backward) says which parameter each new
  tensor is made for, so the optimizer's temporaries count with their
  parameter's layer, as with the per-operator trace. It tags the thread
  with the operator's ordinal too ("interval.op"): the allocator gives an
  address out again after a free, so only the tag says which of the
  allocations at an address the operator made.

The source at the bottom is the allocator on a GPU; on the CPU the dispatch
tracker stands in for it (Emulated, for tests), so everything above the
source runs the same code on both.
"""
import threading
import time

from ._lib import CAT, PH_FORWARD, PH_INIT, PH_OPTIMIZER, PH_VALIDATION

_MAX_ENTRIES = 1 << 20      # the allocator's trace between two drains (a ring: more is lost, and said)
_KEPT = ("alloc", "free_completed")
# what the allocator need not keep at all (torch 2.11 has skip_actions): each free is also a
# free_requested, so the trace and the drain's snapshot halve; older torch keeps them all
_SKIPPED = ["free_requested", "segment_alloc", "segment_free", "segment_map", "segment_unmap", "snapshot"]


def available(torch):
    m = getattr(getattr(torch, "cuda", None), "memory", None)
    return m is not None and hasattr(m, "_record_memory_history") and hasattr(m, "_set_memory_metadata") and \
        hasattr(m, "_snapshot")


class Allocator:
    """The caching allocator of one GPU: its trace since the last take()."""

    def __init__(self, torch):
        self.torch, self.index = torch, 0
        self.m = torch.cuda.memory
        self.tag = self.m._set_memory_metadata
        self.started = False
        self.skip = True         # whether this torch takes skip_actions (until it refuses them)

    def start(self, index=None):
        if index is not None:
            self.index = index
        self.started = True
        kw = dict(context=None, stacks="python", max_entries=_MAX_ENTRIES, clear_history=True)
        if self.skip:
            try:
                self.m._record_memory_history("all", skip_actions=_SKIPPED, **kw)
                return
            except (TypeError, ValueError, RuntimeError):
                self.skip = False
        self.m._record_memory_history("all", **kw)

    def take(self):
        """[(action, address, bytes, tag, time in unix us)] in the
        allocator's order: 'alloc' and 'free' (a block back in the pool)."""
        if not self.started:
            return [], False       # the program never reached a training forward
        snap = self.m._snapshot()
        self.start()    # clears the trace: what comes next is the next take's
        traces = snap.get("device_traces") or []
        tr = traces[self.index] if self.index < len(traces) else []
        # (is an allocation, address, bytes, tag, time in unix us); a free is the block's return to
        # the pool (free_completed: after the streams that used it are done, as the counters do)
        rows = [(e["action"] == "alloc", e["addr"], e["size"], e.get("user_metadata") or "", e.get("time_us", 0))
                for e in tr if e["action"] in _KEPT]
        return rows, len(tr) >= _MAX_ENTRIES

    def stop(self):
        if not self.started:
            return
        self.started = False
        try:
            self.m._record_memory_history(None)
        except Exception:
            pass


class Emulated:
    """The CPU: the dispatch tracker reports each storage it sees made and
    freed, with the tag of the thread that made it, as the allocator's trace
    would."""

    def __init__(self):
        self.entries = []
        self.local = threading.local()
        self.lock = threading.Lock()

    def tag(self, text):
        self.local.tag = text

    def start(self, index=None):
        pass

    def stop(self):
        pass

    def alloc(self, addr, size):
        with self.lock:
            self.entries.append((True, addr, size, getattr(self.local, "tag", ""), time.time() * 1e6))

    def free(self, addr, size=0):
        with self.lock:
            self.entries.append((False, addr, size, getattr(self.local, "tag", ""), time.time() * 1e6))

    def take(self):
        with self.lock:
            out, self.entries = self.entries, []
        return out, False


class Record:
    def __init__(self, torch, session, source):
        self.torch, self.s, self.lib, self.source = torch, session, session.lib, source
        self.seq = 0                 # the last interval begun
        self.held = []               # [(seq, layer, phase, w fields)] not yet sent
        self.sent = (0, -1, PH_INIT)   # the interval the stream is in: seq, layer, phase
        self.opt_owner = {}          # (address, op ordinal) -> layer: the optimizer's new tensors
        self.op_n = 0                # the optimizer's operators since the last drain
        self.opt_key = {}            # address -> layer, of the tensors the optimizer made this step
        self.labels = []             # (interval, at its start, key, cat, layer, bytes): relabels held
        self.label_layer = {}        # key -> layer of those, for the optimizer's owners
        self.applied = {}            # key -> (cat, layer) the ledger has, until the key is allocated again
        self.mode = None             # the optimizer phase's dispatch mode, while entered
        self.overflow_said = False
        self.lock = threading.RLock()

    def start(self, index):
        self.source.start(index)

    def transition(self, layer, phase, fields):
        if phase != PH_OPTIMIZER and self.mode is not None:
            self.optimizer_ends()    # a closure's forward inside optimizer.step (Lightning): no mode there
        with self.lock:
            self.seq += 1
            self.held.append((self.seq, layer, phase, fields))
            self.source.tag(str(self.seq))

    def tag_here(self):
        """Tags the calling thread with the interval now (backward's thread,
        from a hook on the tensor backward starts from)."""
        self.source.tag(str(self.seq))

    def drain(self):
        """The trace since the last drain, and the transitions held, into
        the stream, in order."""
        with self.lock:
            rows, overflow = self.source.take()
            for r in rows:
                if r[0]:
                    self.applied.pop(r[1], None)     # a new storage there: its label is to be said again
            if overflow and not self.overflow_said:
                self.overflow_said = True
                self.lib.warn("record", "the allocator's trace held more than %d events between two of the "
                              "bridge's drains; the oldest were lost, so this profile's rows are not exact"
                              % _MAX_ENTRIES)
            # the allocator's clock is the wall clock; the stream's is msb_now_us
            offset = time.time() * 1e6 - self.lib.now_us()
            # each event's interval: its tag, or the latest interval an event before it was
            # tagged with (a thread not tagged since: the trace is in the allocator's order)
            seq = self.sent[0]
            cuts = []           # (index, interval) where the stream moves on
            for i, tag in enumerate([_tag_seq(r[3]) for r in rows]):
                if tag > seq:
                    seq = tag
                    cuts.append((i, tag))
            cuts.append((len(rows), None))
            start = 0
            for end, nxt in cuts:
                if end > start:
                    self.replay(rows[start:end], offset)
                if nxt is not None:
                    self.send_held(nxt)
                start = end
            self.send_held(self.seq)
            self.apply_labels(lambda seq, at_start: True)
            self.opt_owner, self.opt_key, self.label_layer, self.op_n = {}, {}, {}, 0

    def replay(self, rows, offset):
        """Rows of one interval (the stream's now) into the ledger."""
        _, layer, phase = self.sent
        cat = CAT["act"] if phase in (PH_FORWARD, PH_VALIDATION) else CAT["transient"]
        layers = [layer] * len(rows)
        if phase == PH_OPTIMIZER and self.opt_owner:
            for i, r in enumerate(rows):      # the optimizer's temporaries: their parameter's layer
                q = self.opt_owner.get((r[1], _tag_op(r[3]))) if r[0] else None
                if q is not None:
                    layers[i] = q
        self.lib.replay(bytes(97 if r[0] else 102 for r in rows), [r[1] for r in rows], [r[2] for r in rows],
                        [cat] * len(rows), layers, phase, [max(0.0, r[4] - offset) for r in rows])

    def send_held(self, upto):
        """Sends the held transitions up to interval `upto`, each with the
        relabels made before it and, after it, those made as it began; the
        stream's interval after them."""
        while self.held and self.held[0][0] <= upto:
            seq, layer, phase, fields = self.held.pop(0)
            self.apply_labels(lambda at, at_start: at < seq)       # made before this transition
            for name, v in fields.items():
                if isinstance(v, OwnerOf):      # the ledger has what came before it now
                    fields[name] = v.ask(self.lib)
            self.s.send("w", **fields)
            self.sent = (seq, layer, phase)
            self.apply_labels(lambda at, at_start: at <= seq and at_start)   # made as it began
        return self.sent

    def apply_labels(self, due):
        """The held relabels that are due (due(interval, at its start)),
        in the order they were made, now that the ledger has what came
        before them: relabelled, or registered when made before the record
        began."""
        n = 0
        while n < len(self.labels) and due(self.labels[n][0], self.labels[n][1]):
            n += 1
        if n == 0:
            return
        run, fresh = Run(self.lib), set()
        for _, _, key, cat, layer, nbytes in self.labels[:n]:
            if self.applied.get(key) == (cat, layer):
                continue              # optimizer state, step after step: the ledger has it so
            if key in fresh or self.lib.owner_device(key) is not None:
                run.add(b"r", key, 0, cat, layer)
            else:
                run.add(b"a", key, nbytes, cat, layer)
                fresh.add(key)
            self.applied[key] = (cat, layer)
        run.flush(self.s.phase)
        del self.labels[:n]

    def label(self, key, cat, layer, nbytes, at_start=False):
        """key's storage is of category cat in layer, said where it was in
        the interval running: at its start (a gradient, just after
        backward's end) or after what it has done so far. Said to the ledger
        at the drain, in place among the allocations."""
        self.labels.append((self.seq, at_start, key, cat, layer, nbytes))
        self.label_layer[key] = layer
        self.opt_key.pop(key, None)     # the label is newer than what an operator made there

    # ---- the optimizer phase -------------------------------------------
    def optimizer_begins(self):
        """The optimizer phase's own dispatch mode (on the GPU; on the CPU
        the tracker, which sees every operator, calls optimizer_op)."""
        if self.mode is not None or isinstance(self.source, Emulated):
            return
        from torch.utils._python_dispatch import TorchDispatchMode
        record = self

        class _OptimizerMode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                n = record.op_begins()
                out = func(*args, **(kwargs or {}))
                if record.s.phase == PH_OPTIMIZER:
                    record.optimizer_op(args, out, n, kwargs)
                return out

        self.mode = _OptimizerMode()
        self.mode.__enter__()

    def optimizer_ends(self):
        mode, self.mode = self.mode, None
        if mode is not None:
            try:
                mode.__exit__(None, None, None)
            except Exception:
                pass

    def op_begins(self):
        """An operator of the optimizer phase is about to run: the thread is
        tagged with its ordinal, which its allocations carry. Returns it."""
        with self.lock:
            self.op_n += 1
            n = self.op_n
            self.source.tag("%d.%d" % (self.seq, n))
        return n

    def optimizer_op(self, args, out, n, kwargs=None):
        """Operator n of the optimizer phase made `out`: each new tensor is
        for the parameter of the input at its position in a list argument
        (foreach), else of the first tensor input (zeros_like(param)); a new
        tensor with no such input is nobody's (the program's own, made
        between its micro-batches' backward and forward)."""
        torch = self.torch
        outs = out if isinstance(out, (tuple, list)) else (out,)
        src = optimizer_sources(torch, args, len(outs))
        if len(src) != len(outs):
            src = [None] * len(outs)
        ins = set()
        for a in list(args) + list((kwargs or {}).values()):
            for x in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(x, torch.Tensor):
                    ins.add(_addr(x))
        for t, x in zip(outs, src):
            if not isinstance(t, torch.Tensor):
                continue
            addr = _addr(t)
            if not addr or addr in ins:
                continue          # in place, or a view of an input: no new storage
            # a new storage at this address: what was there before is gone, whatever it was
            layer = self.layer_of(_addr(x)) if isinstance(x, torch.Tensor) else None
            self.opt_key[addr] = layer
            if layer is not None:
                self.opt_owner[(addr, n)] = layer

    def layer_of(self, addr):
        if not addr:
            return None
        if addr in self.opt_key:
            return self.opt_key[addr]      # a tensor this step made: for a parameter (sqrt(v) / c), or not
        if addr in self.label_layer:
            return self.label_layer[addr]  # a gradient labelled at backward's end
        for name in ("param", "master", "grad", "optim"):
            layer = self.lib.owner(addr, CAT[name])
            if layer is not None:
                return layer
        return None

    def stop(self):
        self.optimizer_ends()
        self.source.stop()


class OwnerOf:
    """A transition's field that the ledger answers when the transition is
    sent: the layer of storage `key` in category `cat`, -1 when none."""

    def __init__(self, key, cat):
        self.key, self.cat = key, cat

    def ask(self, lib):
        layer = lib.owner(self.key, self.cat) if self.key else None
        return -1 if layer is None else layer


class Run:
    """Ledger events sent together by one msb_replay (a run of one interval
    of the allocator's trace, a step's relabels, on a plan's stages too):
    ops 'a', 'f', 'r'."""

    def __init__(self, lib):
        self.lib = lib
        self.now = lib.now_us()       # the time of events that bring none (relabels)
        self.clear()

    def clear(self):
        self.ops, self.keys, self.sizes, self.cats, self.layers, self.times = bytearray(), [], [], [], [], []
        self.devs, self.any_dev = [], False

    def add(self, op, addr, size, cat, layer, t=None, dev=0):
        self.ops += op
        self.keys.append(addr)
        self.sizes.append(size)
        self.cats.append(cat)
        self.layers.append(layer)
        self.times.append(self.now if t is None else max(0.0, t))
        self.devs.append(dev)
        self.any_dev = self.any_dev or dev != 0

    def flush(self, phase):
        if self.ops:
            self.lib.replay(bytes(self.ops), self.keys, self.sizes, self.cats, self.layers, phase, self.times,
                            self.devs if self.any_dev else None)
            self.clear()


class Direct:
    """A Run's interface, each event at once through msb_alloc / msb_free /
    msb_relabel: a relabel made alone, outside a step's run."""

    def __init__(self, lib):
        self.lib = lib

    def add(self, op, addr, size, cat, layer, t=None, dev=0):
        if op == b"a":
            self.lib.alloc(dev, addr, size, cat, layer)
        elif op == b"f":
            self.lib.free(addr)
        else:
            self.lib.relabel(addr, cat, layer)


def _tag_seq(tag):
    """The interval of an allocation's tag ("interval" or "interval.op"); 0 when untagged."""
    head = tag.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def _tag_op(tag):
    """The optimizer operator's ordinal in an allocation's tag; 0 when it has none."""
    tail = tag.rpartition(".")[2] if "." in tag else ""
    return int(tail) if tail.isdigit() else 0


def optimizer_sources(torch, args, n_out):
    """In the optimizer step a new tensor is made for one parameter: for
    each of an operator's n_out outputs, the input at its position in a list
    argument of that length (foreach ops), else the first tensor input
    (zeros_like(param)); shorter than n_out when there is none."""
    lists = [a for a in args if isinstance(a, (list, tuple)) and len(a) == n_out]
    return list(lists[0]) if lists else [a for a in args if isinstance(a, torch.Tensor)][:1] * n_out


def _addr(t):
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return st.data_ptr()
    except Exception:
        return 0
