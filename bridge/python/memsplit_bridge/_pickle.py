"""A module the program pickles (torch.save(model), pickle.dumps) is the
program's own: memsplit's hooks on it and the forwards a plan put in its
__dict__ are left out of the pickled state, so the file loads where memsplit
is not (the hooks are bound to the session, which holds modules that do not
pickle: the trial crashed such a program with "cannot pickle 'module'").

copy.deepcopy goes through the same __reduce_ex__, and there the copy keeps
them (docs/bridge.md: the copy runs placed as the original, heard by the one
session), so a reduction asked for by the copy module is the default one.
"""
import copy
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_COPY_FILE = os.path.abspath(copy.__file__)
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")


def ours(fn):
    """Whether fn is the bridge's: a function or method whose code is in this
    package, or an instance of one of its classes (functools.wraps copies the
    program's __module__ onto a wrapper, so the code's file decides)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is not None:
        return os.path.dirname(os.path.abspath(code.co_filename)) == _HERE
    return type(fn).__module__.split(".")[0] == __name__.split(".")[0]


def program_forward(m, fwd):
    """What m's __dict__ held as forward before the bridge wrapped it: None
    when the bridge's wrapper stands for m's class's own forward."""
    while fwd is not None and ours(fwd):
        fwd = getattr(fwd, "__wrapped__", None)
    if fwd is not None and getattr(fwd, "__self__", None) is m and \
            getattr(fwd, "__func__", None) is getattr(type(m), "forward", None):
        return None
    return fwd


def program_state(m, state):
    """m's pickled state without what the bridge put there."""
    if not isinstance(state, dict):
        return state
    out = dict(state)
    for name in _HOOK_DICTS:
        hooks = state.get(name)
        if not hooks:
            continue
        mine = [k for k, fn in hooks.items() if ours(fn)]
        if not mine:
            continue
        kept = type(hooks)((k, fn) for k, fn in hooks.items() if k not in mine)
        out[name] = kept
        # torch 2.x's flags per hook (with_kwargs, always_call), keyed by the same ids
        for flags in (name + "_with_kwargs", name + "_always_called"):
            if isinstance(state.get(flags), dict):
                out[flags] = type(state[flags])((k, v) for k, v in state[flags].items() if k not in mine)
    if "forward" in state and ours(state["forward"]):
        fwd = program_forward(m, state["forward"])
        if fwd is None:
            del out["forward"]
        else:
            out["forward"] = fwd
    return out


def install(torch):
    """nn.Module's reduction, for pickling: the default one, its state the
    program's own (a subclass with a reduction of its own keeps it)."""
    Module = torch.nn.Module
    if "__reduce_ex__" in Module.__dict__:
        return
    import sys

    def __reduce_ex__(self, protocol):
        rv = object.__reduce_ex__(self, protocol)
        caller = sys._getframe(1).f_code.co_filename
        if not isinstance(rv, tuple) or len(rv) < 3 or os.path.abspath(caller) == _COPY_FILE:
            return rv
        return rv[:2] + (program_state(self, rv[2]),) + rv[3:]

    Module.__reduce_ex__ = __reduce_ex__
