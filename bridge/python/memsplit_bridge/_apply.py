"""The applier: a plan's stages placed on their devices in the user's own
program, unchanged (docs/bridge.md, "Applying a plan").

Placement is per parameter: a parameter goes to the device of the stage
that owns it (its first owner's layer), so a weight tied across stages
stays in one place and the module that borrows it runs where it lives.
Every module of a stage whose caller is elsewhere has its forward wrapped
so that its tensor inputs (positional and keyword) follow it and its
outputs go back to its caller's stage, unless the plan hands them on (the
record pass saw the caller only pass them to the next module:
docs/program-record.md, "Handed on"); the root's outputs come back to the
root device. Placement is applied at the first
training forward and again after every move the framework makes
(Module._apply: Lightning's fit, teardown and test), and optimizer state
moves with its parameters.

One crossing path serves real and virtual devices (several stages on one
physical device, for testing). A tensor's stage is the stage alone on its
device, or on a shared device the one the ledger counts it on; a tensor
that must go to another stage crosses through one autograd Function whose
backward brings the gradient back the same way. The crossing runs on the
destination stage, inside the `moving` guard, so the device checks never
see memsplit's own copies. Only the primitive at the bottom differs: a
clone (the copy then counts on the destination in the ledger) where both
stages share a device, `.to(device)` where they do not. A module of one
stage that computes with another stage's tensor without that crossing is
refused, with the same message on both: on a shared device the ledger sees
it (check_inputs), on distinct devices torch's own device check does and
the stage's wrapper names the module (refuse_mismatch).
"""
import functools
import types
import weakref

from ._lib import PH_BACKWARD, PH_FORWARD, PH_VALIDATION
from ._session import _tensors


class PlanRefused(Exception):
    pass


class Applier:
    def __init__(self, torch, session, plan):
        self.torch, self.s, self.plan = torch, session, plan
        self.stages = plan["stages"]                       # [{"device", "first", "last"}]
        # a plan may name virtual devices cuda:0/v0, cuda:0/v1: the physical device is before the slash
        self.devices = [torch.device(st["device"].split("/")[0]) for st in self.stages]
        self.stage_of_layer = {}
        for i, st in enumerate(self.stages):
            for l in range(st["first"], st["last"] + 1):
                self.stage_of_layer[l] = i
        # physical device -> the stages on it (several: virtual devices)
        self.by_device = {}
        for i, d in enumerate(self.devices):
            self.by_device.setdefault(str(d), []).append(i)
        self.virtual = any(len(v) > 1 for v in self.by_device.values())
        self.root_device = self.devices[0]
        # the device the program put its model on (the session says it before the placement):
        # a tensor it keeps elsewhere (a CPU tensor of a GPU program) stays where it is
        self.program_device = None
        self.param_stage = {}                              # id(param) -> stage
        self.exec = []                                     # stages of wrapped modules running now
        self.pre_depth = []                                # exec's depth where a unit's pre-hooks began
        self.attr_found = {}       # id(unit) -> {(id(module), name): (module, name)}: tensors it keeps on itself
        self.attr_scans = {}       # id(unit) -> its calls whose modules were searched for them
        self.attr_last = {}        # (id(module), name) -> a weak reference to the tensor followed last
        self.attr_units = {}       # id(module) -> (a weak reference to it, ids of the units it is in)
        self.called_from = {}                              # id of a wrapped module -> its caller_of in forward
        # the same frames' layers: where the record pass (every layer a stage of its own) would be
        # computing; a boundary it crosses and this placement does not gets a pass-through node
        self.lexec = []
        self.opened_frames = set()                         # indices in exec of opened Sequentials' frames
        self.flow_children = set()                         # ids of those Sequentials' children
        self.wrapped = set()
        self.placed = False
        _watch_setattr(torch, self)
        self.moving = 0
        self._cross = None                                 # the autograd Function of a crossing
        self._pass = None                                  # ... and of a crossing within one stage
        import os
        # tests only: leave out the boundary copy on a shared device, to see the ledger catch it
        self.skip_copy = os.environ.get("MEMSPLIT_BRIDGE_TEST_SKIP_COPY") == "1"
        # tests only: every crossing as a line (phase, from, to, how, shape), so that a run on
        # real devices and one on virtual devices can be compared crossing by crossing
        self.crossing_log = os.environ.get("MEMSPLIT_BRIDGE_TEST_CROSSINGS") or None
        # tests only: the real devices' primitive (.to, with copy=True) on a shared device too
        self.force_to = os.environ.get("MEMSPLIT_BRIDGE_TEST_PRIMITIVE") == "to"
        # the record pass (docs/program-record.md): every layer a stage of its own on one
        # device, and each crossing's copy said with the storage it copied, so that a
        # placement where the two share a stage can leave the copy out of its replay
        self.record = bool(plan.get("record"))
        # the record pass: modules whose outputs it copies back to their caller's stage, each
        # with an index (event `ho`), those a copy of which something other than one crossing
        # read (event `nh`), and the live copies (storage key -> [index, crossings that read
        # it, requires grad]); the record leaves the copies of the others out (hand-on)
        self.hop_id = {}
        self.hop_read = set()
        self.watch = {}
        # a rerun: the modules whose outputs the record says only cross on to another module,
        # handed on where they are made (docs/program-record.md, "Handed on")
        self.handed_on = frozenset(plan.get("handed_on") or ())
        self.hand_on_ids = set()
        self.handed_out = weakref.WeakValueDictionary()    # id: a handed-on output, on its maker's stage

    # ---- where things are --------------------------------------------------
    def stage_now(self):
        """The stage whose device the program is computing on now: the
        innermost placed module running; outside them, in forward, the root
        device (the program's own code between modules runs there); in
        backward, the stage of the layer whose backward runs."""
        if self.exec:
            return self.exec[-1]
        if self.s.phase == PH_BACKWARD:
            return self.stage_of_layer.get(self.s.layer, 0)
        return 0

    def layer_now(self):
        """stage_now() as the record pass has it, each layer a stage of its own."""
        if self.lexec:
            return self.lexec[-1]
        if self.s.phase == PH_BACKWARD and self.s.layer in self.stage_of_layer:
            return self.s.layer
        return 0

    def caller_of(self, m):
        """(stage, layer) where the code that calls m computes: stage_now()
        and layer_now(), as a forward leaves them for m's next call. A forward
        the program runs again in backward (activation checkpointing, called
        by autograd's engine and no placed module) is m's caller's as the
        forward had it: the recompute's outputs go where the forward's went,
        so that the gradients a checkpoint hands them, and the tensors it
        saved, are on their device."""
        if self.s.in_backward:
            if not self.exec:
                return self.called_from.get(id(m)) or (self.stage_now(), self.layer_now())
            return self.stage_now(), self.layer_now()
        here = self.called_from[id(m)] = (self.stage_now(), self.layer_now())
        return here

    def ledger_device(self, t):
        """The ledger device (a stage) an allocation of tensor t belongs to."""
        st = self.by_device.get(str(self.device_of(t)))
        if st and len(st) == 1:
            return st[0]
        return self.stage_now()

    @staticmethod
    def device_of(t):
        """The physical device of tensor t (a unit test gives tensors other
        devices here, to run the distinct-device logic on one CPU)."""
        return t.device

    def holder(self, t):
        """The stage that holds tensor t: the stage alone on t's device, or,
        on a device that several stages share, the one the ledger counts t
        on. None for a tensor on no stage's device, or one the ledger does
        not know (a tensor that is no stage's yet)."""
        stages = self.by_device.get(str(self.device_of(t)))
        if not stages:
            return None
        if len(stages) == 1:
            return stages[0]
        key, _ = self.s.storage_key(t)
        return self.s.lib.owner_device(key) if key else None

    # ---- placement ----------------------------------------------------------
    def place(self, root):
        """Moves every parameter and buffer to its stage's device."""
        torch = self.torch
        s = self.s
        layer_of_module = {}
        for path, m in root.named_modules():
            b = s.block_of.get(id(m))
            if b is not None:
                layer_of_module[id(m)] = b + 1
        self.param_stage = {}
        for name in s.members_all(0):
            for m in root.get_submodule(name).modules():
                layer_of_module.setdefault(id(m), 0)
        for name in s.members_all(1):
            for m in root.get_submodule(name).modules():
                layer_of_module.setdefault(id(m), s.n_blocks + 1)
        self.module_stage = {}
        self.module_layer = {}
        with torch.no_grad():
            self.moving += 1
            try:
                for path, m in root.named_modules():
                    layer = layer_of_module.get(id(m))
                    st = self.stage_of_layer.get(layer, 0) if layer is not None else 0
                    self.module_stage[id(m)] = st if layer is not None else None
                    self.module_layer[id(m)] = layer
                    dev = self.devices[st]
                    for pname, p in m._parameters.items():
                        if p is None:
                            continue
                        if id(p) not in self.param_stage:        # the first owner decides
                            self.param_stage[id(p)] = st if layer is not None else 0
                            s.param_layer[id(p)] = layer if layer is not None else 0
                        pst = self.param_stage[id(p)]
                        pdev = self.devices[pst]
                        if p.device != pdev:
                            p.data = p.data.to(pdev)
                            if p.grad is not None:
                                p.grad = p.grad.to(pdev)
                        self.rehome(p, pst)
                        if p.grad is not None:
                            self.rehome(p.grad, pst)
                    for bname, b in m._buffers.items():
                        if b is None or layer is None:
                            continue
                        if b.device != dev:
                            m._buffers[bname] = b = b.to(dev)
                        self.rehome(b, st)
            finally:
                self.moving -= 1
        self.move_optimizer_state()
        if any(d.type == "cuda" for d in self.devices) and torch.cuda.is_available():
            # what moved off a GPU goes back to the device, not into the caching
            # allocator's cache: a library that allocates outside the cache
            # (cublasCreate for the backward thread) must find it free, as on a
            # GPU the model never filled
            torch.cuda.empty_cache()
        self.wrap_boundaries(root)
        # each stage that shares its physical device is held to its own
        # size, from now on: before the split the model is one device's
        for dev, idx in self.by_device.items():
            for i in idx:
                self.s.lib.c.msb_reset_peak(i)       # what came before the split was one device's
                cap = int(self.stages[i].get("capacity") or 0)
                if cap and (len(idx) > 1 or dev.startswith("cpu")):
                    self.s.lib.c.msb_set_capacity(i, cap)
        self.placed = True
        if self.record:
            self.s.send("placed")        # the record's peaks count from here, as the rerun's do

    def rehome(self, t, st):
        """On virtual devices a tensor placed on a stage stays where it is
        physically: only the ledger learns which stage it now counts on."""
        if self.virtual:
            key, nbytes = self.s.storage_key(t)
            if key and nbytes:
                self.s.lib.c.msb_move(key, st)

    def move_optimizer_state(self):
        self.moving += 1
        try:
            for opt in self.s.optimizers:
                for p, st in opt.state.items():
                    for k, v in list(st.items()):
                        if isinstance(v, self.torch.Tensor) and v.device != p.device and v.dim() > 0:
                            st[k] = v = v.to(p.device)
                        if isinstance(v, self.torch.Tensor) and id(p) in self.param_stage:
                            self.rehome(v, self.param_stage[id(p)])
        finally:
            self.moving -= 1

    def exec_stage_of(self, m):
        """A module runs where its own parameters are (a tied weight's home),
        else on its layer's stage."""
        for p in m._parameters.values():
            if p is not None and id(p) in self.param_stage:
                return self.param_stage[id(p)]
        return self.module_stage.get(id(m))

    def exec_layer_of(self, m):
        """exec_stage_of at the record pass's grain: the layer whose stage m runs on there."""
        for p in m._parameters.values():
            if p is not None and id(p) in self.param_stage:
                return self.s.param_layer.get(id(p), 0)
        return self.module_layer.get(id(m))

    def wrap_boundaries(self, root):
        torch = self.torch
        self.find_handed_on()
        containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
        parent_of = {}
        for path, m in root.named_modules():
            for _, c in m.named_children():
                parent_of.setdefault(id(c), m)
        for path, m in root.named_modules():
            st = self.exec_stage_of(m)
            if st is None and m is not root and id(m) not in self.s.roots and id(m) in self.s.list_ancestors \
                    and id(m) not in self.wrapped \
                    and isinstance(m, torch.nn.Sequential) and type(m).forward is torch.nn.Sequential.forward:
                self.wrap_opened(m)
            if st is None or id(m) in self.wrapped or isinstance(m, containers):
                continue
            parent = parent_of.get(id(m))
            pst = self.exec_stage_of(parent) if parent is not None else None
            # where the record pass wraps (another layer than its parent's) this placement does too,
            # so that its boundaries are the record's (a pass-through where the stage is the same)
            lyr = self.exec_layer_of(m)
            plyr = self.exec_layer_of(parent) if parent is not None else None
            if parent is None or pst != st or plyr != lyr or isinstance(parent, containers):
                self.wrap(m, st, lyr)
        for model in self.s.models or [root]:    # each model's outputs come back to the root device
            if id(model) not in self.wrapped:
                self.wrap_root(model)

    def wrap(self, m, st, lyr=None, fwd=None, loaded=False):
        """The module's inputs follow it to its stage, and its outputs go back
        to where its caller computes, so that the caller's own code (residual
        adds between blocks, loops over them) never mixes devices; those of a
        module the plan hands on stay (hand_on_here). lyr: its
        layer, the stage the record pass runs it on (default: the stage's first).
        fwd: a deep copy's own forward (_Placed), for the copy being made
        (loaded: a copy torch.load made, _homes)."""
        fresh = fwd is None
        mref, func, fwd = _weakly(m, m.forward if fresh else fwd)
        ap = self
        if lyr is None:
            lyr = self.stages[st]["first"]

        def forward(*args, **kwargs):
            m = mref()
            caller, caller_l = ap.caller_of(m)
            args, kwargs = ap.follow((args, kwargs), st, lyr, at=caller)
            ap.exec.append(st)
            ap.lexec.append(lyr)
            try:
                out = func(m, *args, **kwargs) if fwd is None else fwd(*args, **kwargs)
            except RuntimeError as exc:
                ap.refuse_mismatch(exc, m, st)
                raise
            finally:
                ap.exec.pop()
                ap.lexec.pop()
            ap.follow_attrs(m, caller, caller_l, lyr)
            if ap.hands_on(m, st, lyr) or (caller == st and caller_l == lyr):
                return out
            if ap.hand_on_here(m):
                return ap.handed(out)
            return ap.follow(out, caller, caller_l, lyr, hop=ap.hop_of(m))

        placed = _Placed(forward, mref, func, fwd, lambda m2, f2, loaded=False: self.wrap(m2, st, lyr, f2, loaded))
        self.wrapped.add(id(m))
        if not fresh:
            if loaded and m._forward_pre_hooks:
                self.stage_pre_hooks(m, st, lyr)      # a load's copy has the program's pre-hooks only
            return placed         # a deep copy's: its pre-hooks (the original's, copied) are in place
        m.forward = placed
        if m._forward_pre_hooks:
            self.stage_pre_hooks(m, st, lyr)
        return placed

    def follow_attrs(self, m, dst, dst_l, lyr):
        """Tensors unit m's modules keep on themselves in its forward (a
        mixture of experts' auxiliary loss, which the program adds to its
        own): m's outputs too, so they go back to the caller's stage as its
        outputs do, and the program's code that reads them runs where it
        would on two GPUs. Only tensors autograd follows (a loss term; a
        detached copy kept for a look later is left where it is), and none
        of a module with forward pre-hooks (the old weight_norm's hook
        keeps the weight its forward reads as such an attribute). m's
        modules are searched at its first _ATTR_SCANS calls (an attribute
        set past nn.Module's __setattr__, into __dict__); a tensor set on
        one of them later through nn.Module's __setattr__ (a loss term kept
        only in training, first made after validation batches: Lightning's
        sanity check) is noted as it is set (note_attr)."""
        torch = self.torch
        found = self.attr_found.setdefault(id(m), {})
        n = self.attr_scans.get(id(m), 0)
        if n < _ATTR_SCANS:
            self.attr_scans[id(m)] = n + 1
            for sub in m.modules():
                if sub._forward_pre_hooks:
                    continue
                if n == 0:
                    units = self.attr_units.get(id(sub))
                    if units is None or units[0]() is not sub:
                        units = self.attr_units[id(sub)] = (weakref.ref(sub), [])
                    units[1].append(id(m))
                for name, v in vars(sub).items():
                    if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter):
                        found.setdefault((id(sub), name), (sub, name))
        for key, (sub, name) in found.items():
            v = sub.__dict__.get(name)
            last = self.attr_last.get(key)
            if not isinstance(v, torch.Tensor) or not v.requires_grad or (last is not None and last() is v):
                continue          # none now, none autograd follows, or the one followed before
            w = self.follow(v, dst, dst_l, lyr)
            if w is not v:
                object.__setattr__(sub, name, w)
            self.attr_last[key] = weakref.ref(w)

    def note_attr(self, sub, name):
        """A tensor set on module sub as an attribute (_watch_setattr): a
        tensor kept on itself by each unit sub is in, followed from that
        unit's next call on (follow_attrs)."""
        units = self.attr_units.get(id(sub))
        if units is None or units[0]() is not sub:
            return
        for unit in units[1]:
            self.attr_found.setdefault(unit, {}).setdefault((id(sub), name), (sub, name))

    def unwind(self, depth):
        """The stage stacks back to depth when a model's call ends: a unit's
        pre-hook that raised (its forward and the hook after never ran)
        leaves them deeper, if the program caught it and went on."""
        del self.exec[depth:]
        del self.lexec[depth:]
        while self.pre_depth and self.pre_depth[-1] >= depth:
            self.pre_depth.pop()

    def stage_pre_hooks(self, m, st, lyr):
        """m's own forward pre-hooks run in its call before its forward (the
        old weight_norm's: the weight from its parameters, each call): on
        m's stage, as on m's device they would, by a hook put before them
        and one after (torch 1.13 has no prepend: the first by hand)."""
        ap = self

        def enter(_m, _inputs):
            ap.pre_depth.append(len(ap.exec))
            ap.exec.append(st)
            ap.lexec.append(lyr)

        def leave(_m, _inputs):
            d = ap.pre_depth.pop() if ap.pre_depth else len(ap.exec) - 1
            del ap.exec[d:]
            del ap.lexec[d:]

        first = m.register_forward_pre_hook(enter)
        m._forward_pre_hooks.move_to_end(first.id, last=False)
        m.register_forward_pre_hook(leave)

    def find_handed_on(self):
        """The modules of the plan's handed_on, by their paths in the program."""
        self.hand_on_ids = {mid for mid, path in self.s.path_of.items() if path in self.handed_on}

    def hand_on_here(self, m):
        """m's outputs stay where m made them (a rerun, the training
        forward of a module the record says only hands them on): in a
        validation forward, a recompute in backward, and every module the
        record saw read otherwise, they go back to the caller's stage."""
        return id(m) in self.hand_on_ids and self.s.phase == PH_FORWARD and not self.s.in_backward

    def handed(self, out):
        """m's outputs, handed on: each that autograd follows through the
        node the record pass had where it copied them back (a pass-through
        here), so that the backward graph keeps the record's shape."""
        torch = self.torch

        def mark(t):
            if isinstance(t, torch.Tensor):
                if t.requires_grad and torch.is_grad_enabled():
                    t = self.pass_through(t)
                self.handed_out[id(t)] = t
            return t
        return _map(torch, out, mark)

    def hop_of(self, m):
        """The record pass: m's index for the copies of its outputs back to
        the caller (event `ho` the first time), None where they are no
        training forward's. A forward run again in backward (activation
        checkpointing) goes back where the forward's went: such a module is
        never handed on."""
        if not self.record:
            return None
        i = self.hop_id.get(id(m))
        if i is None:
            path = self.s.path_of.get(id(m))
            if path is None or len(self.hop_id) >= _MAX_HANDED_ON:
                return None
            i = self.hop_id[id(m)] = len(self.hop_id)
            self.s.send("ho", id=i, module=path)
        if self.s.in_backward:
            self.hop_seen_read(i)
            return None
        return i if self.s.phase == PH_FORWARD else None

    def hop_seen_read(self, i):
        if i not in self.hop_read:
            self.hop_read.add(i)
            self.s.send("nh", id=i)

    def watch_reads(self, args, kwargs):
        """The record pass, every operator: an input that is a copy of a
        module's outputs back to its caller, read by anything but one
        crossing (a second one of a tensor autograd follows would sum its
        gradients on the caller's stage), keeps that module from handing on."""
        for t in _tensors(self.torch, (args, kwargs)):
            key, _ = self.s.storage_key(t)
            w = self.watch.get(key)
            if w is None:
                continue
            if self.moving:
                w[1] += 1
                if w[1] > 1 and w[2]:
                    self.hop_seen_read(w[0])
            else:
                self.hop_seen_read(w[0])

    def hands_on(self, m, st, lyr):
        """m, a child of the opened Sequential running now, returned on stage
        st (layer lyr): the Sequential goes on there, with no copy back to it (True)."""
        if id(m) in self.flow_children and self.exec and len(self.exec) - 1 in self.opened_frames:
            self.exec[-1] = st
            self.lexec[-1] = lyr
            return True
        return False

    def wrap_opened(self, m, fwd=None):
        """An nn.Sequential opened to reach the units (torch's own chain,
        with no code of its own between its children): each child's output
        goes on to the next where it is, with no copy back to the caller's
        stage and out again (a ResNet stage's blocks split over two
        devices would otherwise hold every block's output twice, the
        block's and the copy the next block saves); the Sequential's output
        goes back to its caller's stage. Other opened modules (a model's
        own forward between its layers) may combine their units' outputs
        in their own code, so their code runs on their caller's stage.
        fwd: a deep copy's own forward (_Placed)."""
        fresh = fwd is None
        mref, func, fwd = _weakly(m, m.forward if fresh else fwd)
        ap = self

        def forward(*args, **kwargs):
            m = mref()
            caller, caller_l = ap.caller_of(m)
            ap.exec.append(caller)
            ap.lexec.append(caller_l)
            frame = len(ap.exec) - 1
            ap.opened_frames.add(frame)
            try:
                out = func(m, *args, **kwargs) if fwd is None else fwd(*args, **kwargs)
            finally:
                ap.opened_frames.discard(frame)
                last = ap.exec.pop()
                last_l = ap.lexec.pop()
            if ap.hands_on(m, last, last_l):        # a Sequential in a Sequential: the chain goes on
                return out
            return ap.follow(out, caller, caller_l, last_l) if last != caller or last_l != caller_l else out

        placed = _Placed(forward, mref, func, fwd, lambda m2, f2, loaded=False: self.wrap_opened(m2, f2))
        self.wrapped.add(id(m))
        if not fresh:
            return placed         # a copy's children hand nothing on: each output back, then on
        m.forward = placed
        self.flow_children.update(id(c) for c in m.children())
        return placed

    def wrap_root(self, root, fwd=None):
        fresh = fwd is None
        mref, func, fwd = _weakly(root, root.forward if fresh else fwd)
        ap = self

        def forward(*args, **kwargs):
            depth = len(ap.exec)
            try:
                out = func(mref(), *args, **kwargs) if fwd is None else fwd(*args, **kwargs)
            except RuntimeError as exc:
                if ap.hand_on_ids:      # the model's own code, on the root's stage, with a handed-on output
                    ap.refuse_mismatch(exc, mref(), 0)
                raise
            finally:
                ap.unwind(depth)
            return ap.follow(out, 0, 0)

        placed = _Placed(forward, mref, func, fwd, lambda m2, f2, loaded=False: self.wrap_root(m2, f2))
        self.wrapped.add(id(root))
        if fresh:
            root.forward = placed
        return placed

    # ---- crossing a boundary -------------------------------------------------
    def follow(self, obj, dst, dst_layer, from_layer=None, hop=None, at=None):
        """obj's tensors on stage dst: each one another stage holds crosses to
        dst (a copy that is dst's, as on two GPUs); a tensor on no stage's
        device crosses to dst's device when it is on the program's own device
        (a CPU program's batch, trained on GPUs), and stays where it is when
        the program keeps it off its device (a GPU program's sequence lengths
        on the CPU, as pack_padded_sequence wants them). Under
        torch.no_grad() too: a boundary copy in evaluation is a copy.
        from_layer: the layer a module's outputs were made on (None: inputs,
        made by the code running now). hop: the record pass's index of the
        module whose outputs these are (hop_of), for each copy it makes. at:
        the stage whose code made the inputs (default stage_now()): one of
        them on another device than that stage's, and no output handed on to
        it, is the program's, kept where the program keeps it, whatever
        stage shares that device (a GPU program's lengths on the CPU, with a
        stage on the CPU).

        A tensor of dst's own stage that the record pass would copy (from
        another layer than dst_layer) goes through a node of its own that
        copies nothing, in both directions: the record's crossing is a node
        of the backward graph, and the engine adds a gradient into a tensor
        used twice (a residual) when the node that made the second one runs;
        without the node a gradient used on both sides of this boundary
        would be summed before the producer's other gradients (a Linear's
        weight gradient) are taken, where the record summed it after."""
        torch = self.torch
        dev = self.devices[dst]
        made_on = self.layer_now() if from_layer is None else from_layer   # the same for every tensor
        grad = torch.is_grad_enabled()
        # inputs come from the code running now: on its own device, or kept off it by the program
        here = str(self.devices[self.stage_now() if at is None else at]) if from_layer is None else None

        def move(t):
            if not isinstance(t, torch.Tensor):
                return t
            src = self.holder(t)
            if here is not None and src is not None and str(self.device_of(t)) != here and \
                    self.handed_out.get(id(t)) is not t:
                src = None      # the program's own, where it keeps it (a CPU stage's device is no matter)
            if self.skip_copy and src != dst and self.device_of(t) == dev:
                return t
            if src == dst or (src is None and self.device_of(t) == dev):
                if t.requires_grad and made_on != dst_layer and grad:
                    return self.pass_through(t)
                return t
            if src is None and self.program_device is not None and \
                    str(self.device_of(t)) != str(self.program_device):
                return t
            return self.cross(t, src, dst, hop)

        def stay(t):
            # a tensor that keeps its device wherever it goes (a PackedSequence's batch_sizes,
            # which an LSTM takes on the CPU only): where dst shares its device, dst's all the
            # same, copied where it is (the ledger's); on another device it is no stage's
            src = self.holder(t)
            if src is None or src == dst or self.device_of(t) != dev:
                return t
            return self.cross(t, src, dst, hop, self.device_of(t))

        return _map(torch, obj, move, stay)

    def pass_through(self, t):
        if self._pass is None:
            self._pass = _pass_through(self.torch)
        self.moving += 1     # memsplit's own node: it may read a tensor another stage holds, and copies nothing
        try:
            return self._pass.apply(t)
        finally:
            self.moving -= 1

    def cross(self, t, src, dst, hop=None, dev=None):
        """The copy of t from stage src (None: no stage's device) to stage
        dst, with the backward of a copy between two devices: the gradient
        comes back as a copy on src (a plain clone on a shared device would
        hand dst's gradient tensor to src's operators, and the ledger would
        keep it on dst). dev: the device the copy is made on, when not
        dst's."""
        if self._cross is None:
            self._cross = _crossing(self.torch)
        if dev is not None:
            return self._cross.apply(t, self, src, dst, hop, dev)
        return self._cross.apply(t, self, src, dst, hop)

    def copy_on(self, t, src, st, dev, hop=None, watch=False):
        """t, which stage src holds, copied to device dev by stage st (None:
        no stage's device; the root runs that copy): the stage switch and
        the `moving` guard are the same for every device; only primitive()
        differs. The record pass says hop (a module's index, hop_of) with a
        copy of its outputs back to the caller (watch: then follows what
        reads it) and with the gradient copy that answers such a one."""
        self.exec.append(st if st is not None else 0)
        self.moving += 1       # the copy itself reads the other stage's tensor
        try:
            out = self.primitive(t, dev)
        finally:
            self.moving -= 1
            self.exec.pop()
        if self.crossing_log:
            self.log_crossing(t, src, st, dev)
        if self.record:
            key, _ = self.s.storage_key(out)
            orig, _ = self.s.storage_key(t)
            if key and orig and key != orig:
                if hop is None:
                    self.s.send("c", k=key, o=orig)
                else:
                    self.s.send("c", k=key, o=orig, h=hop)
                    if watch:
                        self.watch[key] = [hop, 0, out.requires_grad or t.requires_grad]
        return out

    def primitive(self, t, dev):
        """The one place real and virtual devices differ: on the same
        physical device a clone (the ledger counts it on the stage running
        the copy), else .to(dev)."""
        if self.device_of(t) == dev and not self.force_to:
            return t.clone()
        return t.to(dev, copy=True)

    def log_crossing(self, t, src, st, dev):
        how = "clone" if self.device_of(t) == dev and not self.force_to else "to"
        with open(self.crossing_log, "a") as f:
            f.write("%d\t%d\t%s\t%s\t%s\t%s\t%s\n" % (self.s.steps, self.s.phase, self.s.layer, src, st, how,
                                                      "x".join(str(n) for n in t.shape)))

    # ---- checks on every operator (forward only) --------------------------------
    def check_inputs(self, func, args, kwargs=None):
        """A tensor of another stage reaching this stage's operator without
        the boundary copy: what would fail on two real GPUs."""
        if self.watch:
            self.watch_reads(args, kwargs)
        if not self.placed or self.s.phase not in (PH_FORWARD, PH_VALIDATION) or self.moving:
            return              # the optimizer and the framework's own work are no stage's
        torch = self.torch
        st = self.stage_now()
        lib = self.s.lib
        for t in _tensors(torch, args):
            key, nbytes = self.s.storage_key(t)
            if not key or not nbytes:
                continue
            owner = lib.owner_device(key)
            if owner is not None and owner != st and not self.is_static(key):
                raise PlanRefused(
                    "memsplit: a tensor of stage %d (%s) reached stage %d (%s) in %s without the boundary copy: "
                    "a module moves tensors across stages itself%s" % (owner, self.devices[owner], st,
                                                                        self.devices[st], self.s.where_text(),
                                                                        self.handed_on_hint()))

    def is_static(self, key):
        lib = self.s.lib
        from ._lib import CAT
        return any(lib.owner(key, CAT[c]) is not None for c in ("param", "master", "grad", "optim"))

    def check_output(self, t):
        """A tensor created on another stage's physical device in this stage
        (in a forward: between steps, outside every module, a tensor is made
        where its inputs are, a deep copy of a stage's weights on its device)."""
        if not self.placed or self.moving or self.s.phase not in (PH_FORWARD, PH_VALIDATION):
            return
        st, dev = self.stage_now(), self.device_of(t)
        if dev.type == self.devices[st].type and dev != self.devices[st] and str(dev) in self.by_device:
            raise PlanRefused(
                "memsplit: %s made a tensor on %s while it runs on stage %d (%s): the module moves its own "
                "tensors to another stage's device (e.g. .to(x.device) on a tensor of another stage)"
                % (self.s.where_text(), dev, st, self.devices[st]))

    def refuse_mismatch(self, exc, module, st):
        """torch's own device check failed inside module, which runs on stage
        st of distinct devices: the module computed with a tensor of another
        stage that never crossed (the ledger's check_inputs on a shared
        device). Refused with the same words, naming the module, once: the
        innermost wrapper converts it."""
        text = str(exc)
        if not any(m in text for m in _MISMATCH):
            return
        path = self.s.path_of.get(id(module), type(module).__name__)
        raise PlanRefused(
            "memsplit: a tensor of another stage reached stage %d (%s) in layer %d (module %s) without the boundary "
            "copy: a module moves tensors across stages itself%s (torch: %s)"
            % (st, self.devices[st], self.s.layer, path, self.handed_on_hint(),
               text.strip().splitlines()[0][:300])) from None

    def handed_on_hint(self):
        """The other cause under a plan that hands outputs on: the program's
        code computes with one, which the record pass never saw it do."""
        if not self.hand_on_ids:
            return ""
        names = sorted(self.handed_on)
        return ("; or the program's own code computes with the output of a module this plan hands on to the next "
                "(%s%s): take that module out of the plan's \"handed_on\"" %
                (", ".join(names[:3]), ", ..." if len(names) > 3 else ""))


_MAX_HANDED_ON = 4096     # vocab/profile.h: MS_REC_MAX_HANDED_ON
_ATTR_SCANS = 2           # a unit's calls whose modules are searched for tensors kept on them
_setattr_watchers = weakref.WeakSet()     # the appliers told of tensors set on modules (_watch_setattr)


def _watch_setattr(torch, ap):
    """nn.Module's __setattr__, once per process: a tensor (not a
    parameter) set on a module is said to each applier alive (note_attr),
    which follows it if the module is in one of its units. One isinstance
    a set when it is no tensor, as at the model's construction."""
    _setattr_watchers.add(ap)
    module = torch.nn.Module
    real = module.__setattr__
    if getattr(real, "_memsplit", False):
        return
    tensor, parameter = torch.Tensor, torch.nn.Parameter

    def __setattr__(self, name, value):
        real(self, name, value)
        if isinstance(value, tensor) and _setattr_watchers and not isinstance(value, parameter):
            for watcher in list(_setattr_watchers):
                watcher.note_attr(self, name)

    functools.update_wrapper(__setattr__, real)
    __setattr__._memsplit = True
    module.__setattr__ = __setattr__
_MISMATCH = ("Expected all tensors to be on the same device", "found at least two devices")


def _weakly(m, fwd):
    """m's forward fwd, for a wrapper that sits in m's __dict__: (a weak
    reference to m, fwd's function, None) when fwd is m's own bound method,
    else (the reference, None, fwd). Held strongly, m and its wrapper would
    be a cycle that only the garbage collector frees: a copy the program
    drops (an EMA made again, a snapshot replaced) would keep its memory
    until a collection, which the program alone frees at once."""
    ref = weakref.ref(m)
    if getattr(fwd, "__self__", None) is m and hasattr(fwd, "__func__"):
        return ref, fwd.__func__, None
    return ref, None, fwd


class _Placed:
    """A placed module's forward (the function fn). A deep copy of the
    module (copy.deepcopy(model): an EMA, a best-model snapshot) gets one of
    its own, placed as the original is, around the copy's own forward: a
    plain function would be shared, and the copy's calls would run the
    original module. Introspection sees the program's forward (__wrapped__,
    made at each look: the module is held weakly, _weakly)."""

    def __init__(self, fn, mref, func, fwd, again):
        shown = fwd if func is None else func
        self.__dict__.update(getattr(shown, "__dict__", {}))
        self._fn, self._mref, self._func, self._fwd, self._again = fn, mref, func, fwd, again
        for name in functools.WRAPPER_ASSIGNMENTS:
            if hasattr(shown, name):
                setattr(self, name, getattr(shown, name))

    @property
    def __wrapped__(self):
        m = self._mref()
        return self._fwd if self._func is None or m is None else types.MethodType(self._func, m)

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __deepcopy__(self, memo):
        copy = memo.get(id(self._mref()))
        if copy is None:
            return self           # the forward copied without its module
        fwd = self._fwd if self._func is None else types.MethodType(self._func, copy)     # the copy's own
        return self._again(copy, fwd)

    def place_loaded(self, copy):
        """copy, which torch.load made of this forward's module (its pickled
        state has no memsplit in it: _pickle), placed as the original is."""
        copy.forward = self._again(copy, copy.forward, True)


def _crossing(torch):
    class Cross(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t, ap, src, dst, hop, dev=None):
            ctx.ap, ctx.src, ctx.dst, ctx.src_device = ap, src, dst, ap.device_of(t)
            # the record pass: a crossing of a module's outputs copied back to the caller
            # gives its gradient back to that copy through a copy the record may leave out
            w = ap.watch.get(ap.s.storage_key(t)[0]) if ap.watch else None
            ctx.hop_back = w[0] if w is not None else None
            if dev is not None:         # the gradient's copy (below): to the device t came from
                return ap.copy_on(t, src, dst, dev, hop)
            return ap.copy_on(t, src, dst, ap.devices[dst], hop, watch=hop is not None)

        @staticmethod
        def backward(ctx, g):
            if torch.is_grad_enabled() and g.requires_grad:
                # create_graph (a gradient penalty): the gradient's copy is in the graph of the
                # gradient, and its own gradient is copied back, as .to()'s is between two
                # devices; a clone's would stay where it is, and the second backward's
                # operators would run on the other stage's tensor
                back = Cross.apply(g, ctx.ap, ctx.dst, ctx.src, ctx.hop_back, ctx.src_device)
            else:
                back = ctx.ap.copy_on(g, ctx.dst, ctx.src, ctx.src_device, ctx.hop_back)
            return back, None, None, None, None, None

    return Cross


def _pass_through(torch):
    class Pass(torch.autograd.Function):
        """The record's crossing where the stage is the same: the tensor
        itself (its storage and version counter, no view), the gradient
        itself back."""
        @staticmethod
        def forward(ctx, t):
            return t.detach()

        @staticmethod
        def backward(ctx, g):
            if torch.is_grad_enabled() and g.requires_grad:
                return Pass.apply(g)      # where the record's gradient copy is a node (Cross.backward)
            return g

    return Pass


def _map(torch, obj, fn, keep=None):
    """obj with each tensor t in it fn(t), rebuilt; keep(t) for a tensor
    that keeps its device (None: left as it is)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, torch.nn.utils.rnn.PackedSequence):
        # its batch_sizes stay on the CPU wherever its data goes (torch's own PackedSequence.to):
        # an LSTM refuses them on a GPU
        ix = [None if x is None else fn(x) for x in (obj.sorted_indices, obj.unsorted_indices)]
        return type(obj)(fn(obj.data), keep(obj.batch_sizes) if keep else obj.batch_sizes, *ix)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):       # namedtuple
        return type(obj)(*[_map(torch, x, fn, keep) for x in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map(torch, x, fn, keep) for x in obj)
    if isinstance(obj, dict):
        out = {k: _map(torch, v, fn, keep) for k, v in obj.items()}
        try:
            return type(obj)(out) if type(obj) is not dict else out
        except Exception:       # a mapping type that cannot be rebuilt from a dict: in place
            for k, v in out.items():
                obj[k] = v
            return obj
    if hasattr(obj, "to_tuple") and hasattr(obj, "keys"):       # HF ModelOutput
        for k in list(obj.keys()):
            obj[k] = _map(torch, obj[k], fn, keep)
        return obj
    return obj
