"""A module's names wrapped right after it runs, before whatever imports it
takes them: an import hook (importlib's finder protocol) on one name."""
import importlib.machinery
import sys


class AfterImport:
    """then(module) runs once, right after the module named name is first
    executed. The hook stays in sys.meta_path until then: a look that
    imports nothing (importlib.util.find_spec, as transformers asks whether
    torch is installed) passes it by; before, such a look took the hook
    away, and the import after it ran unwatched."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real, hook = spec.loader, self

        class Loader:
            def create_module(self, spec):
                return real.create_module(spec)

            def exec_module(self, module):
                real.exec_module(module)
                hook.done(module)

            def __getattr__(self, name):        # the rest of the loader's protocol (resources)
                return getattr(real, name)

        spec.loader = Loader()
        return spec

    def done(self, module):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
            self.then(module)


def after_import(name, then):
    """then(module) now where the module is imported already, else right
    after its import."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, AfterImport(name, then))
