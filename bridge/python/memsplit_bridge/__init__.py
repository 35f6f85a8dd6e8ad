"""memsplit's PyTorch bridge, the Python half (docs/bridge.md).

Loaded by memsplit's sitecustomize into a program memsplit runs. It only
observes: hooks return None, nothing in the program changes. It waits for
the program to import torch, then installs global module hooks, the
backward and optimizer wrappers and (unless switched off) the tensor
tracker, and reports through libmemsplit_bridge.so, which writes every
event to the memsplit parent at once.
"""
import json
import os
import sys

from . import _imports, _lib

__all__ = ["arm"]

_armed = False


def _config():
    try:
        return json.loads(os.environ.get("MEMSPLIT_BRIDGE_CONFIG", "{}"))
    except ValueError:
        return {}


def arm():
    """Connect and say hello; set up the rest once torch is imported."""
    global _armed
    if _armed:
        return
    _armed = True
    lib = _lib.load()
    if lib is None or not lib.connected:
        return
    cfg = _config()
    lib.send("hello", pid=os.getpid(), ppid=os.getppid(), argv=sys.argv, python=sys.version.split()[0],
             bridge=1, **{"pass": cfg.get("pass", "trial")})
    global _pending
    _pending = (lib, cfg)
    _imports.after_import("torch", _on_torch)   # right after the program's own `import torch`


_pending = None


def _on_torch(torch):
    global _pending
    if _pending is None:
        return
    lib, cfg = _pending
    _pending = None
    try:
        from . import _session
        _session.start(torch, lib, cfg)
    except Exception as exc:  # the bridge must never break the program
        lib.warn("bridge", "setup failed: %r" % (exc,))
