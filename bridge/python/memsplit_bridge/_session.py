"""Where the program is: the module tree and its units, the layer and
phase at every moment, steps, parameters and their gradients and optimizer
state, the OOM, and the trial's end (docs/bridge.md, "Units, and the layers they make")."""
import atexit
import functools
import hashlib
import itertools
import os
import sys
import time
import weakref

from . import _checkpoints, _history, _lib, _pickle
from ._lib import CAT, PH_BACKWARD, PH_FORWARD, PH_INIT, PH_OPTIMIZER, PH_VALIDATION

SUPPORTED = ((1, 13), (3, 0))   # torch versions: from 1.13 up to (not including) 3.0


def _version(torch):
    parts = []
    for p in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


class Session:
    def __init__(self, torch, lib, cfg):
        self.torch, self.lib, self.cfg = torch, lib, cfg
        self.on = True
        self.pid = os.getpid()
        self.steps_wanted = int(cfg.get("steps", 2))
        self.root = None            # the tree the units come from: the model, or the models trained together
        self.model = None           # the first model the program trains (its first training forward)
        self.models = []            # every model found at that moment: it first, then the others it trains
        self.roots = set()          # their ids: a call of one from the program's own code is a model's forward
        self.root_last = {}         # id of a model -> the last layer of its own units (its outputs' backward)
        self.after_models = set()   # ids of models trained beside the first that are the last unit whole
        self.n_blocks = 0
        self.block_of = {}          # id(module) -> unit index (layer - 1), for every module in a unit of layers 1..n
        self.path_of = {}           # id(module) -> path in the root's tree
        self.list_ancestors = set() # id of every module that contains the list
        self.layer, self.phase = -1, PH_INIT
        self.stack = []             # modules whose forward is running, less the quiet ones
        self.quiet = frozenset()    # ids of modules inside a unit, below its top: their hooks return at once
        self.opaque = set()         # ids of modules inside a TorchScript module: never called from Python
        self.grad_from = []         # (layer, phase) where each torch.autograd.grad running was called
        # modules whose call is no model's forward at the top level: a parametrization
        # (torch.nn.utils.parametrize: spectral_norm, weight_norm) makes its module's weight
        # at each access, so also when the program builds or reads it outside a forward
        self.not_models = tuple(t for t in [getattr(getattr(torch.nn.utils, "parametrize", None),
                                                    "ParametrizationList", None)] if t is not None)
        self.outer_call = None      # such a module running outside any forward (its modules are no model's)
        self.block_depth = 0        # how many of them are inside the list
        self.in_root = False
        self.list_entered = False
        self.forwards = 0           # training forwards since the last step
        # micro-batches begun since the last step: a training forward after a backward (or the
        # step's first) begins one, so a program that calls its model twice before one backward
        # (a siamese encoder) has one, and gradient accumulation one per backward
        self.passes = 0
        self.pass_open = False      # a training forward since the last backward
        self.recomputed = set()     # layers whose forward the program ran again in backward (checkpointing)
        self.steps = 0
        self.running = None         # the model whose forward runs (or ran last)
        self.first_done = set()     # ids of the models whose first training forward is done
        self.members = {0: [], 1: []}   # pre / post module paths seen in the first training forward
        self.param_layer = {}       # id(param) -> layer
        self.confirmed = set()      # params whose layer a call has confirmed
        self.autocast = None
        self.device = None
        self.cuda = False
        self.times = []             # (layer, phase, t) at transitions, this step
        self.spare_events = []      # CUDA timing events already read (step_data), recorded again by clock
        self.stream_seen = None     # (the root's current stream as torch gives it, its Stream object)
        self.done_sent = False
        self.tracker = None
        self.record = None          # the allocator's record (_history), when it makes the tensor-level record
        self.dev_index = 0          # the root GPU's ordinal, for the allocator's counters
        self.in_step = 0
        self.stepping = None        # the optimizer whose step runs (step_begins)
        self.in_backward = 0
        self.static_keys = {}       # without the tracker: (owner id, cat) -> storage key registered
        self.key_label = {}         # ... and storage key -> (cat, layer) as the ledger has it
        self.key_slot = {}          # ... and storage key -> the (owner id, cat) it is registered for
        self.grad_walk = None       # (what it depends on, the parameters whose gradients a step labels)
        _watch_parameters(torch)
        self.micro_batch = None
        self.scaled_loss = False
        self.outside = False        # the loss was computed outside the model in this forward
        self.outside_early = False  # ... beginning in the root's own code, after a borrowed module
        self.skip_warned = set()    # ways of saving a checkpoint a diagnostic pass has said it skips
        self.redirects = {}         # a diagnostic pass's saves: the program's path -> memsplit's own file
        self.redirect_dir = None
        self.saved_paths = set()    # the paths the program saved a checkpoint to (a rename carries one on)
        self.loaded_paths = set()   # the program's checkpoint files it loaded (a diagnostic pass moves none)
        self.aliases = {}           # a diagnostic pass: a new name of the program's checkpoint -> its file
        self.hidden = set()         # ... the program's files and folders it left where the program removed them
        self.made_dirs = []         # ... the folders it made (os.mkdir, os.makedirs), in order
        self.began = time.time()    # ... when it began: a file older than this is the program's from before
        self.rebind = {}            # id of a function the bridge wrapped -> (it, its wrapper): _checkpoints.rebind
        self.pending = {}           # a diagnostic pass's binary files being written: path -> weak ref (_checkpoints)
        self.kept = {}              # ... the program's files from before it replaced: path -> hidden link
        self.made_files = set()     # ... the files it wrote where there were none
        self.before_dirs = set()    # ... the folders of checkpoints from before that it saved over
        self.journal = b""          # ... what its end would do with them, as memsplit has it (_checkpoints._journal)
        self.one_backward_thread = None     # a rerun over distinct devices: torch's switch, held
        self.saved_homes = {}       # virtual devices: a save's target -> its storages' stages (_homes)
        self.load_homes = {}        # while torch.load runs: a storage's address -> the stage it lands on
        self.load_stage = None      # while torch.load restores one storage: the stage it lands on
        self.saved_modules = {}     # under a plan: a save's target -> the modules it held (_homes)
        self.borrow = []            # (module, layer to return to) while a tied module runs
        self.tied_params = None     # ids of parameters that more than one module holds
        # the device whose tensors count: the GPU where torch has one
        self.track_type = "cuda" if torch.cuda.is_available() else "cpu"
        self.applier = None         # a plan's placement (memsplit train --plan)
        self.optimizers = []        # every optimizer the program made
        self.losses = []            # what the program passed to backward() (or to GradScaler.scale) this step
        self.real = {}              # torch.cuda's peak functions, before _keep_peaks wrapped them
        self.peaks = [0, 0]         # the program's own view: allocated and reserved peaks
        self.ballast = {}           # GPU ordinal -> bytes the ballast took there
        self.stepped = set()        # optimizers that stepped in this iteration (ids)
        self.other_models = set()   # ids of other models the program trains (a GAN's discriminator)
        # their parameters, counted in layer 0, by id; held weakly: a model the program drops
        # (a copy loaded, an EMA replaced) frees its weights as it does without memsplit
        self.other_params = weakref.WeakValueDictionary()
        self.held_ids = set()       # parameters of models the program holds beside them (held_models)
        self.live = None            # register()'s walk of the live modules (live_modules)
        # the layers in the order the program first called their forward in its first
        # iteration (None after it): said once (event `order`), so that the profile's units,
        # and every pass a plan drives, follow the program's order, not registration's
        self.first_calls, self.first_seen = [], set()
        # each unit's place in that order (its number in the profile; no plan): backward
        # walks the units back by it, not by registration
        self.rank = {}
        self.keep_live = False      # while register() runs: one walk serves every look
        self.late = None            # (step, marks, losses) whose times and loss are sent at the next step's end
        # the trial's rows need each interval's counters and time; a rerun (the train pass) reads
        # only each step's time and the stages' peaks: no counters read (nor torch's peaks reset)
        # at a transition, and one timing mark a step
        self.per_interval = cfg.get("pass", "trial") != "train"
        self.global_hooks = None    # torch's handles of the global module hooks, while every module call runs them
        self.local_hooks = []       # handles of the hooks on single modules, once the global ones are gone
        self.heard = {}             # id -> a module that per-module hooks must keep hearing beyond the tree's

    def __deepcopy__(self, memo):
        # a copy of the program's model (copy.deepcopy(model): an EMA, a best-model snapshot)
        # copies the hooks on its modules, bound methods of this session: there is one session
        return self

    # ---- reporting -------------------------------------------------------
    def send(self, ev, **f):
        if self.on and os.getpid() == self.pid:
            self.lib.send(ev, **f)

    def stats(self):
        """The caching allocator's counters at this moment (GPU), or -1s.
        The peaks are reset at every transition, so each interval's is
        exact; the program still sees its own peaks (_keep_peaks)."""
        if not self.cuda:
            return -1, -1, -1, -1
        # the allocator's own counters, not torch.cuda.max_memory_allocated:
        # that reads memory_stats, which _keep_peaks wraps for the program.
        # The nested form straight from C: memory_stats flattens it in Python
        # (about 140 us a call on the H200, 12 us this way), at every transition
        st = self.real["nested_stats"](self.dev_index)
        a, r = st.get("allocated_bytes", {}).get("all", {}), st.get("reserved_bytes", {}).get("all", {})
        peak, rpeak = a.get("peak", 0), r.get("peak", 0)
        if self.tracker is not None:
            # the tracker resets the peaks around every operator to see its workspace (_track.Workspace)
            op_peak, op_rpeak = self.tracker.interval_peaks()
            peak, rpeak = max(peak, op_peak), max(rpeak, op_rpeak)
        out = (a.get("current", 0), peak, r.get("current", 0), rpeak)
        self.peaks[0] = max(self.peaks[0], out[1])
        self.peaks[1] = max(self.peaks[1], out[3])
        self.real["reset_peaks"](self.dev_index)
        return out

    def counter(self, d, name, field):
        """The caching allocator's counter name ("allocated_bytes",
        "reserved_bytes") on GPU d, all pools, field "current" or "peak":
        from the nested form, as stats reads it (memory_stats flattens the
        same in Python, 140 us a call on the H200; a step's end asks up to
        three a GPU)."""
        st = self.real["nested_stats"](_ordinal(self.torch, self.torch.device(d)))
        return st.get(name, {}).get("all", {}).get(field, 0)

    def device_peak(self, d):
        """The caching allocator's peak on d since the program started (or
        last reset it): in a trial the bridge resets the root device's at
        every transition (stats), and keeps the highest in self.peaks."""
        d = self.torch.device(d)
        real = self.counter(d, "allocated_bytes", "peak")
        return max(real, self.peaks[0]) if d == self.torch.device(self.device) else real

    def device_context(self, d):
        """What GPU d holds beyond the caching allocator: the CUDA context
        and libraries (as the trial's reserve counts them), less the ballast
        memsplit took there."""
        d = self.torch.device(d)
        free, total = self.torch.cuda.mem_get_info(d)
        reserved = self.counter(d, "reserved_bytes", "current")
        return max(0, total - free - reserved - self.ballast.get(d.index or 0, 0))

    def transition(self, layer, phase, xin=-1, xl=-1):
        """The program moved to (layer, phase): close the previous interval.
        xin: bytes of the tensors entering the layer (the previous layer's
        output, what crosses a stage boundary), -1 when not a layer entry."""
        if self.tracker is not None:
            self.tracker.sweep_all()
        alloc, peak, reserved, rpeak = self.stats() if self.per_interval else (-1, -1, -1, -1)
        if self.record is not None:
            w = dict(l=layer, p=phase, alloc=alloc, peak=peak, reserved=reserved, rpeak=rpeak, xin=xin, xl=xl,
                     fp=self.passes)
            self.record.transition(layer, phase, w)    # sent at the next drain, in order with the allocations
            self.lib.where(layer, phase)
        elif self.on and os.getpid() == self.pid:
            # the event formatted in C: a program pays this at every unit boundary
            self.lib.transition(layer, phase, alloc, peak, reserved, rpeak, xin, xl, self.passes)
        else:
            self.lib.where(layer, phase)
        self.layer, self.phase = layer, phase
        if self.first_calls is not None and phase == PH_FORWARD and layer not in self.first_seen:
            self.first_seen.add(layer)
            self.first_calls.append(layer)
            if 1 <= layer <= self.n_blocks and self.cfg.get("plan") is None:
                self.rank[layer] = len(self.rank) + 1
        if self.per_interval or phase == PH_INIT or not self.times:
            self.times.append((layer, phase, self.clock()))

    def clock(self):
        if self.cuda:
            # every event on the root's device: events of two devices cannot be timed against
            # each other (cudaEventElapsedTime: "invalid resource handle"), and a stage's backward
            # runs on its own GPU's autograd thread, where that GPU is the current device. The
            # stream is the root's, so on two GPUs a later stage's interval is the root GPU's time
            # between the marks, not that stage's own.
            # A unit boundary pays this (ResNet-152: 92 a step): an event read at a step's end is
            # recorded again (no event made and destroyed each), and the stream's object is made
            # again only when the root's current stream changes (torch makes one at each ask)
            if self.torch._C._cuda_getDevice() == self.dev_index:
                return self.mark()
            with self.torch.cuda.device(self.dev_index):
                return self.mark()
        return time.perf_counter()

    def mark(self):
        """A timing event recorded on the root's stream (clock), the root device current."""
        ev = self.spare_events.pop() if self.spare_events else self.torch.cuda.Event(enable_timing=True)
        ev.record(self.root_stream())
        return ev

    def root_stream(self):
        """The root device's current stream (the program may change it)."""
        at = self.torch._C._cuda_getCurrentStream(self.dev_index)
        if self.stream_seen is None or self.stream_seen[0] != at:
            self.stream_seen = (at, self.torch.cuda.current_stream(self.dev_index))
        return self.stream_seen[1]

    # ---- the model -------------------------------------------------------
    def register(self, root):
        # the program's live modules, walked once for the models it trains beside this one and
        # those it holds (the collector's walk over a large process is the first step's cost);
        # not kept past this forward: a later walk sees what the program made since
        self.live, self.keep_live = None, True
        try:
            return self.register_model(root)
        finally:
            self.live, self.keep_live = None, False

    def register_model(self, root):
        torch = self.torch
        self.model = root
        self.models = [root] + self.co_trained(root)
        self.roots = {id(m) for m in self.models}
        if len(self.models) > 1:
            # several models trained together (a GAN): one tree of them, each named as the
            # program names it, so that their units are split as one model's are
            root = torch.nn.Module()
            for name, m in zip(_model_names(torch, self.models), self.models):
                root.add_module(name, m)
        self.root = root
        _checkpoints.watch_lightning(self)
        _checkpoints.rebind(self)
        # a TorchScript module runs its submodules inside TorchScript, where no hook or wrapper
        # of theirs runs: it is a leaf of the tree, whole in one unit (torch.jit.script, .trace)
        self.opaque = {id(c) for m in root.modules() if isinstance(m, torch.jit.ScriptModule)
                       for c in m.modules() if c is not m}
        mods = [(path, m) for path, m in root.named_modules() if id(m) not in self.opaque]
        index = {}
        sigs = {}

        def sig(m):
            if id(m) in sigs:
                return sigs[id(m)]
            h = hashlib.blake2b(digest_size=8)
            h.update(type(m).__qualname__.encode())
            for n, p in list(m._parameters.items()) + list(m._buffers.items()):
                if p is not None:
                    h.update(("%s:%s:%s;" % (n, tuple(p.shape), p.dtype)).encode())
            for _, c in m.named_children():
                h.update(sig(c).encode())
            sigs[id(m)] = h.hexdigest()
            return sigs[id(m)]

        holders = {}
        for path, m in root.named_modules(remove_duplicate=False):
            for p in m._parameters.values():
                if p is not None:
                    holders.setdefault(id(p), set()).add(id(m))
        self.tied_params = {k for k, v in holders.items() if len(v) > 1}
        lines = []
        for i, (path, m) in enumerate(mods):
            index[path] = i
            self.path_of[id(m)] = path
            parent = -1 if i == 0 else index.get(path.rsplit(".", 1)[0] if "." in path else "", 0)
            is_list = isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict))
            nbytes = sum(p.numel() * p.element_size() for p in m.parameters())
            lines.append("%d\t%d\t%s\t%s\t%d\t%d\t%s" % (i, parent, _lib.tsv(path), _lib.tsv(type(m).__name__),
                                                       int(is_list), nbytes, sig(m)))
        tree = "\n".join(lines) + "\n"
        fingerprint = self.lib.fingerprint(tree)
        plan = self.cfg.get("plan")
        if plan is not None:
            tops, why = self.units_of_plan(root, plan, fingerprint)
        else:
            tops, why = self.units_of_tree(mods, tree)
            if tops is None:
                self.refuse("layers", why)    # stops the program: it would run on unobserved
        # tops: [[module path, ...] per unit], in order; a unit is the subtrees of its top modules.
        # The first and the last unit are the layers before and after the others (0 and n + 1:
        # the program's own code there and the modules it calls first and last, as the rows and
        # the stage model know them); the others are layers 1..n
        inside = set()
        for paths in tops:
            for path in paths:
                inside.update(id(m) for m in root.get_submodule(path).modules())
        # the modules opened to reach the units: their own code belongs to the unit running before it
        self.list_ancestors = {id(m) for _, m in mods if id(m) not in inside}
        last = tops[-1] if plan is not None or len(tops) >= 3 else []
        if plan is not None:
            tops = tops[1:-1]            # a plan's layers: before, the units, after
        else:
            tops = tops[1:-1] if len(tops) >= 3 else tops[1:] if len(tops) == 2 else tops
        self.n_blocks = len(tops)
        # a model trained beside the first that is the whole last unit (a GAN's discriminator
        # too small to open): its forward is the layer after the units, not the layer before
        # them that a model's call begins in
        self.after_models = {id(m) for m in self.models[1:] if self.path_of.get(id(m)) in last}
        top_ids = set()
        for b, paths in enumerate(tops):
            for path in paths:
                top = root.get_submodule(path)
                top_ids.add(id(top))
                for m in top.modules():
                    self.block_of[id(m)] = b
        # inside a unit only its top's call is a transition: the modules below it run no hook
        # code (issue 40: a module call costs the program a Python call either way, and this
        # keeps it to a set lookup). A module holding a tied weight stays heard: it borrows
        # its owner's layer. The innermost module at an OOM is found from the frames.
        tied = self.tied_params or set()
        self.quiet = frozenset(i for i in self.block_of if i not in top_ids) - {
            id(m) for _, m in mods if any(id(p) in tied for p in m._parameters.values() if p is not None)}
        # where a model's outputs' gradients arrive: its last unit's backward begins (the last
        # model's is the layer after the units)
        for m in self.models[:-1]:
            self.root_last[id(m)] = max((self.block_of[id(x)] + 1 for x in m.modules() if id(x) in self.block_of),
                                        default=0)
        # a model that is one module is its own unit: its path is "", named "." (the root, as
        # --layers names it), since an empty name cannot travel
        names = [",".join(p or "." for p in paths) for paths in tops]
        sigs = [",".join(sig(root.get_submodule(path)) for path in paths) for paths in tops]
        for paths, name in zip(tops, names):  # names travel whole or the program is refused, up front
            problem = next((q for q in (_lib.name_problem(path or ".", member=True) for path in paths) if q), None)
            if problem is None and len(name.encode("utf-8")) > _lib.NAME_MAX:
                problem = "with the other modules of its unit it makes the unit's name longer than the %d bytes " \
                          "memsplit keeps" % _lib.NAME_MAX
            if problem:
                self.refuse("names", "memsplit cannot carry the module name %s: %s; rename the module"
                            % (_lib.shown(name), problem))
        if len(names) > 4094:                 # vocab/limits.h: MS_MAX_BLOCKS
            self.refuse("names", "the program has %d units; memsplit handles up to 4094" % len(names))
        self.precision = self.detect_precision(root)
        self.device = next((p.device for p in root.parameters()), torch.device("cpu"))
        self.cuda = self.device.type == "cuda"
        self.dev_index = _ordinal(torch, self.device)
        if self.record is not None:
            # from the first training forward, on the model's GPU: what was made before is registered
            self.record.start(self.dev_index)
        if len(self.models) > 1:
            why = "%s; the models trained together: %s" % (why, ", ".join(n for n, _ in root.named_children()))
        self.send("model", root=type(self.model).__name__, list="", why=why, blocks=names, sigs=sigs,
                  fingerprint=fingerprint, precision=self.precision,
                  device=str(self.device), torch=torch.__version__)
        if plan is not None:
            from ._apply import Applier
            self.applier = Applier(torch, self, plan)
            self.applier.program_device = self.device
            kinds = sorted({d.type for d in self.applier.devices})
            if self.autocast is not None and len(kinds) > 1:
                self.refuse("plan", "the program trains in %s under torch.autocast, which works on one device type: "
                            "the plan's stages on %s would run in another precision than on %s. Plan with every stage "
                            "on GPUs, or train the program in fp32 (Lightning: precision='32-true') to run a stage on "
                            "the CPU" % (self.precision, ", ".join(k for k in kinds if k != self.device.type) or "cpu",
                                         self.device.type))
            self.applier.place(root)
            self.device = self.applier.root_device
            self.cuda = self.device.type == "cuda"     # the allocator's counters are the root GPU's, if any
            self.dev_index = _ordinal(torch, self.device)
        self.label_params(root)
        self.held_models()
        return True

    def co_trained(self, model):
        """The other models the program trains beside model, in the order
        its optimizers hold them: the largest modules whose parameters are
        all in the program's optimizers and none in model's. Found once, at
        the first training forward; one made later is another_model's."""
        mine = {id(p) for p in model.parameters()}
        order = {}
        for o in self.optimizers:
            for g in o.param_groups:
                for p in g["params"]:
                    if id(p) not in mine:
                        order.setdefault(id(p), len(order))
        if not order:
            return []
        found = [(m, mods, ps) for m, mods, ps in self.live_modules({id(model)})
                 if ps and all(id(p) in order for p in ps)]
        return [m for m, _, _ in sorted(_outermost(found), key=lambda x: min(order[id(p)] for p in x[2]))]

    def units_of_tree(self, mods, tree):
        """The units the trial chooses from the module tree and the bytes
        (bridge/layers.h): ([[top module paths] per unit], why), or (None,
        why) when --layers names what is not there. A model with nothing to
        open (a single module) is one unit: it is diagnosed all the same."""
        n, unit_of, why = self.lib.units(tree, self.cfg.get("layers", ""), len(mods))
        if n < 0:
            return None, why
        if n == 0:
            return [[mods[0][0]]], why
        tops = [[] for _ in range(n)]
        for k, u in enumerate(unit_of):
            if u >= 0:
                tops[u].append(mods[k][0])
        return tops, why

    def units_of_plan(self, root, plan, fingerprint):
        """A plan's rerun: the units are the plan's own, by module path (its
        layer_names: the first and last are the root's own code before and
        after them), so the rerun's layers are the trial's whatever
        --layers the trial had."""
        names = plan.get("layer_names") or []
        if plan.get("fingerprint") != fingerprint or len(names) < 3:
            self.refuse("plan", "the plan was made for another program or module list (its fingerprint "
                        "%s, this program's %s): profile this program and plan again"
                        % (plan.get("fingerprint"), fingerprint))
        tops = []
        for name in names:
            paths = ["" if p == "." else p for p in name.split(",") if p and not p.startswith("(")]
            for path in paths:
                try:
                    root.get_submodule(path)
                except AttributeError:
                    self.refuse("plan", "the plan names module %s, which this program does not have: profile this "
                                "program and plan again" % path)
            tops.append(paths)
        return tops, "the plan's %d units" % (len(tops) - 2)

    def refuse(self, what, text):
        self.send("refuse", what=what, text=text)
        self.finish("refused")
        self.on = False
        raise SystemExit(2)

    def members_all(self, side):
        """Module paths of the layer before (0) or after (1) the blocks, by
        the plan (a plan carries the names its profile saw)."""
        names = self.cfg.get("plan", {}).get("layer_names", [])
        if not names:
            return []
        text = names[0] if side == 0 else names[-1]
        return [n for n in text.split(",") if n and not n.startswith("(")]

    def where_text(self):
        m = self.innermost()
        path = self.path_of.get(id(m), "") if m is not None else ""
        return "layer %d%s" % (self.layer, (" (module %s)" % path) if path else "")

    def innermost(self, frames=None):
        """The innermost module whose forward is running on this thread:
        from the Python frames (a module's call or forward, whose `self` is
        it), since the quiet modules keep off the stack; the stack's top
        where the frames have none (a backward, on autograd's thread).
        frames: an exception's, innermost first."""
        for m in _running_modules(self.torch, frames if frames is not None else _outward(sys._getframe(1))):
            if id(m) in self.path_of or id(m) in self.other_models:
                return m
        return self.stack[-1] if self.stack else None

    def detect_precision(self, root):
        torch = self.torch
        dt = None
        try:
            if self.device_is_cuda(root) and torch.is_autocast_enabled():
                dt = torch.get_autocast_gpu_dtype()
            elif torch.is_autocast_cpu_enabled():
                dt = torch.get_autocast_cpu_dtype()
        except Exception:
            dt = None
        self.autocast = dt
        if dt is None:
            dt = next((p.dtype for p in root.parameters()), torch.float32)
        return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dt, "fp32")

    def device_is_cuda(self, root):
        p = next(root.parameters(), None)
        return p is not None and p.device.type == "cuda"

    def storage_key(self, t):
        try:
            s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
            return s.data_ptr(), s.nbytes()
        except Exception:
            return 0, 0

    def label_params(self, root):
        """Parameters (or, under autocast, master weights) by their owner's
        layer; modules outside the list are layer 0 until a call says post."""
        cat = CAT["master"] if self.autocast is not None else CAT["param"]
        done = set()
        for path, m in root.named_modules():
            b = self.block_of.get(id(m))
            for p in m._parameters.values():
                if p is None or id(p) in done:
                    continue
                done.add(id(p))
                layer = self.param_layer.get(id(p))      # a plan's placement said already
                if layer is None:
                    layer = b + 1 if b is not None else 0
                    self.param_layer[id(p)] = layer
                if b is not None or self.applier is not None:
                    self.confirmed.add(id(p))
                self.relabel(p, cat, layer)

    def live_modules(self, skip):
        """The program's live modules whose ids are not in skip, each with
        its _subtree: (module, [modules], [params]); the walk made once
        while register() runs, anew at every other call."""
        live = self.live
        if live is None:
            live = _live_modules(self.torch)
            if self.keep_live:
                self.live = live
        for m in live:
            if id(m) not in skip:
                yield (m,) + _subtree(m)

    def held_models(self):
        """The models the program holds beside those registered and no
        optimizer trains (yet): a frozen teacher, an EMA copy. Their weights
        are the program's, live for its whole run: each parameter counted
        in layer 0 (with the program's own code before the units, on the
        first stage's device, where they stay), not as the bytes of
        whatever layer is running. Found once, at the first training
        forward: the largest modules none of whose parameters a registered
        model or an optimizer holds."""
        known = set(self.param_layer)
        for o in self.optimizers:
            for g in o.param_groups:
                known.update(id(p) for p in g["params"])
        # (a module of the tree is known)
        found = [(m, mods, ps) for m, mods, ps in self.live_modules(self.path_of)
                 if ps and not any(id(p) in known for p in ps)]
        said = []
        for m, _, ps in _outermost(found):
            new = [p for p in ps if id(p) not in self.held_ids]
            self.held_ids.update(id(p) for p in new)
            self.in_layer0(new)
            nbytes = sum(p.numel() * p.element_size() for p in new if p.device == self.device)
            if nbytes:
                said.append((-nbytes, type(m).__name__))
        # the largest first: the live objects' order is the collector's, not the same run to run
        said = ["%s (%d parameter bytes)" % (name, -neg) for neg, name in sorted(said)]
        if said:
            self.lib.warn("models", "the program holds %s besides %s that no optimizer held at its first training "
                          "forward: %s on %s; %s parameters are counted in layer 0 and stay where the program "
                          "put them" % ("a model" if len(said) == 1 else "%d models" % len(said),
                                        type(self.model).__name__, ", ".join(said), self.device,
                                        "its" if len(said) == 1 else "their"))

    def in_layer0(self, params):
        """Parameters of a model beside the split ones (held or trained):
        counted in layer 0, their gradients labelled with the models'."""
        cat = CAT["master"] if self.autocast is not None else CAT["param"]
        for p in params:
            self.param_layer[id(p)] = 0
            self.confirmed.add(id(p))
            self.relabel(p, cat, 0)
            if id(p) not in self.other_params:
                self.other_params[id(p)] = p
                weakref.finalize(p, self.forget_param, id(p))

    def forget_param(self, pid):
        """A parameter of a model beside the split ones is gone: its id may be
        another tensor's from now on."""
        self.param_layer.pop(pid, None)
        self.confirmed.discard(pid)
        self.held_ids.discard(pid)

    def another_model(self, module):
        """A model the program trains beside those registered, found only
        when it is called (its optimizer was made after the first model's
        first training forward, so co_trained could not see it): its
        parameters, gradients and optimizer state are the program's own,
        counted in layer 0 (the program's code before the units), and it
        stays where the program put it, on the first stage's device."""
        self.other_models.add(id(module))
        # (a model held at the first forward and trained now: counted in layer 0 already)
        new = [p for p in module.parameters() if id(p) not in self.param_layer or id(p) in self.held_ids]
        if not new:
            return          # a part of the split model called directly, or a module with no parameters
        self.in_layer0([p for p in new if id(p) not in self.held_ids])
        self.held_ids.difference_update(id(p) for p in new)
        nbytes = sum(p.numel() * p.element_size() for p in new)
        self.lib.warn("models", "the program trains a second model, %s (%d parameter bytes), besides %s, whose "
                      "optimizer was made after %s's first training forward: memsplit splits the models whose "
                      "optimizers are there by then; this one's parameters, gradients and optimizer state are "
                      "counted in layer 0 and stay on the first stage's device"
                      % (type(module).__name__, nbytes, type(self.model).__name__, type(self.model).__name__))

    def relabel(self, t, cat, layer, owner=None, run=None, at_start=False):
        """t's storage is of category cat in layer. Without the tensor
        tracker (GPU, diagnosis only) the storage is registered here, and the
        one it replaces for the same owner is let go. With run (a
        _history.Run), a step's many relabels go to the ledger together
        (flushed by the caller) where no plan places them."""
        if self.record is None and self.tracker is None:
            self.register_static(t, cat, layer, owner, run)
            return
        key, nbytes = self.storage_key(t)
        if not key or not nbytes or t.device.type != self.track_type:
            return
        if self.record is not None:
            # the record has every storage made since it started, in the ledger at its next
            # drain; one made before it is registered then
            self.record.label(key, cat, layer, _block_bytes(nbytes, self.cuda), at_start)
            return
        self.tracker.ensure(t, key, nbytes, cat, layer)
        self.lib.relabel(key, cat, layer)
        if self.applier is not None:      # a static tensor counts on its layer's stage
            self.lib.c.msb_move(key, self.applier.stage_of_layer.get(layer, 0))

    def relabel_many(self, items, cat, run, at_start=False):
        """relabel for a step's many tensors (every gradient, every
        optimizer state): items of (tensor, layer, owner). Without the
        tracker or the record, one the ledger already has, the same storage
        under the same label, is passed over here, with no call: a step has
        hundreds (ResNet-152: 934), and in a program bound by its CPU each
        microsecond of them is the step's."""
        if self.record is not None or self.tracker is not None:
            for t, layer, owner in items:
                self.relabel(t, cat, layer, owner=owner, run=run, at_start=at_start)
            return
        keys, labels, on_cuda = self.static_keys, self.key_label, self.track_type == "cuda"
        moves = []
        for t, layer, owner in items:
            old = keys.get((owner if isinstance(owner, tuple) else id(owner), cat))
            # static_move's own test, in its order of cost (is_cuda: device.type costs 5x)
            if old is not None and t.data_ptr() == old and labels.get(old) == (cat, layer) and \
                    t.storage_offset() == 0 and t.is_cuda == on_cuda:
                continue
            move = self.static_move(t, cat, layer, owner, False)     # (tested just above)
            if move is not None:
                moves.append(move)
        if moves:
            self.apply_static(moves, run)

    def register_static(self, t, cat, layer, owner, run):
        """relabel without the tracker or the record: t's storage is its
        owner's of category cat, in the ledger under (cat, layer)."""
        move = self.static_move(t, cat, layer, owner, run is not None)
        if move is not None:
            self.apply_static([move], run if run is not None else _history.Direct(self.lib))   # one alone: at once

    def static_move(self, t, cat, layer, owner, test_unchanged):
        """(slot, the key it had, t's storage key, its bytes, cat, layer)
        for register_static, or None where it is no storage of the tracked
        device's, or (test_unchanged: a step's relabels) where the ledger
        has it already."""
        slot = (owner if isinstance(owner, tuple) else id(owner if owner is not None else t), cat)
        old = self.static_keys.get(slot)
        if test_unchanged and old is not None and self.key_label.get(old) == (cat, layer) and \
                t.storage_offset() == 0 and t.data_ptr() == old and t.device.type == self.track_type:
            # a step's relabels (every gradient, every optimizer state, each step): one the ledger
            # has already, the same storage under the same label, costs no storage lookup. At
            # offset 0 the tensor's address is its storage's, the key registered
            return None
        key, nbytes = self.storage_key(t)
        if not key or not nbytes or t.device.type != self.track_type:
            return None
        return slot, old, key, nbytes, cat, layer

    def apply_static(self, moves, run):
        """The ledger's events for static_move's moves: every storage that
        goes is freed before any that comes is registered. The allocator
        gives a gradient it freed at zero_grad to another parameter's next
        one; registered one by one, a new storage at an address whose
        record was still there took that record's place, and then lost its
        own to that record's free (ResNet-18 on the CPU without the tracker:
        the ledger's gradients 44.7 MB after step 1, the truth, and 23.5 MB
        after step 8; tests/bridge/test_replay.py). A storage that another
        slot still holds in the ledger (its gradient freed unseen: no
        gradient for its parameter this step) is freed from that slot
        first."""
        for slot, old, key, _, _, _ in moves:
            if old and old != key and self.key_slot.get(old) == slot:
                run.add(b"f", old, 0, 0, 0)
                self.key_label.pop(old, None)
                self.key_slot.pop(old, None)
        for slot, old, key, nbytes, cat, layer in moves:
            if old == key and self.key_slot.get(key) == slot:
                run.add(b"r", key, 0, cat, layer)
                self.key_label[key] = (cat, layer)
                continue
            holder = self.key_slot.get(key)
            if holder is not None and holder != slot:
                run.add(b"f", key, 0, 0, 0)
                self.static_keys.pop(holder, None)
            self.static_keys[slot] = key
            self.key_slot[key] = slot
            dev = self.applier.stage_of_layer.get(layer, 0) if self.applier is not None else 0
            run.add(b"a", key, _block_bytes(nbytes, self.cuda), cat, layer, dev=dev)
            self.key_label[key] = (cat, layer)

    def member(self, module, layer):
        """A module outside the list runs in the first training forward."""
        if id(self.running) in self.first_done or id(module) in self.list_ancestors:
            return
        path = self.path_of.get(id(module))
        if path is None:
            return
        side = 0 if layer == 0 else 1
        if any(path == p or path.startswith(p + ".") for p in self.members[side]):
            return
        problem = _lib.name_problem(path, member=True) or \
            (len(",".join(self.members[side] + [path]).encode("utf-8")) > _lib.NAME_MAX and
             "with the other modules that run %s the blocks it makes that layer's name longer than the %d bytes "
             "memsplit keeps" % ("before" if side == 0 else "after", _lib.NAME_MAX))
        if problem:
            self.refuse("names", "memsplit cannot carry the module name %s: %s; rename the module"
                        % (_lib.shown(path), problem))
        self.members[side].append(path)
        self.send("member", l=layer, module=path)
        if layer != 0:
            cat = CAT["master"] if self.autocast is not None else CAT["param"]
            for p in module.parameters():
                if id(p) not in self.confirmed:
                    self.param_layer[id(p)] = layer
                    self.relabel(p, cat, layer)
        for p in module.parameters():
            self.confirmed.add(id(p))

    # ---- module hooks ----------------------------------------------------
    def pre_hook(self, module, inputs):
        if not self.on or (self.block_depth and id(module) in self.quiet):
            return None       # (a quiet module at the top level, outside its unit, is heard)
        if self.outer_call is not None:
            if _running(self.torch, self.outer_call):
                return None   # inside a parametrization called outside any forward
            self.outer_call = None      # an exception skipped its post hook
        if not self.stack and isinstance(module, self.not_models):
            self.outer_call = module    # a parametrization making its module's weight outside any forward
            return None
        torch = self.torch
        if id(module) in self.roots and self.stack and not _running(self.torch, self.stack[-1]):
            self.stack, self.block_depth = [], 0    # an exception skipped the post hooks
        self.stack.append(module)
        inside = self.block_of.get(id(module))
        if inside is not None:
            self.block_depth += 1
        if self.root is None:
            # (a call that makes a lazy module's parameters, LazyLinear's dummy batch, is no
            # training forward: the model is registered at the next, whole)
            if len(self.stack) == 1 and module.training and torch.is_grad_enabled() and \
                    not _uninitialized(torch, module):
                if not self.register(module):
                    return None
                inside = self.block_of.get(id(module))
                if inside is not None:          # the model is one module: itself the unit just entered
                    self.block_depth += 1
            else:
                return None
        if self.global_hooks is not None and (id(module) not in self.path_of or id(module) in self.quiet):
            self.heard[id(module)] = module     # a module outside the tree, or a quiet one called outside its unit
        if self.in_backward:
            # a recomputed forward (activation checkpointing) stays in backward: the unit's
            # recompute is its own backward's work, which begins there
            if inside is not None and torch.is_grad_enabled() and self.phase == PH_BACKWARD:
                if inside + 1 not in self.recomputed:
                    self.recomputed.add(inside + 1)
                    self.send("recompute", l=inside + 1)
                if inside + 1 != self.layer:
                    self.transition(inside + 1, PH_BACKWARD)
            return None
        if len(self.stack) == 1 and id(module) not in self.roots and id(module) not in self.other_models \
                and module.training and torch.is_grad_enabled():
            self.another_model(module)
        if id(module) in self.roots and len(self.stack) == 1:
            training = module.training and torch.is_grad_enabled()
            self.in_root = True
            self.list_entered = False
            self.outside = False
            self.running = module
            if training and module is self.model:    # (a step's forwards: the first model's)
                self.forwards += 1
                if not self.pass_open:
                    self.passes += 1
                    self.pass_open = True
            self.transition(0, PH_FORWARD if training else PH_VALIDATION)
            if id(module) in self.after_models:
                self.list_entered = True
                self.transition(self.n_blocks + 1, self.phase)
            if training and self.micro_batch is None and module is self.model:
                self.micro_batch = _batch_of(torch, inputs)
            if inside is not None:
                # a model that is one module is its own unit: its forward is that unit's
                self.list_entered = True
                self.transition(inside + 1, self.phase, self.boundary(inputs, inside))
            return None
        if self.micro_batch is None and self.phase == PH_FORWARD:
            self.micro_batch = _batch_of(torch, inputs)   # the root took keyword arguments
        if self.borrowed(module, inputs):
            return None
        if inside is not None:
            if inside + 1 != self.layer and self.block_depth == 1:
                self.list_entered = True
                # the output of the layer that ran last enters here (registration's previous
                # unit where the program calls its units in another order)
                xin = self.boundary(inputs, self.layer if 0 <= self.layer <= self.n_blocks else inside)
                self.transition(inside + 1, self.phase, xin)
        elif self.block_depth == 0 and id(module) not in self.list_ancestors:
            # (a module opened to reach the units runs no code of a unit of its own: its code
            # belongs to the unit that ran before it)
            # a module the program calls outside the model (its loss) works
            # on the model's outputs, on the root device: the "outside" layer
            layer = (self.n_blocks + 1 if self.list_entered else 0) if self.in_root else self.n_blocks + 2
            if layer != self.layer and (self.in_root or self.first_forward_started()):
                last = self.layer if 0 <= self.layer <= self.n_blocks else self.n_blocks   # the unit that ran last
                xin = self.boundary(inputs, last) if layer == self.n_blocks + 1 else -1
                self.transition(layer, self.phase, xin)
            if self.phase == PH_FORWARD:
                self.member(module, layer)
        return None

    def borrowed(self, module, inputs=()):
        """A module whose own weights another layer owns (a tied lm_head)
        runs where those weights live: its work counts with that layer until
        it returns. True when it switched the layer."""
        if not self.first_done and self.phase != PH_FORWARD:
            return False
        for p in module._parameters.values():
            if p is None:
                continue
            owner = self.param_layer.get(id(p))
            if owner is not None and owner != self.layer and id(p) in self.confirmed and \
                    (self.block_of.get(id(module)) is None or owner != self.block_of[id(module)] + 1) and \
                    self.is_tied(p):
                if self.phase == PH_FORWARD and self.block_depth == 0:
                    self.member(module, self.layer)      # it still runs here, by the program's order
                if self.phase == PH_FORWARD and self.torch.is_grad_enabled():
                    # its backward runs where its weights are too: it ends
                    # when the gradients of its inputs are done
                    for t in _tensors(self.torch, inputs):
                        if t.requires_grad:
                            t.register_hook(_BorrowMark(self, self.layer))
                self.borrow.append((module, self.layer))
                self.transition(owner, self.phase)
                return True
            break
        return False

    def is_tied(self, p):
        return self.tied_params is not None and id(p) in self.tied_params

    def first_forward_started(self):
        return self.forwards > 0

    def post_hook(self, module, inputs, output):
        if not self.on or (id(module) in self.quiet and not (self.stack and self.stack[-1] is module)):
            return None       # its pre_hook kept quiet: it is not on the stack
        if self.outer_call is not None:
            if module is self.outer_call:
                self.outer_call = None
            return None
        if self.stack and self.stack[-1] is module:
            self.stack.pop()
        elif module in self.stack:
            while self.stack and self.stack.pop() is not module:
                pass
        unit = self.block_of.get(id(module))
        if unit is not None and self.block_depth > 0:
            self.block_depth -= 1
            if self.block_depth == 0:
                self.output_marks(output, unit + 1)
        elif unit is None and self.block_depth == 0 and self.in_root and self.layer == 0 and \
                id(module) not in self.list_ancestors and id(module) not in self.roots:
            self.output_marks(output, 0)          # a module of the layer before the units
        if self.borrow and self.borrow[-1][0] is module:
            _, back = self.borrow.pop()
            training = self.phase == PH_FORWARD and self.torch.is_grad_enabled()
            if training:
                # its backward begins when its outputs' gradients are there
                for t in _tensors(self.torch, output):
                    if t.requires_grad:
                        t.register_hook(_BorrowMark(self, self.layer))
            if training and self.in_root and self.list_entered and len(self.stack) == 1 and \
                    id(self.stack[0]) in self.roots and not self.in_backward:
                # back in the root's own code after the list (HF computes its
                # loss there from labels=): that code works on these outputs
                # where they are, as a loss after the forward would, so it is
                # the "outside" layer, made by the weights' owner; its
                # backward ends when these outputs' gradients are there
                outs = list(_tensors(self.torch, output))
                xin = sum(t.numel() * t.element_size() for t in outs)
                self.outside_early = True
                self.transition(self.n_blocks + 2, self.phase, xin, self.layer)
            else:
                self.transition(back, self.phase)
        if id(module) in self.roots and not self.stack:
            self.in_root = False
            if self.phase in (PH_FORWARD, PH_VALIDATION) and not self.in_backward:
                early = self.outside_early
                self.outside_early = False
                if self.phase == PH_FORWARD:
                    self.first_done.add(id(module))
                    # the loss and whatever the program computes from the
                    # model's outputs: a layer of its own ("outside"), whose
                    # backward ends where the model's outputs' gradients are
                    # done. A scalar output (a loss the model computed
                    # itself) is where backward starts: its gradient is there
                    # at once and ends nothing, unless it is all there is.
                    marks = [t for t in _tensors(self.torch, output) if t.requires_grad]
                    if any(t.dim() > 0 for t in marks) or early:
                        marks = [t for t in marks if t.dim() > 0]
                    if self.torch.is_grad_enabled():
                        last = self.root_last.get(id(module), self.n_blocks + 1)
                        for t in marks:
                            t.register_hook(_BackwardMark(self, last))
                    self.outside = True
                if early and self.phase == PH_FORWARD:
                    return None     # the outside layer began where the borrowed module returned
                # xin: the model's outputs, which a plan brings back to the root
                # device; xl: the layer whose work made them (a tied lm_head: 0)
                outs = list(_tensors(self.torch, output))
                xin = sum(t.numel() * t.element_size() for t in outs)
                key = self.storage_key(outs[0])[0] if outs else 0
                if self.record is not None:     # the ledger learns the outputs at the drain, which asks then
                    xl = _history.OwnerOf(key, CAT["act"])
                else:
                    xl = self.lib.owner(key, CAT["act"]) if key else None
                self.transition(self.n_blocks + 2, self.phase, xin, -1 if xl is None else xl)
        return None

    def output_marks(self, output, layer):
        """A layer's outputs in a training forward: when their gradient is
        there (a tensor hook runs just before the node that made them), that
        layer's backward begins. The tensors entering the next layer mark
        the same moment in a chain; where the program's own code combines
        layers' outputs (an embedding sum, a skip) only these do."""
        # (a recompute in backward is followed as the forward was: the backward of what it
        # made runs next, in the program's own nested backward)
        if not self.torch.is_grad_enabled() or self.phase != (PH_BACKWARD if self.in_backward else PH_FORWARD):
            return
        for t in _tensors(self.torch, output):
            if t.requires_grad:
                t.register_hook(_BackwardMark(self, layer))

    def boundary(self, inputs, layer):
        """Gradient hooks on the tensors entering the next layer: when their
        gradient is complete, `layer`'s backward begins."""
        nbytes = 0
        for t in _tensors(self.torch, inputs):
            if t.is_floating_point():
                nbytes += t.numel() * t.element_size()
            if self.phase == PH_FORWARD and t.requires_grad and self.torch.is_grad_enabled():
                t.register_hook(_BackwardMark(self, layer))
        return nbytes

    # ---- which module calls run the hooks ----------------------------------
    def hear_all(self):
        """Every module call runs the hooks (torch's global module hooks):
        until the model is registered and a whole iteration has shown which
        modules the program calls, and again once it makes an optimizer
        whose parameters are not yet known (a model trained beside the
        others, found at its first call: another_model)."""
        for h in self.local_hooks:
            h.remove()
        self.local_hooks = []
        if self.global_hooks is None:
            mods = self.torch.nn.modules.module
            self.global_hooks = (mods.register_module_forward_pre_hook(self.pre_hook),
                                 mods.register_module_forward_hook(self.post_hook))

    def hear_needed(self):
        """At the end of the first whole iteration, the global hooks give
        way to hooks on the modules whose calls the hooks act on: every
        module of the tree but the quiet ones, and the modules outside it
        (or quiet ones called outside their unit) that the iteration called.
        While torch has a global hook, every module call takes its slow path
        (issue 40: about 1 ms a step of ResNet-152's 523 calls a forward on
        the H100's host); a module with no hook of its own takes the fast one."""
        keep = {id(m): m for m in self.root.modules() if id(m) not in self.quiet and id(m) not in self.opaque}
        keep.update(self.heard)
        for h in self.global_hooks:
            h.remove()
        self.global_hooks = None
        for m in keep.values():
            if isinstance(m, self.torch.jit.ScriptModule):     # takes no hooks of its own (torch.jit)
                self.local_hooks.append(_ScriptHooks(m, self.pre_hook, self.post_hook))
                continue
            self.local_hooks.append(_module_hook(m, "register_forward_pre_hook", self.pre_hook))
            self.local_hooks.append(_module_hook(m, "register_forward_hook", self.post_hook))

    def unknown_params(self, optimizers):
        """Whether an optimizer holds a parameter that no model the bridge
        knows owns, or one of a model only held so far (the hooks stay
        global: its model is found at its call, as one trained)."""
        held = self.held_ids
        return any(id(p) not in self.param_layer or id(p) in held
                   for o in optimizers for g in o.param_groups for p in g["params"])

    def optimizer_made(self, opt):
        if self.global_hooks is None and self.unknown_params([opt]):
            self.hear_all()

    # ---- backward, optimizer, steps ---------------------------------------
    def backward_begins(self, args=()):
        if self.in_backward == 0 and args and isinstance(args[0], self.torch.Tensor) and args[0].numel() == 1 \
                and not self.scaled_loss:
            self.losses.append(args[0].detach())
        self.scaled_loss = False
        if self.in_backward == 0:
            self.pass_open = False
        self.in_backward += 1
        if self.in_backward == 1 and self.root is not None and self.on:
            self.transition(self.n_blocks + 2 if self.outside else self.n_blocks + 1, PH_BACKWARD)
            if self.record is not None and args and isinstance(args[0], self.torch.Tensor) and \
                    args[0].requires_grad:
                # backward runs on its own thread on a GPU: tagged from its first moment
                args[0].register_hook(_TagHere(self.record))

    def backward_ends(self):
        self.in_backward -= 1
        if self.in_backward > 0 or self.root is None or not self.on:
            return
        # what follows backward until the step ends (gradient clipping, the
        # update) is the optimizer phase
        self.transition(-1, PH_OPTIMIZER)
        run = _history.Run(self.lib)
        layer_of = self.param_layer
        self.relabel_many(((p.grad, layer_of[id(p)], p) for p in self.grad_params() if p.grad is not None),
                          CAT["grad"], run, at_start=True)
        run.flush(self.phase)
        if self.record is not None:
            self.record.optimizer_begins()

    def grad_params(self):
        """The parameters whose gradients a step's end labels: the split
        models' and those beside them, each with a layer. The split models'
        are walked again only when they may have changed (a parameter
        registered anywhere, a layer given or forgotten, another root): a
        ResNet-152's walk of its modules took 0.7 ms a step on the build
        machine. The bridge holds them weakly, as it holds those beside,
        which are read fresh each time: a parameter or a model the program
        drops (a copy it loaded, shapes.sh "saved") must go with it."""
        at = (id(self.root), len(self.param_layer), _PARAMS_SET[0])
        layer_of = self.param_layer
        params = None
        if self.grad_walk is not None and self.grad_walk[0] == at:
            params = [r() for r in self.grad_walk[1]]
            if any(p is None for p in params):
                params = None           # one gone that no registration said (a module's _parameters changed)
        if params is None:
            params = [p for p in self.root.parameters() if id(p) in layer_of]
            self.grad_walk = (at, [weakref.ref(p) for p in params])
        beside = [p for p in self.other_params.values() if id(p) in layer_of]
        return params + beside if beside else params

    def backward_failed(self):
        self.in_backward -= 1      # it raised (out of memory): no optimizer phase follows

    def grad_begins(self, args=()):
        """torch.autograd.grad: a backward the program computes inside its
        step (a gradient penalty, a physics loss's derivatives), after
        which its forward goes on: the layers' backward as backward() has
        them, its outputs no loss, and no optimizer phase after it."""
        self.grad_from.append((self.layer, self.phase))
        self.in_backward += 1
        if self.in_backward == 1 and self.root is not None and self.on:
            self.transition(self.layer, PH_BACKWARD)
            out = args[0] if args else None
            if self.record is not None and isinstance(out, self.torch.Tensor) and out.requires_grad:
                out.register_hook(_TagHere(self.record))

    def grad_ends(self, args=()):
        self.in_backward -= 1
        layer, phase = self.grad_from.pop()
        if self.in_backward == 0 and self.root is not None and self.on and (layer, phase) != (self.layer, self.phase):
            self.transition(layer, phase)        # back where the program asked for the gradients

    def step_failed(self):
        self.in_step -= 1          # it raised (its closure ran out of memory): the step did not end

    def step_begins(self, opt=None):
        self.in_step += 1
        if self.in_step == 1:
            self.stepping = opt     # whose state an OOM in the step was making (oom)
        if self.in_step == 1 and self.root is not None and self.on and self.phase != PH_OPTIMIZER:
            self.transition(-1, PH_OPTIMIZER)
            if self.record is not None:
                self.record.optimizer_begins()

    def step_ends(self, optimizers, opt=None):
        self.in_step -= 1
        if self.in_step > 0 or self.root is None or not self.on:
            return
        self.label_state(optimizers)
        # a step of the trial is a whole iteration of the program: every optimizer it made has
        # stepped (a GAN's discriminator, then its generator); one that steps again before the
        # others did ends the iteration too (the others do not step every iteration)
        if opt is not None:
            again = id(opt) in self.stepped
            self.stepped.add(id(opt))
            if not again and any(id(o) not in self.stepped for o in self.optimizers):
                return
        self.stepped = set()
        if self.global_hooks is not None:
            if not self.unknown_params(self.optimizers):
                self.hear_needed()
            self.heard = {}     # one iteration's: a module made anew each step is not kept
        if self.record is not None:
            self.record.optimizer_ends()
        self.transition(-1, PH_INIT)
        if self.record is not None:
            self.record.drain()       # the step's allocations and labels, its last interval closed, before its event
        self.steps += 1
        self.say_order()
        self.send_late()           # the step before's times and loss: done on the GPU long since
        # this step's marks and losses are read at the next step's end (or the program's): on a
        # GPU the bridge then never waits for the GPU, and the program's own work after its step
        # still overlaps the GPU's (the CPU does the same, so that one path is tested)
        late = (self.steps, self.times, [self.to_host(x) for x in self.losses])
        self.times, self.losses = self.times[-1:], []
        peaks = peak_cats = None
        if self.applier is not None:
            # the ledger's peak of each stage, and what it held by category (vocab.h's
            # order); None for a stage on a device whose tensors are not counted (a CPU
            # stage beside a GPU: the ledger follows the GPU's tensors only)
            counted = [d.type == self.track_type for d in self.applier.devices]
            peaks = [int(self.lib.c.msb_peak(i)) if c else None for i, c in enumerate(counted)]
            peak_cats = [[int(self.lib.c.msb_peak_cat(i, k)) for k in range(len(CAT))] if c else None
                         for i, c in enumerate(counted)]
        mem = None
        if self.cuda:
            free, total = self.torch.cuda.mem_get_info(self.device)
            mem = [free, total, self.counter(self.device, "reserved_bytes", "current")]
        dev_peaks = dev_context = None
        if self.cuda and self.applier is not None:
            # the caching allocator's peak on each GPU a stage is on (a CPU stage has no such
            # counter), and what that GPU holds beyond the allocator: its context and libraries
            gpus = [d for d in self.applier.by_device if d.startswith("cuda")]
            dev_peaks = {d: self.device_peak(d) for d in gpus}
            dev_context = {d: self.device_context(d) for d in gpus}
        self.send("step", n=self.steps, accum=self.passes, micro_batch=self.micro_batch, mem=mem,
                  stage_peaks=peaks, stage_peak_cats=peak_cats, device_peaks=dev_peaks,
                  device_context=dev_context, late=True)
        self.late = late
        self.forwards = self.passes = 0
        self.pass_open = False
        if self.steps_wanted and self.steps >= self.steps_wanted:
            self.finish("steps")
            raise SystemExit(0)

    def step_data(self, late):
        """(step, [[layer, phase, ms] for each interval, in order], the
        loss summed) of a step's marks and losses (waits for the GPU to
        reach its last mark)."""
        n, times, losses = late
        if self.cuda and times:
            times[-1][2].synchronize()
        out = []
        for (l0, p0, t0), (_, _, t1) in zip(times, times[1:]):
            ms = t0.elapsed_time(t1) if self.cuda else (t1 - t0) * 1e3
            out.append([l0, p0, round(ms, 4)])
        if self.cuda:
            # read, so free to record again; the last begins the next step's marks (step_ends)
            self.spare_events.extend(t for _, _, t in times[:-1])
        for _, ev in losses:
            if ev is not None:
                ev.synchronize()
        loss = float(sum(float(h) for h, _ in losses)) if losses else None
        return n, out, loss

    def to_host(self, x):
        """(a host copy of the loss x, the event after which it is there):
        a GPU's loss is copied without waiting (float() would wait for all
        the work the program has queued), read at the next step's end."""
        if not x.is_cuda:
            return x, None
        h = x.to("cpu", non_blocking=True)
        ev = self.torch.cuda.Event()
        ev.record(self.torch.cuda.current_stream(x.device))
        return h, ev

    def send_late(self):
        """The step whose intervals and loss were left for later (event
        stepdata)."""
        late, self.late = self.late, None
        if late is not None:
            n, ivs, loss = self.step_data(late)
            self.send("stepdata", n=n, intervals=ivs, loss=loss)

    def oom(self, requested, source, message, device_free=-1, stage=None, ordinal=None, frames=None):
        """The program ran out: where (the innermost module, layer, phase,
        the step it is in) and, under a plan, on which stage: the ledger's
        (stage) or the stage alone on the GPU that refused (ordinal).
        frames: where it was, innermost first (default: this thread's now)."""
        made = self.state_in_making() if self.phase == PH_OPTIMIZER and self.root is not None else None
        if self.record is not None:
            self.record.drain()      # what was live when it ran out (the allocator's lock is not held here)
        m = self.innermost(frames)
        path = self.path_of.get(id(m), type(m).__name__ if m is not None else "")
        if made is not None:
            path, m = made
        ap = self.applier
        if stage is None and ap is not None and ordinal is not None:
            on = ap.by_device.get("cuda:%d" % ordinal, [])
            stage = on[0] if len(on) == 1 else (ap.stage_now() if on else None)
        extra = {} if made is None else {"c": CAT["optim"]}    # the state being made is what it asked for
        self.send("oom", l=self.layer, p=self.phase, module=path,
                  type=m if isinstance(m, str) else type(m).__name__ if m is not None else "", **extra,
                  requested=int(requested), source=source, message=message[:400], free=int(device_free),
                  step=self.steps + 1, stage=-1 if stage is None else int(stage))

    def label_state(self, optimizers):
        """Every state tensor of the optimizers is optimizer state of its
        parameter's layer (one batch to the ledger)."""
        run = _history.Run(self.lib)
        tensor, layer_of = self.torch.Tensor, self.param_layer
        self.relabel_many(((v, layer_of.get(id(p), 0), (id(p), name)) for o in optimizers
                           for p, st in o.state.items() for name, v in st.items() if isinstance(v, tensor)),
                          CAT["optim"], run)
        run.flush(self.phase)

    def state_in_making(self):
        """An OOM in the optimizer's step: the state the optimizers made
        so far is labelled optimizer state, of its parameter's layer (the
        step's end would have), and the parameter whose state the stepping
        optimizer was making is found: the last, in its order, with any
        state, where its parameters with a gradient do not all have as much
        (where they do, the OOM is in the update itself; where none has any,
        the optimizer makes its state after the update, as SGD's momentum,
        and which parameter it was at is not known). Returns (its path,
        "<optimizer> state") or None."""
        self.label_state(self.optimizers)
        o = self.stepping
        if o is None:
            return None
        params = [p for g in o.param_groups for p in g["params"]]
        sizes = {len(o.state[p]) if p in o.state else 0 for p in params if p.grad is not None}
        last = next((p for p in reversed(params) if p in o.state and len(o.state[p])), None)
        if last is None or len(sizes) < 2:
            return None
        name = next((n for n, q in self.root.named_parameters() if q is last), "a parameter outside the split models")
        return name, "%s state" % type(o).__name__

    def earlier(self, a, b):
        """Layer a comes before layer b in the program's order (the
        profile's numbering): units by their first calls, layer 0 before
        them, the layers after the model after them."""
        rank = self.rank
        return rank.get(a, a) < rank.get(b, b)

    def say_order(self):
        """The units in the order of their first forward calls in the first
        iteration, once, when it is not registration's; a plan's pass has the
        plan's order. A unit not called then (a block LayerDrop skipped, an
        expert no token was routed to) follows the unit registered before it,
        as registration has it, so that it stays beside its neighbours."""
        calls, self.first_calls, self.first_seen = self.first_calls, None, None
        n = self.n_blocks
        if calls is None or self.cfg.get("plan") is not None or not n:
            return
        seen = [layer for layer in calls if 1 <= layer <= n]
        called = set(seen)
        follows, prev = {}, 0         # a called unit (0: none before) -> the uncalled after it
        for layer in range(1, n + 1):
            if layer in called:
                prev = layer
            else:
                follows.setdefault(prev, []).append(layer)
        order = list(follows.get(0, []))
        for layer in seen:
            order.append(layer)
            order.extend(follows.get(layer, []))
        self.rank = {layer: k for k, layer in enumerate(order, 1)}
        if order != list(range(1, n + 1)):
            self.send("order", units=order)

    def finish(self, reason, exc=None):
        if self.done_sent:
            return
        self.done_sent = True
        self.say_order()
        try:
            _checkpoints.tidy(self)
        except Exception as e:          # the pass's end is said however its folders went
            self.lib.warn("checkpoint", "the pass's checkpoint folders were not all removed: %s" % str(e)[:200])
        try:
            self.send_late()
        except Exception as e:           # at exit CUDA may be gone
            self.lib.warn("steps", "the last step's times and loss were lost at the program's end: %s" % str(e)[:200])
        if self.record is not None:
            try:
                self.record.drain()
                self.record.stop()
            except Exception as e:       # at exit CUDA may be gone: the stream says so
                self.lib.warn("record", "the last part of the allocator's record was lost at the program's end: "
                              "%s" % str(e)[:200])
        self.send("done", reason=reason, steps=self.steps, exc=exc or "")


# the frames of a module's work: its call and its forward
_MODULE_FRAMES = frozenset(("forward", "_call_impl", "_wrapped_call_impl", "__call__"))


def _subtree(m):
    """A module's submodules and parameters read from its own dicts, not
    through its methods: any live module of the program is looked at
    (held_models), and one may override parameters() or modules() with
    code of its own (a generator that never ends). ([modules], [params]),
    each once."""
    mods, params, seen, todo = [], [], set(), [m]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        mods.append(x)
        try:
            d = vars(x)
        except TypeError:
            continue
        own, subs = d.get("_parameters"), d.get("_modules")
        for p in (own.values() if isinstance(own, dict) else ()):
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        todo.extend(c for c in (subs.values() if isinstance(subs, dict) else ()) if c is not None)
    return mods, params


def _live_modules(torch):
    """The program's live modules, from the collector's objects."""
    import gc
    Module = torch.nn.Module
    # type(), not isinstance: isinstance also reads __class__, which some objects
    # answer with a warning of their own (torch.distributed.reduce_op)
    return [m for m in gc.get_objects() if issubclass(type(m), Module)]


def _outermost(found):
    """Of (module, [modules], [params]) found, those whose module no other found one holds."""
    inner = {id(c) for m, mods, _ in found for c in mods if c is not m}
    return [x for x in found if id(x[0]) not in inner]


def _model_names(torch, models):
    """Names for models trained together, as the program names them: the
    variable or attribute that holds each in the program's own frames (a
    script's G and D, a LightningModule's generator and discriminator);
    model<i> where none does."""
    skip = (os.path.dirname(os.path.abspath(torch.__file__)), os.path.dirname(os.path.abspath(__file__)))
    names = [None] * len(models)
    for f in _outward(sys._getframe(1)):
        if None not in names:
            break
        if not os.path.abspath(f.f_code.co_filename).startswith(skip):
            for k, v in list(f.f_locals.items()):
                held = [(k, v)] if k != "self" else []
                if isinstance(v, torch.nn.Module):
                    held += list(v._modules.items())
                elif k == "self":            # a trainer object of the program's own: its attributes
                    held += [(a, x) for a, x in list(getattr(v, "__dict__", {}).items())
                             if isinstance(x, torch.nn.Module)]
                for name, x in held:
                    for i, m in enumerate(models):
                        # (a name nn.Module has itself, `train` say, cannot name a child)
                        if x is m and names[i] is None and name.isidentifier() and name not in names and \
                                not hasattr(torch.nn.Module, name):
                            names[i] = name
    for i in range(len(models)):
        if names[i] is None:
            names[i] = next("model%d" % j for j in itertools.count(i) if "model%d" % j not in names)
    return names


def _outward(f):
    """Frame f and those that called it, innermost first."""
    while f is not None:
        yield f
        f = f.f_back


def _uninitialized(torch, module):
    """Whether module holds a lazy parameter not yet made (a LazyLinear
    before its first call, which makes it)."""
    lazy = getattr(torch.nn.parameter, "UninitializedParameter", None)
    return lazy is not None and any(isinstance(p, lazy) for p in module.parameters())


def _running(torch, module):
    """Whether module's call or forward is running on this thread (a model
    called inside another's forward), rather than left on the stack by an
    exception that skipped its post hook."""
    return any(m is module for m in _running_modules(torch, _outward(sys._getframe(1))))


def _running_modules(torch, frames):
    """The modules of those frames (in their order) that are a module's
    call or forward: the `self` of each."""
    for f in frames:
        if f.f_code.co_name in _MODULE_FRAMES:
            me = f.f_locals.get("self")
            if isinstance(me, torch.nn.Module):
                yield me


class _BackwardMark:
    """A gradient hook: the layer's backward begins (returns None)."""

    def __init__(self, s, layer):
        self.s, self.layer = weakref.ref(s), layer

    def __call__(self, grad):
        s = self.s()
        if s is not None and s.on and s.phase == PH_BACKWARD and s.earlier(self.layer, s.layer):
            s.transition(self.layer, PH_BACKWARD)
        return None


class _TagHere:
    """A gradient hook on the tensor backward starts from: backward's own
    thread is tagged with the interval (the allocator's record)."""

    def __init__(self, record):
        self.record = weakref.ref(record)

    def __call__(self, grad):
        r = self.record()
        if r is not None:
            r.tag_here()
        return None


class _BorrowMark:
    """A gradient hook around a module that borrows another layer's weights
    (a tied lm_head): its backward is that layer's, as its forward was."""

    def __init__(self, s, layer):
        self.s, self.layer = weakref.ref(s), layer

    def __call__(self, grad):
        s = self.s()
        if s is not None and s.on and s.phase == PH_BACKWARD and s.layer != self.layer:
            s.transition(self.layer, PH_BACKWARD)
        return None


def _tensors(torch, obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            yield from _tensors(torch, x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(torch, x)


def _ordinal(torch, device):
    if device.type != "cuda":
        return 0
    return device.index if device.index is not None else torch.cuda.current_device()


def _block_bytes(nbytes, cuda):
    """Bytes as the caching allocator counts a request: 512-byte blocks."""
    return (nbytes + 511) // 512 * 512 if cuda else nbytes


def _batch_of(torch, inputs):
    for t in _tensors(torch, inputs):
        if t.dim() >= 1:
            return int(t.shape[0])
    return None


# ---- installing ------------------------------------------------------------

def _module_hook(m, how, fn):
    """fn as m's own hook, before the program's own hooks on m (as a global
    hook runs), where torch can say so (prepend: torch 2.0)."""
    try:
        return getattr(m, how)(fn, prepend=True)
    except TypeError:
        return getattr(m, how)(fn)


def _quiet_while_compiling(torch, s):
    """torch's own calls of the program's modules that are no training:
    the hooks stand aside while they run (no model registered there, no
    forward counted). torch.jit.trace runs the modules to compile them;
    the per-operator trace's dispatch mode stands aside there too, since
    the tracer would record it into the graph (torch 1.13 then fails the
    trace's own check): what tracing allocates is not counted. A
    parametrization (spectral_norm, weight_norm) is run once as it is
    registered; what it allocates counts."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    def quiet(owner, name, mode_aside):
        real = getattr(owner, name, None) if owner is not None else None
        if real is None or getattr(real, "_memsplit", False):
            return

        def run(*args, **kwargs):
            was, s.on = s.on, False
            mode = s.tracker.mode if mode_aside and s.tracker is not None else None
            aside = mode is not None and _get_current_dispatch_mode() is mode
            if aside:
                mode.__exit__(None, None, None)
            try:
                return real(*args, **kwargs)
            finally:
                if aside:
                    mode.__enter__()
                s.on = was

        functools.update_wrapper(run, real)
        run._memsplit = True
        setattr(owner, name, run)

    quiet(torch.jit, "trace", True)
    quiet(torch.jit, "trace_module", True)
    quiet(getattr(torch.nn.utils, "parametrize", None), "register_parametrization", False)


class _ScriptHooks:
    """The two hooks of a TorchScript module, which refuses hooks of its
    own: its forward (a Python attribute, which its call runs, as the
    applier's wrapper does) runs them around itself, as torch runs a
    module's hooks (none of the program's: it can register none there)."""

    def __init__(self, m, pre, post):
        self.m, self.had = m, m.__dict__.get("forward")
        fwd = m.forward

        @functools.wraps(fwd)
        def forward(*args, **kwargs):
            pre(m, args)
            out = fwd(*args, **kwargs)
            post(m, args, out)
            return out

        self.mine = forward
        m.forward = forward

    def remove(self):
        m = self.m
        if m.__dict__.get("forward") is self.mine:       # not wrapped again since
            if self.had is None:
                del m.__dict__["forward"]
            else:
                m.forward = self.had
        self.m = None


def _wrap(owner, name, before, after, failed=None):
    """owner.name calls before(args), then after(args) when it returns,
    or failed(args) (default: after) when it raises: an optimizer step
    whose closure ran out of memory did not end, and is not counted."""
    fn = getattr(owner, name)
    if getattr(fn, "_memsplit", False):
        return

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        before(args)
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            (failed or after)(args)
            raise
        after(args)
        return out

    wrapped._memsplit = True
    setattr(owner, name, wrapped)


def start(torch, lib, cfg):
    v = _version(torch)
    cuda = torch.cuda.is_available()
    lightning = sys.modules.get("lightning") or sys.modules.get("pytorch_lightning")
    lib.send("torch", version=torch.__version__, cuda=cuda, lightning=getattr(lightning, "__version__", None))
    if not (SUPPORTED[0] <= v < SUPPORTED[1]):
        lib.send("refuse", what="torch", text="torch %s is not supported: memsplit's bridge supports torch 1.13 "
                 "to 2.x" % torch.__version__)
        return
    s = Session(torch, lib, cfg)
    if not s.per_interval:
        # a rerun (memsplit train, doctor's training pass): the program's own speed is the point,
        # so a unit boundary's line waits (at most ~10 ms) to go with the next; the diagnostic
        # passes keep every line at once, for a program that dies (msb.h)
        lib.c.msb_batch_transitions(1)
    capacity = int(cfg.get("capacity", 0) or 0)
    if capacity and cuda:
        _ballast_at_cuda_init(torch, lib, capacity)
    tensors = cfg.get("trace", "tensors") == "tensors"
    # the tensor-level record on a GPU: the caching allocator's own trace, no Python per operator
    allocator = tensors and cuda and cfg.get("plan") is None and _allocator_record(torch, cfg)
    if cfg.get("observe", True) is False:
        _watch_unobserved(torch, s)      # the ballast alone: where the program dies by itself
        return
    elif capacity and not allocator:
        # the ledger's cap (the CPU, virtual devices); the allocator's record is made after
        # the fact, and on its GPU the ballast is the cap
        lib.c.msb_set_capacity(0, capacity)
    if cuda:
        _keep_peaks(torch, s)
    _refuse_compile(torch, s)
    _warn_profiler(torch, lib)
    s.hear_all()
    _wrap(torch.Tensor, "backward", lambda a: s.backward_begins(a), lambda a: s.backward_ends(),
          lambda a: s.backward_failed())
    _wrap(torch.autograd, "backward", lambda a: s.backward_begins(a), lambda a: s.backward_ends(),
          lambda a: s.backward_failed())
    _wrap(torch.autograd, "grad", s.grad_begins, s.grad_ends)
    if cfg.get("plan") is not None:
        _install_plan(torch, lib, s, cfg["plan"], cuda)
    _install_step_wrappers(torch, s)
    _checkpoints.install(torch, s)
    _pickle.install(torch)
    if allocator:
        s.record = _history.Record(torch, s, _history.Allocator(torch))
    elif tensors or not cuda:
        from . import _track
        s.tracker = _track.start(torch, s)
        emulate = _record_choice(cfg) == "allocator"
        if not cuda and emulate and cfg.get("plan") is None and not capacity:
            # the allocator's record on the CPU (tests): the tracker stands in for the GPU's allocator
            s.tracker.emulate = _history.Emulated()
            s.record = _history.Record(torch, s, s.tracker.emulate)
    _quiet_while_compiling(torch, s)
    _install_oom_observer(torch, s)
    _watch_exit(s)
    os.register_at_fork(after_in_child=lambda: setattr(s, "on", False))


def _record_choice(cfg):
    """How the tensor-level record is made: "allocator" (the GPU's default
    where torch has the allocator's trace with metadata; on the CPU, the
    dispatcher standing in for it), "dispatch" (the per-operator trace), or
    "" (the default). MEMSPLIT_RECORD, for tests and comparisons
    (docs/bridge.md, "Tensor tracking")."""
    return cfg.get("record", os.environ.get("MEMSPLIT_RECORD", ""))


def _allocator_record(torch, cfg):
    return _record_choice(cfg) != "dispatch" and _history.available(torch)


def _keep_peaks(torch, s):
    """In a trial the bridge resets the caching allocator's peaks at every transition;
    the program's own max_memory_allocated/reserved and memory_stats peaks
    must not notice, so they report the peak since the program's last reset."""
    m = torch.cuda.memory
    for name in ("max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats", "memory_stats"):
        s.real[name] = getattr(m, name)
    # the counters the bridge reads at every transition, straight from C where torch has them
    nested = getattr(torch._C, "_cuda_memoryStats", None)
    reset = getattr(torch._C, "_cuda_resetPeakMemoryStats", None)
    s.real["nested_stats"] = nested if nested is not None else \
        (lambda d: m.memory_stats_as_nested_dict(d))
    s.real["reset_peaks"] = reset if reset is not None else s.real["reset_peak_memory_stats"]

    def max_alloc(device=None):
        return max(s.peaks[0], s.real["memory_stats"](device).get("allocated_bytes.all.peak", 0))

    def max_reserved(device=None):
        return max(s.peaks[1], s.real["memory_stats"](device).get("reserved_bytes.all.peak", 0))

    def reset(device=None):
        s.real["reset_peak_memory_stats"](device)
        s.peaks = [m.memory_allocated(device), m.memory_reserved(device)]

    def stats(device=None):
        out = s.real["memory_stats"](device)
        for key, i in (("allocated_bytes.all.peak", 0), ("reserved_bytes.all.peak", 1)):
            if key in out:
                out[key] = max(out[key], s.peaks[i])
        return out

    for name, fn in (("max_memory_allocated", max_alloc), ("max_memory_reserved", max_reserved),
                     ("reset_peak_memory_stats", reset), ("memory_stats", stats)):
        fn.__doc__ = s.real[name].__doc__
        setattr(m, name, fn)
        if getattr(torch.cuda, name, None) is s.real[name]:
            setattr(torch.cuda, name, fn)


def _refuse_compile(torch, s):
    """torch.compile traces module calls, and the bridge's global hooks and
    dispatch mode sit on them: the profile would be of neither program.
    Refused at the call, with the way around it."""
    real = getattr(torch, "compile", None)
    if real is None:
        return

    def compile(*a, **k):
        s.send("refuse", what="torch.compile", text="the program calls torch.compile, which memsplit's profile does "
               "not support yet; profile the eager program: skip torch.compile when the environment has "
               "MEMSPLIT_PHASE=trial (memsplit sets it)")
        s.finish("refused")
        raise SystemExit(2)

    compile.__wrapped__ = real
    torch.compile = compile


def _warn_profiler(torch, lib):
    """CUPTI 13 takes one subscriber: while memsplit's injection library
    holds it, torch.profiler records no CUDA activity. Said once, at the
    first profiler that starts; the program runs on."""
    inject = os.path.basename(os.environ.get("CUDA_INJECTION64_PATH", ""))
    if inject != "libmemsplit_inject.so":
        return
    said = []

    def before(args):
        if not said:
            said.append(True)
            lib.warn("torch.profiler", "torch.profiler records no CUDA kernels or memory while memsplit holds "
                     "CUPTI (CUPTI allows one subscriber); run the profiler outside memsplit")

    owners = [getattr(torch.profiler, "profile", None), getattr(torch.autograd.profiler, "profile", None)]
    for owner in owners:
        if owner is not None and "__enter__" in owner.__dict__:
            _wrap(owner, "__enter__", before, lambda a: None)
    prof = owners[0]
    if prof is not None and "start" in prof.__dict__:
        _wrap(prof, "start", before, lambda a: None)


def _ballast_at_cuda_init(torch, lib, capacity):
    def take():
        try:
            ordinal = torch.cuda.current_device()
        except Exception:
            ordinal = 0
        taken, err = lib.ballast(ordinal, capacity)
        if taken < 0:
            lib.warn("ballast", err)
    torch.cuda._lazy_call(take)


_PARAMS_SET = [0]       # parameters registered on any module since the bridge began (Session.grad_params)


def _watch_parameters(torch):
    """nn.Module.register_parameter (what setting a Parameter attribute
    calls) counts in _PARAMS_SET, once per process: a step's end walks the
    model's parameters again only after one."""
    cls = torch.nn.Module
    real = cls.register_parameter
    if getattr(real, "_memsplit", False):
        return

    @functools.wraps(real)
    def register_parameter(self, name, param):
        _PARAMS_SET[0] += 1
        return real(self, name, param)

    register_parameter._memsplit = True
    cls.register_parameter = register_parameter


def _install_step_wrappers(torch, s):
    seen = []

    def track_opt(opt):
        if all(o is not opt for o in seen):
            seen.append(opt)

    def before(args):
        opt = args[0] if args and isinstance(args[0], torch.optim.Optimizer) else None
        if opt is not None:
            track_opt(opt)
        s.step_begins(opt)

    def after(args):
        # the optimizer that stepped: Optimizer.step(self) or GradScaler.step(self, optimizer)
        opt = next((a for a in args[:2] if isinstance(a, torch.optim.Optimizer)), None)
        s.step_ends(seen, opt)

    # every optimizer class's step, wrapped once at its first instance
    init = torch.optim.Optimizer.__init__

    def init_wrapped(self, *a, **k):
        init(self, *a, **k)
        track_opt(self)
        s.optimizers.append(self)
        s.optimizer_made(self)
        _wrap(type(self), "step", before, after, lambda a: s.step_failed())

    torch.optim.Optimizer.__init__ = init_wrapped
    for cls_path in ("torch.cuda.amp.GradScaler", "torch.amp.GradScaler"):
        mod_name, cls_name = cls_path.rsplit(".", 1)
        cls = getattr(sys.modules.get(mod_name), cls_name, None)
        if cls is not None and "step" in cls.__dict__:
            _wrap(cls, "step", lambda a: (track_opt(a[1]) if len(a) > 1 else None,
                                          s.step_begins(a[1] if len(a) > 1 else None)),
                  after, lambda a: s.step_failed())
            _wrap_scale(torch, cls, s)


def _wrap_scale(torch, cls, s):
    """GradScaler.scale(loss): the loss before scaling is the step's loss."""
    real = cls.__dict__.get("scale")
    if real is None or getattr(real, "_memsplit", False):
        return

    @functools.wraps(real)
    def scale(self, outputs):
        if isinstance(outputs, torch.Tensor) and outputs.numel() == 1:
            s.losses.append(outputs.detach())
            s.scaled_loss = True
        return real(self, outputs)

    scale._memsplit = True
    cls.scale = scale


def _refuse_ddp(torch, s):
    """DistributedDataParallel (and FSDP) wrap one device's model: over a
    model whose stages are spread on several devices DDP's buckets assert
    (grad.device() == bucket_view.device()). Refused with the fix."""
    targets = [(torch.nn.parallel, "DistributedDataParallel")]
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is not None and hasattr(fsdp, "FullyShardedDataParallel"):
        targets.append((fsdp, "FullyShardedDataParallel"))
    for owner, name in targets:
        cls = getattr(owner, name, None)
        if cls is None:
            continue
        real = cls.__init__

        def init(self, module, *a, _real=real, _name=name, **k):
            if len({st["device"] for st in s.cfg["plan"]["stages"]}) > 1 or len(s.cfg["plan"]["stages"]) > 1:
                s.refuse("ddp", "the program wraps the model in %s, which cannot hold a model split over devices "
                         "(DDP asserts grad.device() == bucket_view.device()): train it on one device with the plan "
                         "(Lightning: Trainer(devices=1), or strategy='auto' with one device; on a host with several "
                         "GPUs devices='auto' starts DDP)" % _name)
            _real(self, module, *a, **k)

        cls.__init__ = init


def _install_plan(torch, lib, s, plan, cuda):
    """Caps per stage, the ballast per physical GPU, and re-placement after
    the framework moves the model (Module._apply)."""
    _refuse_ddp(torch, s)
    stages = plan["stages"]
    by_device = {}
    for i, st in enumerate(stages):
        by_device.setdefault(st["device"], []).append(i)
    for dev, idx in by_device.items():
        shared = len(idx) > 1 or dev.startswith("cpu")   # the ledger holds these to their size (_apply.place)
        if cuda and not shared and stages[idx[0]].get("capacity"):
            ordinal = torch.device(dev.split("/")[0]).index or 0
            # the whole device, context included, as the trial's ballast emulated it
            cap = int(stages[idx[0]].get("device_capacity") or stages[idx[0]]["capacity"])
            torch.cuda._lazy_call(lambda o=ordinal, c=cap: _take(lib, o, c, s))
    _one_backward_thread(torch, s, by_device)
    real_apply = torch.nn.Module._apply

    def _apply(self, fn, *a, **k):
        out = real_apply(self, fn, *a, **k)
        ap = s.applier
        if ap is not None and ap.placed and not ap.moving and s.root is not None and \
                any(id(m) in s.roots for m in self.modules()):
            devs = {p.device for p in s.root.parameters()}
            if devs == {ap.root_device}:        # the framework put everything on the root device again
                ap.place(s.root)
        return out

    torch.nn.Module._apply = _apply


def _one_backward_thread(torch, s, devices):
    """Over distinct devices (two GPUs, a GPU and the CPU) torch's autograd
    engine runs each device's backward nodes on a thread of that device's
    own, so the order of one device's nodes hangs on what the other
    threads are doing, which no record made on one device sees: realdev
    pinn (cuda:0 and the CPU, an H100) held 21 MiB of tensors above the
    record's order on cuda:0 that way, and exactly the record's order with
    one thread. On one device (the trial, virtual devices) every node
    runs on that device's one thread, in the engine's one order (its
    sequence numbers); the rerun keeps that order by running every node
    on the program's thread (set_multithreading_enabled, torch 2.0 on:
    thread-local, the thread that trains). MEMSPLIT_BRIDGE_TEST_ENGINE_THREADS=1
    leaves torch's threads, to measure against. devices: the plan's stages'
    devices (a virtual device's name is its physical device's)."""
    devices = sorted(devices)
    if len({d.split("/")[0] for d in devices}) < 2 or os.environ.get("MEMSPLIT_BRIDGE_TEST_ENGINE_THREADS") == "1":
        return
    switch = getattr(torch.autograd, "set_multithreading_enabled", None)
    if switch is None:
        s.lib.warn("backward", "torch %s runs the backward of each of %s on a thread of its own (one thread for "
                   "all is torch 2.0's): where the backward has branches that cross stages, a device's peak may "
                   "differ from the plan, which has them in one order" % (torch.__version__, ", ".join(devices)))
        return
    # held: torch 2.0's switch is a guard that gives the threads back when it is dropped; later ones set
    # the mode as they are made
    s.one_backward_thread = switch(False)


def _take(lib, ordinal, capacity, s):
    taken, err = lib.ballast(ordinal, capacity)
    if taken < 0:
        lib.warn("ballast", err)
    else:
        s.ballast[ordinal] = taken


def _install_oom_observer(torch, s):
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None or not torch.cuda.is_available():
        return

    def observer(device, alloc, device_allocated, device_free):
        s.oom(alloc, "cuda", "CUDA out of memory: tried to allocate %d bytes (%d allocated, %d free)"
              % (alloc, device_allocated, device_free), device_free, ordinal=device)

    try:
        attach(observer)
    except Exception:
        pass


def _tb_frames(tb):
    """A traceback's frames, outermost first."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _watch_unobserved(torch, s):
    """No hooks: at an OOM that ends the program, name the innermost module
    whose forward was running from the traceback's frames alone."""
    hook = sys.excepthook

    def excepthook(tp, value, tb):
        if isinstance(value, torch.cuda.OutOfMemoryError):
            # modules whose forward was running, outermost first (a LightningModule's
            # training_step is no module frame: its model is the root)
            mods = []
            for m in _running_modules(torch, _tb_frames(tb)):
                if not mods or mods[-1] is not m:
                    mods.append(m)
            path, kind = "", ""
            if mods:
                paths = {id(m): p for p, m in mods[0].named_modules()}
                path, kind = paths.get(id(mods[-1]), "?"), type(mods[-1]).__name__
            s.send("oom", l=-1, p=PH_FORWARD if mods else PH_BACKWARD, module=path, type=kind, requested=0,
                   source="unobserved", message=str(value)[:400])
        s.finish("exception", "%s: %s" % (tp.__name__, str(value)[:300]))
        hook(tp, value, tb)

    sys.excepthook = excepthook
    atexit.register(lambda: s.finish("exit"))


# what torch's exception says when CUDA refused memory that the caching allocator did not
# ask for: a library asking the driver itself (cuBLAS creating a thread's handle), a launch
_DRIVER_OOM = ("CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "cudaErrorMemoryAllocation",
               "CUDNN_STATUS_ALLOC_FAILED")


def _driver_oom(torch, s, value, tb):
    """An exception that ends the program because CUDA ran out of memory
    outside the caching allocator, whose observer never sees it: an OOM
    where the program was (the innermost module of the traceback, the
    layer and phase), the bytes it asked for not known (0)."""
    if s.root is None or not s.on or isinstance(value, getattr(torch.cuda, "OutOfMemoryError", ())):
        return
    text = str(value)
    if not any(k in text for k in _DRIVER_OOM):
        return
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    s.lib.warn("oom", "the program ran out of memory outside PyTorch's allocator (%s): the bytes it asked for "
               "are not known" % first[:200])
    s.oom(0, "driver", text, frames=_tb_frames(tb)[::-1])


def _watch_exit(s):
    hook = sys.excepthook

    def excepthook(tp, value, tb):
        try:
            _driver_oom(s.torch, s, value, tb)
        except Exception:
            pass            # the program's own exception is what it ends with, whatever this finds
        s.finish("exception", "%s: %s" % (tp.__name__, str(value)[:300]))
        hook(tp, value, tb)

    sys.excepthook = excepthook
    atexit.register(lambda: s.finish("exit"))
