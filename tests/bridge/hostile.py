"""A small training program that does what memsplit must survive from the
program it runs (issue 38; tests/bridge/untrusted.sh): its own module names
of any content, idle or forged connections to the bridge's socket, signals
ignored, setsid(), a subprocess that trains another model, os._exit in the
middle of a forward, threads that allocate, and a descriptor of the bridge's
closed and its number reused.

Each run trains --steps optimizer steps of a tiny model: `embed` (or the
pre-module --pre NAME), a Sequential `body` (or --list NAME) of --blocks
identical blocks named by --names, and `head`. It prints "step N" after
each step and writes the block names it made (JSON) to --names-out.
"""
import argparse
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import torch
import torch.nn as nn

NAMES = {
    "plain": lambda i: str(i),
    "newline": lambda i: "b\n%d" % i,
    "tab": lambda i: "b\t%d" % i,
    "esc": lambda i: "\x1b[2J\rb%d" % i,
    "nul": lambda i: "b\0%d" % i,
    "surrogate": lambda i: "b\udc80%d" % i,
    "long": lambda i: "x" * 300 + str(i),
    "utf8-400": lambda i: "\u00e9" * 200 + str(i),       # 400 bytes and more: a cut would fall inside a character
    "utf8-ok": lambda i: "\u00e9" * 100 + str(i),        # about 200 bytes: fits
}


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + torch.relu(self.fc(x))


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.pre = a.pre
        self.list = a.list
        for p in a.pre.split("|"):
            self.add_module(p, nn.Embedding(a.vocab, a.dim))
        self.pre_free = [p for p in a.pre_free.split("|") if p]
        for p in self.pre_free:        # no parameters: they join the unit of the module before them
            self.add_module(p, nn.Dropout(0.0))
        cls = type(a.block_class, (Block,), {}) if a.block_class else Block
        self.add_module(a.list, nn.Sequential(collections.OrderedDict(
            (NAMES[a.names](i), cls(a.dim)) for i in range(a.blocks))))
        self.head = nn.Linear(a.dim, a.vocab)
        self.exit_in = a.exit_mid_forward

    def forward(self, idx):
        x = sum(getattr(self, p)(idx) for p in self.pre.split("|"))
        for p in self.pre_free:
            x = getattr(self, p)(x)
        for i, b in enumerate(getattr(self, self.list)):
            if self.exit_in and i == 1:
                os._exit(0)            # in the middle of the forward: no step finished, no atexit
            x = b(x)
        return self.head(x)


def forge(line):
    """A connection of the program's own to the bridge's socket, one line on it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["MEMSPLIT_BRIDGE_SOCK"])
    s.sendall(line.encode() + b"\n")
    return s


def bridge_fd():
    """The descriptor of the bridge's connection to memsplit (a Unix socket
    connected to $MEMSPLIT_BRIDGE_SOCK)."""
    want = os.environ.get("MEMSPLIT_BRIDGE_SOCK")
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if s.family == socket.AF_UNIX and s.getpeername() == want:
                return fd
        except OSError:
            pass
        finally:
            s.close()
    return None


def fd_reuse(kind):
    """Closes the bridge's descriptor, reuses the number for a file or a
    socket of the program's own, makes tensors (the bridge has events to
    send), and says whether the program's own descriptor was left alone."""
    fd = bridge_fd()
    if fd is None:
        print("fd: no bridge connection found", flush=True)
        sys.exit(5)
    os.close(fd)
    if kind == "file":
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "hostile-%d" % os.getpid())
        got = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        os.unlink(path)
        pair = None
    else:
        pair = socket.socketpair()
        got = next((s.fileno() for s in pair if s.fileno() == fd), pair[0].fileno())
    print("fd %d reused: %s" % (fd, got == fd), flush=True)
    x = torch.ones(1000) * 2          # events for the bridge to send
    del x
    if pair is None:
        try:
            os.write(got, b"the program's own data\n")
            print("fd: the program's file is still open", flush=True)
        except OSError as e:
            print("fd: the program's file was closed under it: %s" % e, flush=True)
    else:
        other = pair[1] if pair[0].fileno() == got else pair[0]
        other.setblocking(False)
        try:
            n = len(other.recv(65536))
        except BlockingIOError:
            n = 0
        print("fd: the program's socket received %d bytes from the bridge" % n, flush=True)


class Endless(nn.Module):
    """A module the program holds and never trains or calls, whose own
    methods never end (parameters, modules) and whose unknown attributes
    raise: memsplit reads what it holds without running its code."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(32, 32))

    def parameters(self, recurse=True):
        while True:
            yield self.w

    def modules(self):
        while True:
            yield self

    def __getattr__(self, name):
        if name == "w":      # its own weight, as nn.Module would find it (none yet: register_parameter asks)
            if "w" in self._parameters:
                return self._parameters["w"]
            raise AttributeError(name)
        raise RuntimeError("Endless has no %s" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", default="plain", choices=sorted(NAMES))
    ap.add_argument("--pre", default="embed", help="the pre-modules' names, |-separated")
    ap.add_argument("--pre-free", default="", help="modules with no parameters after them (|-separated names)")
    ap.add_argument("--list", default="body", help="the block list's name")
    ap.add_argument("--names-out", default="")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--forge-late", action="append", default=[], help="a line sent on a connection of its own, "
                    "after step 1")
    ap.add_argument("--block-class", default="", help="the blocks' class name")
    ap.add_argument("--forge-long", type=int, default=0, help="a line of this many bytes on a connection of its own")
    ap.add_argument("--idle-conns", type=int, default=0, help="connections to the bridge's socket that never write")
    ap.add_argument("--forge", action="append", default=[], help="a line sent on a connection of the program's own")
    ap.add_argument("--ignore-signals", action="store_true", help="SIGINT, SIGTERM and SIGHUP ignored")
    ap.add_argument("--setsid", action="store_true", help="leave memsplit's session and process group first")
    ap.add_argument("--sleep-after", type=int, default=-1, help="print 'ready' after this step and sleep --sleep s")
    ap.add_argument("--sleep", type=float, default=60)
    ap.add_argument("--subprocess", action="store_true", help="after step 1, a Python subprocess trains another model")
    ap.add_argument("--exit-mid-forward", action="store_true")
    ap.add_argument("--thread-mb", type=float, default=0, help="a thread makes a tensor this big, kept to the end")
    ap.add_argument("--fd-reuse", choices=["", "file", "socket"], default="",
                    help="after step 1 close the bridge's descriptor and reuse its number")
    ap.add_argument("--held-endless", action="store_true", help="the program holds an untrained module (4 KiB of "
                    "weights) whose parameters() and modules() never end and whose attributes raise")
    a = ap.parse_args()
    if a.setsid:
        os.setsid()
    if a.ignore_signals:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    keep = [forge(line) for line in a.forge]
    if a.forge_long:
        keep.append(forge('{"ev":"warn","what":"x","text":"%s"}' % ("a" * a.forge_long)))
    for _ in range(a.idle_conns):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["MEMSPLIT_BRIDGE_SOCK"])
        keep.append(s)
    torch.manual_seed(0)
    model = Model(a)
    held = [Endless()] if a.held_endless else []     # held to the end, never called
    if a.names_out:
        names = ["%s.%s" % (a.list, NAMES[a.names](i)) for i in range(a.blocks)]
        with open(a.names_out, "w") as f:
            json.dump(names, f)       # ensure_ascii: any name, surrogates too
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, a.vocab, (8, 9), generator=torch.Generator().manual_seed(1))
    for step in range(a.steps):
        if a.thread_mb and step == 1:
            t = threading.Thread(target=lambda: held.append(torch.ones(int(a.thread_mb * 2**20) // 4)))
            t.start()
            t.join()
        opt.zero_grad(set_to_none=True)
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, a.vocab), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        print("step %d loss %.4f" % (step + 1, loss.item()), flush=True)
        if step == 0:
            keep += [forge(line) for line in a.forge_late]
        if a.subprocess and step == 0:
            subprocess.run([sys.executable, os.path.abspath(__file__), "--blocks", "9", "--steps", "4"], check=True)
        if a.fd_reuse and step == 0:
            fd_reuse(a.fd_reuse)
        if step + 1 == a.sleep_after:
            print("ready", flush=True)
            time.sleep(a.sleep)


if __name__ == "__main__":
    main()
