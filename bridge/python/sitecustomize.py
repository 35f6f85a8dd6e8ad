"""memsplit's bridge loader (docs/bridge.md).

memsplit puts this folder first on the PYTHONPATH of a program it runs.
Python imports the first ``sitecustomize`` it finds, so this one first runs
the one it hides (Debian ships one; a virtual environment may have its own),
then arms the bridge when memsplit started this process.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _chain_load():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if p and os.path.abspath(p) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the hidden one failing must not stop the program
        sys.stderr.write("memsplit: the program's own sitecustomize failed: %r\n" % (exc,))


_chain_load()

if os.environ.get("MEMSPLIT_BRIDGE_SOCK"):
    try:
        import memsplit_bridge

        memsplit_bridge.arm()
    except Exception as exc:
        sys.stderr.write("memsplit: the bridge could not start: %r\n" % (exc,))
