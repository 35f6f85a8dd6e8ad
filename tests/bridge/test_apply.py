"""The applier's crossing path on one CPU (issue 35): virtual devices and
distinct devices run the same code, and only the copy primitive differs.

Distinct devices are emulated here at the very bottom only: every storage
carries a device tag, an operator's outputs get its inputs' device and an
operator whose inputs are on two devices fails with torch's own message
(what a real GPU does), and the applier's primitive is recorded, then made a
clone tagged with its destination. Everything above it (which stage holds a
tensor, where a crossing happens, the stage switch, the `moving` guard, the
device checks, the gradient's way back) is the applier's own code, run as
it runs on two GPUs. The same program runs over a plan of two stages on one
device (virtual) and on two devices; the crossings must be the same ones,
in the same order, with a clone in the first run and `.to` in the second.

Run: /usr/bin/python3 tests/bridge/test_apply.py  (torch 1.13 or 2.x, CPU)
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from memsplit_bridge import _apply  # noqa: E402
from memsplit_bridge._lib import PH_BACKWARD, PH_FORWARD, PH_INIT  # noqa: E402


def key_of(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


class Ledger:
    """The C ledger's answers that the applier asks for: the stage a storage counts on."""

    def __init__(self):
        self.stage = {}

    def owner_device(self, key):
        return self.stage.get(key)

    def owner(self, key, cat):
        return None


class Session:
    def __init__(self):
        self.lib = Ledger()
        self.phase, self.layer, self.steps = PH_FORWARD, 1, 0
        self.in_backward = 0
        self.path_of = {}
        self.sent = []

    @staticmethod
    def storage_key(t):
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return s.data_ptr(), s.nbytes()

    def where_text(self):
        return "layer %d" % self.layer

    def send(self, ev, **f):
        self.sent.append((ev, f))


class World(TorchDispatchMode):
    """Devices as tags on one CPU: outputs take their inputs' device, mixed
    inputs fail as torch fails, and (as memsplit's tracker does) every new
    storage counts on the stage running and passes the applier's checks."""

    def __init__(self, ap, session):
        super().__init__()
        self.ap, self.s, self.tag = ap, session, {}

    def device_of(self, t):
        return self.tag.get(key_of(t), t.device)

    def put(self, t, dev, stage):
        self.tag[key_of(t)] = dev
        self.s.lib.stage[key_of(t)] = stage

    def stage_for(self, t, inputs):
        """The stage a new tensor counts on, as memsplit's tracker says: the
        stage running; in backward or between steps outside every module,
        its inputs' stage."""
        if self.s.phase in (PH_BACKWARD, PH_INIT) and not self.ap.exec:
            for a in inputs:
                st = self.s.lib.owner_device(key_of(a))
                if st is not None:
                    return st
        return self.ap.ledger_device(t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ins = [a for a in _apply_flat(args) if isinstance(a, torch.Tensor) and a.dim() > 0]
        devs = {str(self.device_of(a)) for a in ins}
        if len(devs) > 1:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                               "%s!" % " and ".join(sorted(devs)))
        self.ap.check_inputs(func, args)
        out = func(*args, **(kwargs or {}))
        every = [a for a in _apply_flat(args) if isinstance(a, torch.Tensor)]
        dev = self.device_of((ins or every)[0]) if every else self.ap.devices[self.ap.stage_now()]
        views = {key_of(a) for a in every}
        for t in _apply_flat(out):
            # a new storage (an address may be given out again: its tag is new too)
            if isinstance(t, torch.Tensor) and key_of(t) not in views:
                self.ap.watch.pop(key_of(t), None)     # the address is a new storage's (the tracker's expire)
                self.tag[key_of(t)] = dev              # made on its inputs' device
                self.put(t, dev, self.stage_for(t, every))
                self.ap.check_output(t)
        return out


def _apply_flat(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [x for o in obj for x in _apply_flat(o)]
    return []


class Keep(torch.nn.Linear):
    """Keeps its output in a list that a later module reads (the leak)."""

    def __init__(self, i, o, kept):
        super().__init__(i, o)
        self.kept = kept

    def forward(self, x):
        y = super().forward(x)
        if self.kept is not None:
            self.kept[:] = [y]
        return y


class Use(torch.nn.Linear):
    """Adds what Keep kept: a tensor of another stage that never crossed."""

    def __init__(self, i, o, kept):
        super().__init__(i, o)
        self.kept = kept

    def forward(self, x):
        y = super().forward(x)
        return y + self.kept[0].sum(dim=1, keepdim=True) if self.kept else y


class Net(torch.nn.Module):
    def __init__(self, leak=False):
        super().__init__()
        torch.manual_seed(7)
        kept = [] if leak else None
        self.a, self.b, self.c = Keep(8, 16, kept), Use(16, 16, kept), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def data():
    torch.manual_seed(11)
    return torch.randn(4, 8)


def unsplit():
    net = Net()
    y = net(data())
    loss = (y * y).sum()
    loss.backward()
    return float(loss), [p.grad.clone() for p in net.parameters()]


def record_crossings(ap, world, s):
    """The applier's primitive, recorded (phase, from, to, clone or .to,
    shape) and made a clone tagged with its destination: the list it fills."""
    crossings = []

    def primitive(t, dev):
        crossings.append((s.phase, ap.holder(t), ap.stage_now(), "clone" if world.device_of(t) == dev else "to",
                          tuple(t.shape)))
        out = t.clone()
        world.put(out, dev, ap.stage_now())
        return out

    ap.device_of = world.device_of
    ap.primitive = primitive
    return crossings


def program_with_lengths(program, second):
    """A placed applier over cuda:0 and `second` for a program on device
    `program`, with its crossings recorded, an activation x of stage 0 and
    sequence lengths on the CPU: (applier, world, crossings, x, lengths)."""
    s = Session()
    ap = _apply.Applier(torch, s, {"stages": [{"device": "cuda:0", "first": 0, "last": 0},
                                               {"device": second, "first": 1, "last": 1}]})
    ap.program_device = torch.device(program)
    world = World(ap, s)
    crossings = record_crossings(ap, world, s)
    x, lengths = torch.randn(3, 4), torch.tensor([4, 2, 3])
    world.put(x, ap.devices[0], 0)
    world.tag[key_of(lengths)] = "cpu"
    ap.placed = True
    return ap, world, crossings, x, lengths


def run_net(net, placement, devices, opened=(), x=None, handed_on=(), record=False, root=False, penalty=False,
            extra=None, evals=0):
    """Forward and backward of net with each (module, stage) of placement
    wrapped as the applier wraps a unit, and each module of opened as an
    opened Sequential, over `devices`: (crossings, loss, gradients, applier).
    handed_on: the plan's (module paths in net); record: a record pass's plan;
    root: net wrapped as the applier wraps a model; penalty: the loss is the
    squared gradient of the output's square with respect to the input, taken
    with create_graph (WGAN-GP's penalty: a backward through the second
    backward); extra(net): a term the program's code adds to the loss; evals:
    calls in eval mode under no_grad before the training forward (Lightning's
    sanity check)."""
    s = Session()
    s.path_of = {id(m): path for path, m in net.named_modules() if path}
    plan = {"stages": [{"device": d, "first": i, "last": i} for i, d in enumerate(devices)],
            "handed_on": list(handed_on), "record": record}
    ap = _apply.Applier(torch, s, plan)
    ap.find_handed_on()
    world = World(ap, s)
    crossings = record_crossings(ap, world, s)
    x = data() if x is None else x
    with world:
        for m, st in placement:
            for p in m.parameters():
                world.put(p, ap.devices[st], st)
            ap.wrap(m, st)
        for m in opened:
            ap.wrap_opened(m)
        if root:
            ap.wrap_root(net)
        world.put(x, ap.devices[0], 0)
        ap.placed = True
        if evals:
            net.eval()
            with torch.no_grad():
                for _ in range(evals):
                    net(x)
            net.train()
        y = net(x.requires_grad_(True) if penalty else x)
        loss = (y * y).sum()
        if extra is not None:
            loss = loss + extra(net)
        s.phase = PH_BACKWARD
        s.in_backward += 1
        if penalty:
            g, = torch.autograd.grad(loss, x, create_graph=True)
            loss = (g * g).sum()
        loss.backward()
        s.in_backward -= 1
    return crossings, float(loss), [p.grad.clone() for p in net.parameters()], ap


def run(devices, leak=False):
    """Net with a on stage 0, b on stage 1, c on stage 0."""
    net = Net(leak)
    return run_net(net, ((net.a, 0), (net.b, 1), (net.c, 0)), devices)


class SeqNet(torch.nn.Module):
    """A ResNet-like stage: an nn.Sequential of blocks the root calls, then a head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.body = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.body(x))


def run_seq(devices, opened=True):
    """SeqNet with body.0-1 on stage 0, body.2-3 on stage 1, the head on
    stage 0; the Sequential wrapped as an opened module (what
    wrap_boundaries does) or not: (crossings, loss, gradients)."""
    net = SeqNet()
    b = net.body
    placement = ((b[0], 0), (b[1], 0), (b[2], 1), (b[3], 1), (net.head, 0))
    return run_net(net, placement, devices, [b] if opened else ())[:3]


class CheckpointedNet(Net):
    """Net with a and b under activation checkpointing: their forward runs
    again in backward, called by autograd's engine, not by the root."""

    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        return self.c(checkpoint(lambda t: self.b(self.a(t)), x, use_reentrant=self.reentrant))


class LoopNet(torch.nn.Module):
    """Blocks in an nn.ModuleList that the model's own code loops over (HF
    Llama's, GPT-2's), then a head; with residual_at=i the loop adds block
    i's output to its input itself."""

    def __init__(self, residual_at=None):
        super().__init__()
        torch.manual_seed(3)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))
        self.head = torch.nn.Linear(8, 2)
        self.residual_at = residual_at

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            y = b(x)
            x = x + y if i == self.residual_at else y
        return self.head(x)


def run_loop(devices, handed_on=(), residual_at=None):
    """LoopNet with blocks 0-1 and the head on stage 0, blocks 2-3 on stage 1."""
    net = LoopNet(residual_at)
    b = net.blocks
    placement = ((b[0], 0), (b[1], 0), (b[2], 1), (b[3], 1), (net.head, 0))
    return run_net(net, placement, devices, handed_on=handed_on, root=True)


class HandedOn(unittest.TestCase):
    def test_record_pass_says_what_only_crosses_on(self):
        # each block a stage of its own: every block's output is copied back to the
        # loop's stage; a copy only the next module's crossing reads may stay where
        # it was made, one the loop's own code adds to (block 1's, and block 0's
        # that it adds block 1's to) or the program reads (the head's, the loss) not
        for residual_at, read, back in ((None, {"head"}, 4), (1, {"blocks.0", "blocks.1", "head"}, 3)):
            net = LoopNet(residual_at)
            b = net.blocks
            placement = ((b[0], 1), (b[1], 2), (b[2], 3), (b[3], 4), (net.head, 5))
            _, _, _, ap = run_net(net, placement, ["cuda:0"] * 6, record=True)
            sent = ap.s.sent
            ids = {f["id"]: f["module"] for ev, f in sent if ev == "ho"}
            self.assertEqual(sorted(ids.values()), ["blocks.0", "blocks.1", "blocks.2", "blocks.3", "head"])
            self.assertEqual({ids[f["id"]] for ev, f in sent if ev == "nh"}, read)
            # every copy back, and each gradient copy that answers one, names its module
            hops = [f["h"] for ev, f in sent if ev == "c" and "h" in f]
            self.assertEqual(sorted(set(hops)), sorted(ids))
            # 5 outputs back; in backward, each crossing on of one (not of the loop's sum)
            self.assertEqual(len(hops), 5 + back)

    def test_loop_hands_on_and_trains_the_same(self):
        net = LoopNet()
        y = net(data())
        want = (y * y).sum()
        want.backward()
        want_grads = [p.grad.clone() for p in net.parameters()]
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            crossings, loss, grads, _ = run_loop(devices, handed_on=("blocks.2", "blocks.3"))
            # into block 2, and block 3's output into the head: once each way per boundary
            self.assertEqual([c[:3] for c in crossings], [(PH_FORWARD, 0, 1), (PH_FORWARD, 1, 0),
                                                          (PH_BACKWARD, 0, 1), (PH_BACKWARD, 1, 0)])
            self.assertEqual(loss, float(want))
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want_grads)))
            back_and_forth, loss2, _, _ = run_loop(devices)
            self.assertEqual(len(back_and_forth), 8)
            self.assertEqual(loss2, float(want))

    def test_loop_that_reads_a_handed_on_output_fails_on_both(self):
        # a plan that hands on what the loop reads (block 2's output, added to
        # block 1's on stage 0): torch's device check on two devices, the
        # ledger's on one, both refused naming the plan's list
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            with self.assertRaisesRegex(_apply.PlanRefused, "without the boundary copy.*take that module out of the "
                                        "plan's \"handed_on\""):
                run_loop(devices, handed_on=("blocks.2",), residual_at=2)


class CrossingPath(unittest.TestCase):
    def test_recompute_where_the_forward_was(self):
        # a on stage 0, b on stage 1: the recompute's output comes back to the
        # root's stage as the forward's did, so the gradient the checkpoint
        # hands it (reentrant) or the tensors it saved (not) are on its device
        want_loss, want_grads = unsplit()
        for reentrant in (True, False):
            for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
                x = data().requires_grad_(reentrant)     # (reentrant: an input that needs a gradient)
                net = CheckpointedNet(reentrant)
                crossings, loss, grads, ap = run_net(net, ((net.a, 0), (net.b, 1), (net.c, 0)), devices, x=x)
                self.assertEqual(loss, want_loss)
                self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want_grads)))
                # in backward: the recompute crosses as the forward did (into b and
                # back), and each of its two copies' gradients goes back the same way
                self.assertEqual(sorted(c[:3] for c in crossings if c[0] == PH_BACKWARD),
                                 [(PH_BACKWARD, 0, 1)] * 2 + [(PH_BACKWARD, 1, 0)] * 2)


    def test_sequential_blocks_cross_once(self):
        # an nn.Sequential has no code of its own between its blocks: a block's
        # output goes on to the next block where it is, so only the stage
        # boundary crosses (and the Sequential's output back to its caller);
        # brought back to the caller after every block, each block on stage 1
        # would cross twice and its output be held twice
        net = SeqNet()
        y = net(data())
        want = (y * y).sum()
        want.backward()
        want_grads = [p.grad.clone() for p in net.parameters()]
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            crossings, loss, grads = run_seq(devices)
            self.assertEqual([c[:3] for c in crossings], [(PH_FORWARD, 0, 1), (PH_FORWARD, 1, 0),
                                                          (PH_BACKWARD, 0, 1), (PH_BACKWARD, 1, 0)])
            self.assertEqual(loss, float(want))
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want_grads)))
            back_and_forth, _, _ = run_seq(devices, opened=False)
            self.assertEqual(len(back_and_forth), 8)

    def test_same_crossings_clone_against_to(self):
        virt, loss_v, grads_v, _ = run(["cuda:0", "cuda:0"])
        real, loss_r, grads_r, _ = run(["cuda:0", "cuda:1"])
        # a's output into b, b's output back to the root's stage for c; in
        # backward each gradient goes back the way its tensor came
        self.assertEqual([c[:3] + c[4:] for c in virt], [c[:3] + c[4:] for c in real])
        self.assertEqual([c[:3] for c in virt], [(PH_FORWARD, 0, 1), (PH_FORWARD, 1, 0),
                                                 (PH_BACKWARD, 0, 1), (PH_BACKWARD, 1, 0)])
        self.assertEqual({c[3] for c in virt}, {"clone"})
        self.assertEqual({c[3] for c in real}, {"to"})
        self.assertEqual(loss_v, loss_r)
        for gv, gr in zip(grads_v, grads_r):
            self.assertTrue(torch.equal(gv, gr))

    def test_second_backward_crosses_as_on_two_devices(self):
        # the gradient's copy back (Cross.backward) is itself in the graph when create_graph
        # is on, and its gradient comes back as .to()'s does between two devices: the second
        # backward's operators run on their own stage's tensors (with a clone's own gradient,
        # which stays where it is, the split's second backward mixed the two devices)
        net = Net()
        x = data().requires_grad_(True)
        y = net(x)
        g, = torch.autograd.grad((y * y).sum(), x, create_graph=True)
        want = (g * g).sum()
        want.backward()
        want_grads = [p.grad.clone() for p in net.parameters()]
        runs = []
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            net = Net()
            crossings, loss, grads, _ = run_net(net, ((net.a, 0), (net.b, 1), (net.c, 0)), devices, penalty=True)
            self.assertEqual(loss, float(want))
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want_grads)))
            runs.append([c[:3] for c in crossings])
        self.assertEqual(runs[0], runs[1])
        # forward: into b and back; the penalty's backward: each gradient back the way its
        # tensor came; the second backward: the gradients of those two copies back again,
        # and the forward's own crossings' gradients
        self.assertEqual(runs[0], [(PH_FORWARD, 0, 1), (PH_FORWARD, 1, 0)] + [(PH_BACKWARD, 0, 1), (PH_BACKWARD, 1, 0)] * 3)

    def test_split_equals_unsplit(self):
        want_loss, want_grads = unsplit()
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            _, loss, grads, _ = run(devices)
            self.assertEqual(loss, want_loss)
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want_grads)))

    def test_checks_quiet_for_own_copies(self):
        # the crossing's copy is a tensor of the destination made while the
        # source stage's module returned: inside the guard, no check fires
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            crossings, _, _, ap = run(devices)
            self.assertEqual(len(crossings), 4)
            self.assertEqual(ap.moving, 0)
            self.assertEqual(ap.exec, [])

    def test_check_output_fires_outside_the_guard(self):
        s = Session()
        ap = _apply.Applier(torch, s, {"stages": [{"device": "cuda:0", "first": 0, "last": 0},
                                                   {"device": "cuda:1", "first": 1, "last": 1}]})
        ap.placed = True
        t = torch.zeros(2)
        ap.device_of = lambda _t: torch.device("cuda:1")
        ap.exec.append(0)                     # stage 0 runs and makes a tensor on stage 1's device
        with self.assertRaisesRegex(_apply.PlanRefused, "made a tensor on cuda:1 while it runs on stage 0"):
            ap.check_output(t)
        ap.moving += 1                        # the same tensor made by memsplit's own crossing
        ap.check_output(t)
        ap.moving -= 1

    def test_module_moving_tensors_refused_on_both(self):
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            with self.assertRaisesRegex(_apply.PlanRefused, "without the boundary copy"):
                run(devices, leak=True)

    def test_other_errors_pass_through(self):
        s = Session()
        ap = _apply.Applier(torch, s, {"stages": [{"device": "cpu", "first": 0, "last": 0}]})
        m = torch.nn.Linear(2, 2)
        ap.wrap(m, 0)
        with self.assertRaisesRegex(RuntimeError, "mat1 and mat2|size mismatch|shapes cannot be multiplied"):
            m(torch.zeros(3, 5))

    def test_packed_sequence_keeps_its_batch_sizes(self):
        # a PackedSequence crosses as torch's own .to moves it: its data and indices go, its
        # batch_sizes stay on the CPU (an LSTM on a GPU refuses them anywhere else)
        from torch.nn.utils.rnn import pack_padded_sequence
        x = pack_padded_sequence(torch.randn(3, 5, 4), torch.tensor([5, 2, 4]), batch_first=True,
                                 enforce_sorted=False)
        seen = []

        def fn(t):
            seen.append(t)
            return t.clone()

        y = _apply._map(torch, (x, {"h": torch.randn(2)}), fn)[0]
        self.assertIsInstance(y, type(x))
        self.assertIs(y.batch_sizes, x.batch_sizes)
        self.assertFalse(any(t is x.batch_sizes for t in seen))
        self.assertEqual(len(seen), 4)          # data, sorted and unsorted indices, and the dict's tensor
        self.assertTrue(torch.equal(y.data, x.data) and torch.equal(y.unsorted_indices, x.unsorted_indices))
        self.assertIsNot(y.data, x.data)

    def test_packed_sequence_crosses_without_moving_its_batch_sizes(self):
        # two devices: the data and indices cross by .to, the batch_sizes (on the CPU, no
        # stage's device) are handed on as they are; one shared device: the batch_sizes, a
        # stage's tensor there, cross too, by a copy where they are (the ledger's stage)
        from torch.nn.utils.rnn import pack_padded_sequence
        for devices, bs_dev, want in ((["cuda:0", "cuda:1"], "cpu", ["to"] * 3),
                                      (["cuda:0", "cuda:0"], "cuda:0", ["clone"] * 4)):
            s = Session()
            ap = _apply.Applier(torch, s, {"stages": [{"device": d, "first": i, "last": i}
                                                       for i, d in enumerate(devices)]})
            world = World(ap, s)
            crossings = record_crossings(ap, world, s)
            x = pack_padded_sequence(torch.randn(3, 5, 4), torch.tensor([5, 2, 4]), batch_first=True,
                                     enforce_sorted=False)
            for t in (x.data, x.sorted_indices, x.unsorted_indices):
                world.put(t, ap.devices[0], 0)
            if bs_dev == "cpu":
                world.tag[key_of(x.batch_sizes)] = "cpu"
            else:
                world.put(x.batch_sizes, ap.devices[0], 0)
            ap.placed = True
            with world:
                y = ap.follow(x, 1, 1)
            self.assertEqual([c[3] for c in crossings], want)
            self.assertEqual(str(world.device_of(y.data)), devices[1])
            self.assertEqual(str(world.device_of(y.batch_sizes)), bs_dev)
            if bs_dev == "cpu":
                self.assertIs(y.batch_sizes, x.batch_sizes)
            else:
                self.assertEqual(s.lib.owner_device(key_of(y.batch_sizes)), 1)

    def test_a_tensor_the_program_keeps_off_its_device_stays(self):
        # a GPU program's sequence lengths on the CPU (pack_padded_sequence wants them there)
        # stay there when a unit on another GPU takes them; a CPU program's batch, trained on
        # GPUs, goes to the stage's device
        for program, want in (("cuda:0", ["to"]), ("cpu", ["to", "to"])):
            ap, world, crossings, x, lengths = program_with_lengths(program, "cuda:1")
            with world:
                y, n = ap.follow((x, lengths), 1, 1)
            self.assertEqual([c[3] for c in crossings], want)
            self.assertEqual(str(world.device_of(y)), "cuda:1")
            if program == "cuda:0":
                self.assertIs(n, lengths)
            else:
                self.assertEqual(str(world.device_of(n)), "cuda:1")

    def test_a_gpu_programs_cpu_tensor_stays_beside_a_cpu_stage(self):
        # a stage on the CPU does not make the program's own CPU tensors its: a GPU program's
        # lengths stay where it keeps them, into a unit on the GPU as into one on the CPU, and
        # a PackedSequence's batch_sizes go back with an output unmoved (the same crossings
        # as the plan's virtual devices on one GPU, where the CPU is no stage's device)
        from torch.nn.utils.rnn import pack_padded_sequence
        ap, world, crossings, x, lengths = program_with_lengths("cuda:0", "cpu")
        with world:
            y, n = ap.follow((x, lengths), 0, 0)
            self.assertIs(y, x)
            self.assertIs(n, lengths)
            y, n = ap.follow((x, lengths), 1, 1)
            self.assertEqual(str(world.device_of(y)), "cpu")
            self.assertIs(n, lengths)
        self.assertEqual([c[1:4] for c in crossings], [(0, 1, "to")])
        p = pack_padded_sequence(torch.randn(3, 5, 4), lengths, batch_first=True, enforce_sorted=False)
        for t in (p.data, p.sorted_indices, p.unsorted_indices):
            world.put(t, ap.devices[1], 1)
        world.tag[key_of(p.batch_sizes)] = "cpu"
        del crossings[:]
        with world:
            q = ap.follow(p, 0, 0, from_layer=1)        # a CPU unit's output back to the root's code
        self.assertIs(q.batch_sizes, p.batch_sizes)
        self.assertEqual([c[1:4] for c in crossings], [(1, 0, "to")] * 3)
        self.assertEqual(str(world.device_of(q.data)), "cuda:0")

    def test_a_units_pre_hooks_run_on_its_stage(self):
        # the old weight_norm computes b's weight in a forward pre-hook, before b's forward:
        # on one shared device the weight counted on the caller's stage, and b's forward on
        # stage 1 was refused for reading stage 0's tensor; now it is b's, as on two devices
        def weight_normed():
            net = Net()
            torch.nn.utils.weight_norm(net.b)
            return net

        net = weight_normed()
        y = net(data())
        (y * y).sum().backward()
        want = [p.grad.clone() for p in net.parameters()]
        for devices in (["cuda:0", "cuda:0"], ["cuda:0", "cuda:1"]):
            net = weight_normed()
            _, _, grads, ap = run_net(net, ((net.a, 0), (net.b, 1), (net.c, 0)), devices)
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want)))
            self.assertEqual((ap.exec, ap.lexec, ap.pre_depth), ([], [], []))

    def aux_kept(self, evals=0):
        """Net with b keeping a loss term on itself (self.aux) in training,
        which the program adds to its own loss on the root's stage: after
        `evals` calls in eval mode under no_grad, on one device and on two,
        the gradients of the run alone, the term crossing back in the
        training forward as b's outputs do."""
        class AuxLinear(torch.nn.Linear):
            def forward(self, x):
                y = super().forward(x)
                if self.training:
                    self.aux = (y * y).mean()
                return y

        def aux_net():
            net = Net()
            b = AuxLinear(16, 16)
            b.load_state_dict(net.b.state_dict())
            net.b = b
            return net

        net = aux_net()
        y = net(data())
        ((y * y).sum() + net.b.aux).backward()
        want = [p.grad.clone() for p in net.parameters()]
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            net = aux_net()
            crossings, _, grads, _ = run_net(net, ((net.a, 0), (net.b, 1), (net.c, 0)), devices,
                                             extra=lambda n: n.b.aux, evals=evals)
            self.assertTrue(all(torch.equal(a, b) for a, b in zip(grads, want)))
            forward = [c[:3] for c in crossings if c[0] == PH_FORWARD]
            self.assertEqual(forward[-3:], [(PH_FORWARD, 0, 1), (PH_FORWARD, 1, 0), (PH_FORWARD, 1, 0)])

    def test_a_tensor_a_unit_keeps_on_itself_goes_back_with_its_outputs(self):
        # a mixture of experts keeps its auxiliary loss on a module (self.aux): it crosses back
        # as the unit's outputs do (on two devices torch refused the mixed devices)
        self.aux_kept()

    def test_a_tensor_a_unit_keeps_first_after_its_early_calls(self):
        # validation batches ran first, keeping no loss term (Lightning's sanity check: more
        # calls than the applier searches the unit's modules at): noted as it is set, the term
        # goes back with the outputs; before, the applier refused the tensor of stage 1
        self.aux_kept(evals=_apply._ATTR_SCANS + 1)

    def test_a_pre_hook_that_raises_leaves_no_stage_behind(self):
        # a unit's pre-hook raises (the weight's allocation ran out) and the program catches
        # it: when the model's call ends the stage stacks are back where they were
        net = Net()
        state = {"fail": True}

        def flaky(_m, _inputs):
            if state.pop("fail", False):
                raise RuntimeError("out of memory in the unit's pre-hook")

        net.b.register_forward_pre_hook(flaky)
        s = Session()
        ap = _apply.Applier(torch, s, {"stages": [{"device": "cpu", "first": 0, "last": 0},
                                                   {"device": "cpu", "first": 1, "last": 1}]})
        for m, st in ((net.a, 0), (net.b, 1), (net.c, 0)):
            ap.wrap(m, st)
        ap.wrap_root(net)
        with self.assertRaisesRegex(RuntimeError, "pre-hook"):
            net(data())
        self.assertEqual((ap.exec, ap.lexec, ap.pre_depth), ([], [], []))
        net(data())
        self.assertEqual((ap.exec, ap.lexec, ap.pre_depth), ([], [], []))

    def test_a_deep_copy_of_a_placed_model_runs_itself(self):
        # copy.deepcopy(model) after the placement (a best-model snapshot): each placed
        # module's forward is the copy's own, placed as the original's, so the copy computes
        # with its own weights, and crosses where the original does (on two devices too)
        import copy
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            net, s, ap, world = self.placed_net(devices)
            crossings = record_crossings(ap, world, s)
            with world:
                x = data()
                world.put(x, ap.devices[0], 0)
                s.phase = PH_INIT                        # between two steps, outside every module
                snap = copy.deepcopy(net)
                self.assertIsNot(snap.b.forward, net.b.forward)
                self.assertIs(snap.b.forward.__wrapped__.__self__, snap.b)
                with torch.no_grad():
                    for p in net.parameters():           # the model trains on
                        p.add_(1.0)
                    s.phase = PH_FORWARD
                    n0 = len(crossings)
                    y_snap, y_net = snap(x), net(x)
            self.assertEqual(len(crossings) - n0, 4)     # into b and back, for each of the two
            self.assertFalse(torch.equal(y_snap, y_net))
            net_again = Net()
            self.assertTrue(torch.allclose(y_snap, net_again(data())))   # the weights before the change

    def placed_net(self, devices):
        net, s = Net(), Session()
        ap = _apply.Applier(torch, s, {"stages": [{"device": d, "first": i, "last": i}
                                                   for i, d in enumerate(devices)]})
        world = World(ap, s)
        with world:
            for m, st in ((net.a, 0), (net.b, 1), (net.c, 0)):
                for p in m.parameters():
                    world.put(p, ap.devices[st], st)
                ap.wrap(m, st)
            ap.wrap_root(net)
            ap.placed = True
        return net, s, ap, world

    def test_a_dropped_copy_of_a_placed_model_is_freed_at_once(self):
        # the wrappers hold their module weakly: a copy the program drops (an EMA made again)
        # frees its memory at once, as without memsplit, not at the next garbage collection
        import copy
        import gc
        import weakref
        net, s, ap, world = self.placed_net(["cuda:0", "cuda:1"])
        gc.disable()
        try:
            snap = copy.deepcopy(net)
            gone = weakref.ref(snap)
            del snap
            self.assertIsNone(gone())
            gone = weakref.ref(net)
            del net
            self.assertIsNone(gone())
        finally:
            gc.enable()

    def test_a_placed_model_pickles_as_the_programs_own(self):
        # torch.save(model) under a plan: the file has none of memsplit (the hooks, the
        # wrappers) and loads where memsplit is not; a deep copy keeps its placement
        import copy
        import io
        import pickle
        from memsplit_bridge import _pickle
        _pickle.install(torch)
        net, s, ap, world = self.placed_net(["cuda:0", "cuda:0"])
        net.b.register_forward_pre_hook(_own_hook)     # the program's own, kept
        ap.stage_pre_hooks(net.b, 1, 1)
        for how in ("pickle", "torch.save"):
            buf = io.BytesIO()
            if how == "pickle":
                pickle.dump(net, buf)
            else:
                torch.save(net, buf)
            self.assertNotIn(b"memsplit", buf.getvalue(), how)
            buf.seek(0)
            back = pickle.load(buf) if how == "pickle" else torch.load(buf)
            for m in back.modules():
                self.assertNotIn("forward", vars(m), how)
            self.assertEqual(list(back.b._forward_pre_hooks.values()), [_own_hook])
            self.assertTrue(torch.equal(back(data()), Net()(data())), how)
        snap = copy.deepcopy(net)
        self.assertIsInstance(vars(snap.b)["forward"], _apply._Placed)
        self.assertEqual(len(snap.b._forward_pre_hooks), 3)

    def test_a_model_saved_whole_and_loaded_back_runs_placed(self):
        # torch.load of a model saved under a plan: on two GPUs its weights come back on
        # both (torch restores each storage to the device it was saved from: done here by hand,
        # the bottom primitive), and it runs only placed as the one saved, crossing where it does
        import io
        from memsplit_bridge import _homes, _pickle
        _pickle.install(torch)
        for devices in (["cuda:0", "cuda:1"], ["cuda:0", "cuda:0"]):
            net, s, ap, world = self.placed_net(devices)
            s.applier, s.saved_modules, s.saved_homes, s.load_homes = ap, {}, {}, {}
            crossings = record_crossings(ap, world, s)
            buf = io.BytesIO()
            self.assertTrue(_homes.applies(s, {}))
            _homes.note_save(torch, s, net, buf)
            torch.save(net, buf)
            buf.seek(0)
            back = torch.load(buf, **_homes.load_kwargs(torch, s, buf, {}))
            self.assertEqual(ap.virtual, bool(s.saved_homes))
            if ap.virtual:             # each storage's stage, in torch's order: a's, b's, c's
                self.assertEqual(s.saved_homes[id(buf)], [0, 0, 1, 1, 0, 0])
                self.assertEqual(sorted(s.load_homes.values()), [0, 0, 0, 0, 1, 1])
            with world:
                for (_, o), (_, c) in zip(net.named_modules(), back.named_modules()):
                    for po, pc in zip(o.parameters(recurse=False), c.parameters(recurse=False)):
                        world.put(pc, world.device_of(po), s.lib.owner_device(key_of(po)))
                if not ap.virtual:
                    with self.assertRaises((RuntimeError, _apply.PlanRefused)):
                        back(data())   # unplaced, it mixes the two devices
                _homes.place_loaded(torch, s, buf, back)
                self.assertIsInstance(vars(back.b)["forward"], _apply._Placed)
                x = data()
                world.put(x, ap.devices[0], 0)
                n0 = len(crossings)
                y = back(x)
            self.assertEqual(len(crossings) - n0, 2)       # into b and back
            self.assertTrue(torch.allclose(y, Net()(data())))

    def test_virtual_names(self):
        ap = _apply.Applier(torch, Session(), {"stages": [{"device": "cuda:0/v0", "first": 0, "last": 0},
                                                           {"device": "cuda:0/v1", "first": 1, "last": 1}]})
        self.assertEqual([str(d) for d in ap.devices], ["cuda:0", "cuda:0"])
        self.assertTrue(ap.virtual)


def _own_hook(m, args):
    """A program's own forward pre-hook (picklable: a module-level function)."""
    return None


class FakeCuda:
    """torch.cuda as the clock uses it, on two GPUs: the current device is
    the one a `with device(d)` set, and an event belongs to the device
    current when it was made; recording it on another device's stream, or
    timing two devices' events against each other, fails as CUDA does."""

    def __init__(self):
        self.current = 1           # a later stage's backward thread: its GPU is current
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                self.dev = cuda.current

            def record(self, stream=None):
                if (stream if stream is not None else cuda.current) != self.dev:
                    raise RuntimeError("CUDA error: invalid resource handle")

            def elapsed_time(self, other):
                if other.dev != self.dev:
                    raise RuntimeError("CUDA error: invalid resource handle")
                return 0.0

        self.Event = Event

    def device(self, d):
        cuda = self

        class Ctx:
            def __enter__(self):
                self.saved, cuda.current = cuda.current, d if isinstance(d, int) else torch.device(d).index

            def __exit__(self, *a):
                cuda.current = self.saved

        return Ctx()

    def current_stream(self, d):
        return torch.device(d).index if not isinstance(d, int) else d

    def current_device(self):
        return self.current


class Clock(unittest.TestCase):
    def test_events_on_the_root_device(self):
        # on two GPUs a transition in stage 1's backward runs where cuda:1 is
        # current; every mark must still be the root device's, or the step's
        # intervals cannot be timed ("invalid resource handle" on the H200 x2)
        from memsplit_bridge._session import Session as Real
        from types import SimpleNamespace
        fake = SimpleNamespace(cuda=FakeCuda())
        asked = []
        fake._C = SimpleNamespace(_cuda_getDevice=lambda: fake.cuda.current,
                                  _cuda_getCurrentStream=lambda d: asked.append(d) or (7, d, 1))
        me = SimpleNamespace(torch=fake, cuda=True, device=torch.device("cuda:0"), dev_index=0, spare_events=[],
                             stream_seen=None)
        me.root_stream = lambda: Real.root_stream(me)
        me.mark = lambda: Real.mark(me)
        fake.cuda.current = 0
        t0 = Real.clock(me)
        fake.cuda.current = 1
        t1 = Real.clock(me)
        self.assertEqual((t0.dev, t1.dev, fake.cuda.current), (0, 0, 1))
        t0.elapsed_time(t1)
        self.assertEqual(asked, [0, 0])         # the root's stream, each time
        # an event read at a step's end is recorded again, on the root's stream wherever the mark is made
        me.spare_events.append(t0)
        t2 = Real.clock(me)
        self.assertIs(t2, t0)
        t2.elapsed_time(t1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
