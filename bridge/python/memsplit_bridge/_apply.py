"""The applier: a plan's stages placed on their devices in the user's own
program, unchanged (docs/bridge.md, "Applying a plan").

Placement is per parameter: a parameter goes to the device of the stage
that owns it (its first owner's layer), so a weight tied across stages
stays in one place and the module that borrows it runs where it lives.
Every module of a stage whose caller is elsewhere has its forward wrapped
so that its tensor inputs (positional and keyword) follow it; the root's
outputs come back to the root device. Placement is applied at the first
training forward and again after every move the framework makes
(Module._apply: Lightning's fit, teardown and test), and optimizer state
moves with its parameters. Stages that share a physical device (virtual
devices, for testing) are told apart by the ledger: a crossing copies the
tensor (clone) so that it belongs to the stage that uses it, and a tensor
that reaches a stage's operator from another stage without that copy is an
error, as it would be on two real GPUs.
"""
import functools

from ._lib import PH_BACKWARD, PH_FORWARD, PH_VALIDATION
from ._session import _tensors


class PlanRefused(Exception):
    pass


class Applier:
    def __init__(self, torch, session, plan):
        self.torch, self.s, self.plan = torch, session, plan
        self.stages = plan["stages"]                       # [{"device", "first", "last"}]
        self.devices = [torch.device(st["device"]) for st in self.stages]
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
        self.param_stage = {}                              # id(param) -> stage
        self.exec = []                                     # stages of wrapped modules running now
        self.wrapped = set()
        self.placed = False
        self.moving = 0
        self._cross = None                                 # the autograd Function of a crossing
        # tests only: leave out the boundary copy, to see the ledger catch it
        import os
        self.skip_copy = os.environ.get("MEMSPLIT_BRIDGE_TEST_SKIP_COPY") == "1"

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

    def ledger_device(self, t):
        """The ledger device (a stage) an allocation of tensor t belongs to."""
        st = self.by_device.get(str(t.device))
        if st and len(st) == 1:
            return st[0]
        return self.stage_now()

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
        with torch.no_grad():
            self.moving += 1
            try:
                for path, m in root.named_modules():
                    layer = layer_of_module.get(id(m))
                    st = self.stage_of_layer.get(layer, 0) if layer is not None else 0
                    self.module_stage[id(m)] = st if layer is not None else None
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

    def rehome(self, t, st):
        """On virtual devices a tensor placed on a stage stays where it is
        physically: only the ledger learns which stage it now counts on."""
        if self.virtual:
            key, nbytes = self.s.storage_key(t)
            if key and nbytes:
                self.s.lib.c.msb_move(key, st)

    def move_optimizer_state(self):
        for opt in self.s.optimizers:
            for p, st in opt.state.items():
                for k, v in list(st.items()):
                    if isinstance(v, self.torch.Tensor) and v.device != p.device and v.dim() > 0:
                        st[k] = v = v.to(p.device)
                    if isinstance(v, self.torch.Tensor) and id(p) in self.param_stage:
                        self.rehome(v, self.param_stage[id(p)])

    def exec_stage_of(self, m):
        """A module runs where its own parameters are (a tied weight's home),
        else on its layer's stage."""
        for p in m._parameters.values():
            if p is not None and id(p) in self.param_stage:
                return self.param_stage[id(p)]
        return self.module_stage.get(id(m))

    def wrap_boundaries(self, root):
        torch = self.torch
        containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
        parent_of = {}
        for path, m in root.named_modules():
            for _, c in m.named_children():
                parent_of.setdefault(id(c), m)
        for path, m in root.named_modules():
            st = self.exec_stage_of(m)
            if st is None or id(m) in self.wrapped or isinstance(m, containers):
                continue
            parent = parent_of.get(id(m))
            pst = self.exec_stage_of(parent) if parent is not None else None
            if parent is None or pst != st or isinstance(parent, containers):
                self.wrap(m, st)
        if id(root) not in self.wrapped:
            self.wrap_root(root)

    def wrap(self, m, st):
        """The module's inputs follow it to its stage, and its outputs go back
        to where its caller computes, so that the caller's own code (residual
        adds between blocks, loops over them) never mixes devices."""
        fwd = m.forward
        ap = self

        @functools.wraps(fwd)
        def forward(*args, **kwargs):
            caller = ap.stage_now()
            args, kwargs = ap.follow((args, kwargs), st)
            ap.exec.append(st)
            try:
                out = fwd(*args, **kwargs)
            finally:
                ap.exec.pop()
            return ap.follow(out, caller) if caller != st else out

        m.forward = forward
        self.wrapped.add(id(m))

    def wrap_root(self, root):
        fwd = root.forward
        ap = self

        @functools.wraps(fwd)
        def forward(*args, **kwargs):
            out = fwd(*args, **kwargs)
            return ap.follow(out, 0, to_root=True)

        root.forward = forward
        self.wrapped.add(id(root))

    # ---- crossing a boundary -------------------------------------------------
    def follow(self, obj, st, to_root=False):
        """obj's tensors on stage st's device (copied when they are another
        stage's, so the copy is the destination's, as on two GPUs). Under
        torch.no_grad() too: a boundary copy in evaluation is a copy."""
        torch = self.torch
        dev = self.devices[st]
        lib = self.s.lib

        def move(t):
            if not isinstance(t, torch.Tensor):
                return t
            if t.device != dev:
                return t.to(dev)
            if self.virtual and not to_root and not self.skip_copy:
                key, _ = self.s.storage_key(t)
                owner = lib.owner_device(key) if key else None
                if owner is not None and owner != st:
                    return self.cross(t, owner, st)
            return t

        return _map(torch, obj, move)

    def cross(self, t, src, dst):
        """The copy of t from stage src to stage dst on a shared physical
        device, with the backward of a copy between two GPUs: the gradient
        comes back as a copy on src (a plain clone would hand dst's gradient
        tensor to src's operators, and the ledger would keep it on dst)."""
        if self._cross is None:
            self._cross = _crossing(self.torch)
        return self._cross.apply(t, self, src, dst)

    def copy_on(self, t, st):
        self.exec.append(st)
        self.moving += 1       # the copy itself reads the other stage's tensor
        try:
            return t.clone()
        finally:
            self.moving -= 1
            self.exec.pop()

    # ---- checks on every operator (forward only) --------------------------------
    def check_inputs(self, func, args):
        """A tensor of another stage reaching this stage's operator without
        the boundary copy: what would fail on two real GPUs."""
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
                    "a module moves tensors across stages itself" % (owner, self.devices[owner], st,
                                                                      self.devices[st], self.s.where_text()))

    def is_static(self, key):
        lib = self.s.lib
        from ._lib import CAT
        return any(lib.owner(key, CAT[c]) is not None for c in ("param", "master", "grad", "optim"))

    def check_output(self, t):
        """A tensor created on another stage's physical device in this stage."""
        if not self.placed or self.moving or self.s.phase == PH_BACKWARD:
            return
        st = self.stage_now()
        if t.device.type == self.devices[st].type and str(t.device) != str(self.devices[st]) and \
                str(t.device) in self.by_device:
            raise PlanRefused(
                "memsplit: %s made a tensor on %s while it runs on stage %d (%s): the module moves its own "
                "tensors to another stage's device (e.g. .to(x.device) on a tensor of another stage)"
                % (self.s.where_text(), t.device, st, self.devices[st]))


def _crossing(torch):
    class Cross(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t, ap, src, dst):
            ctx.ap, ctx.src = ap, src
            return ap.copy_on(t, dst)

        @staticmethod
        def backward(ctx, g):
            return ctx.ap.copy_on(g, ctx.src), None, None, None

    return Cross


def _map(torch, obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):       # namedtuple
        return type(obj)(*[_map(torch, x, fn) for x in obj])
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map(torch, x, fn) for x in obj)
    if isinstance(obj, dict):
        out = {k: _map(torch, v, fn) for k, v in obj.items()}
        try:
            return type(obj)(out) if type(obj) is not dict else out
        except Exception:       # a mapping type that cannot be rebuilt from a dict: in place
            for k, v in out.items():
                obj[k] = v
            return obj
    if hasattr(obj, "to_tuple") and hasattr(obj, "keys"):       # HF ModelOutput
        for k in list(obj.keys()):
            obj[k] = _map(torch, obj[k], fn)
        return obj
    return obj
