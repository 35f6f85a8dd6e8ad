"""On virtual devices, what torch.load makes lands on the stage whose tensor
was saved in its place, as torch.load puts each storage back on the device
it was saved from on two GPUs (a model saved whole and loaded back: a
best-model copy, a checkpoint read again). Without it every loaded storage
counted on the stage running the load, whole copies of other stages' weights
included. Only the ledger's device differs from the real thing: the bytes
are loaded by torch the same way.

torch numbers a file's storages in the order its pickler first meets them,
and loads them in the order its unpickler meets them: the same order. The
save is pickled once more here, storages only (their bytes are not
written), to note each one's stage in that order; the load's map_location
says, storage by storage, where each lands.

On every device a module saved whole under a plan and loaded back is placed
as the one saved (its pickle has none of memsplit: _pickle): on two GPUs its
weights come back on both, and unplaced it could not run.
"""
import io
import os
import pickle
import weakref


def _target_key(target):
    """What names a save's destination for the load that reads it back: its
    absolute path, or the file object itself (a buffer)."""
    if isinstance(target, (str, bytes, os.PathLike)):
        return os.path.abspath(os.fsdecode(target))
    return id(target)


def applies(s, kwargs):
    ap = s.applier
    return ap is not None and ap.placed and kwargs.get("pickle_module") is None


def _modules(torch, obj):
    """The modules a save holds at its top: obj, or a dict's or a sequence's items."""
    if isinstance(obj, torch.nn.Module):
        return {None: obj}
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    return {k: v for k, v in items if isinstance(v, torch.nn.Module)}


def note_save(torch, s, obj, target):
    """The modules obj holds, to place their loaded copies; on virtual
    devices, the stage of each storage, in the order torch.save numbers them."""
    key = _target_key(target)
    mods = _modules(torch, obj)
    if mods:
        s.saved_modules[key] = {k: weakref.ref(m) for k, m in mods.items()}
    else:
        s.saved_modules.pop(key, None)
    if not s.applier.virtual:
        return
    lib, seen, stages = s.lib, set(), []

    class Noting(pickle.Pickler):
        def persistent_id(self, o):
            if not (isinstance(o, torch.storage.TypedStorage) or torch.is_storage(o)):
                return None
            st = o
            if isinstance(o, torch.storage.TypedStorage):    # its untyped storage: torch 2's name, then 1.13's
                st = getattr(o, "_untyped_storage", None)
                if st is None:
                    st = o._storage
            ident = getattr(st, "_cdata", None) or st.data_ptr()
            if ident not in seen:
                seen.add(ident)
                stages.append(lib.owner_device(st.data_ptr()) if st.data_ptr() else None)
            return str(ident)

    try:
        Noting(io.BytesIO(), protocol=2).dump(obj)
    except Exception as exc:
        # what torch.save cannot pickle fails the program's way, in torch.save; anything else is
        # said: its loaded storages count on the stage running the load
        if "saved_homes" not in s.skip_warned:
            s.skip_warned.add("saved_homes")
            s.lib.warn("checkpoint", "the stages of a saved object's storages are not known (%r): on virtual "
                       "devices what torch.load makes of it counts on the stage running the load" % (exc,))
        return
    s.saved_homes[key] = stages


def load_kwargs(torch, s, target, kwargs):
    """torch.load's keyword arguments, with a map_location that notes where
    each storage it restores lands. Only for a load with no map_location of
    the program's (which decides alone: it may put every storage on one
    device, and the loaded module is then no placed one)."""
    stages = s.saved_homes.get(_target_key(target))
    if stages is None or kwargs.get("map_location") is not None:
        return kwargs
    restore = torch.serialization.default_restore_location
    if os.environ.get("MEMSPLIT_BRIDGE_TEST_RESTORE") == "copy":
        restore = _restore_as_copy(torch)
    at = [0]

    def map_location(storage, location):
        i = at[0]
        at[0] += 1
        stage = stages[i] if i < len(stages) else None
        # a GPU's restore makes a new storage and copies into it (UntypedStorage.cuda): the
        # tracker meets it inside restore, before its address is known here
        s.load_stage = stage
        try:
            out = restore(storage, location)
        finally:
            s.load_stage = None
        if stage is not None and out.data_ptr():
            s.load_homes[out.data_ptr()] = stage     # the CPU's: the storage itself, met later
        return out

    return dict(kwargs, map_location=map_location)


def _restore_as_copy(torch):
    """The tests' stand-in, on the CPU, for torch's restore to a GPU: a new
    storage on the same device and a copy into it, as UntypedStorage.cuda
    makes (the CPU's restore hands back the storage read from the file)."""
    def restore(storage, location):
        out = torch.UntypedStorage(storage.nbytes(), device=storage.device)
        out.copy_(storage)
        return out
    return restore


def place_loaded(torch, s, target, out):
    """The modules torch.load made of a save's modules, placed as those are
    (the same tree: module by module, by name)."""
    from ._apply import _Placed
    saved = s.saved_modules.get(_target_key(target))
    if not saved:
        return
    loaded = _modules(torch, out)
    for k, ref in saved.items():
        orig, copy = ref(), loaded.get(k)
        if orig is None or copy is None or type(orig) is not type(copy):
            continue
        pairs = list(zip(orig.named_modules(), copy.named_modules()))
        if len(pairs) != len(list(orig.modules())) or any(a[0] != b[0] or type(a[1]) is not type(b[1])
                                                        for a, b in pairs):
            continue              # not the tree that was saved
        for (_, o), (_, c) in pairs:
            f = o.__dict__.get("forward")
            if isinstance(f, _Placed) and not isinstance(c.__dict__.get("forward"), _Placed):
                f.place_loaded(c)
