"""The program's checkpoints: torch.save and torch.load with a path (or an
open file), Lightning's CheckpointIO, safetensors' files, and the renames
and removals of what was saved. doctor hears each save and load, to say
whether a restart resumes. The diagnostic passes (the trial, the uncapped
and record passes) write, rename and remove none of the program's
checkpoint files: memsplit's own files stand in for them, and the
program's reads of those paths read them (docs/bridge.md, "Checkpoints")."""
import atexit
import builtins
import functools
import itertools
import os
import shutil
import stat
import sys
import weakref

from . import _homes, _imports

# as os and shutil have them before the wrappers below
_real_remove, _real_rmdir, _real_rmtree = os.remove, os.rmdir, shutil.rmtree
_real_isdir, _real_lexists = os.path.isdir, os.path.lexists
_real_open, _real_replace = builtins.open, os.replace
_beside_names = itertools.count()      # the files written beside the program's paths (_pending)


def install(torch, s):
    """torch.save, torch.load, the renames and removals of os, the folders
    made and removed, and the checks of a path."""
    _watch_checkpoints(torch, s)
    _watch_moves(s)
    _watch_links(s)
    _watch_folders(s)
    _watch_looks(s)
    _watch_safetensors(s)
    if _diagnostic(s):
        _watch_opens(s)
        _watch_exit(s)


def _watch_checkpoints(torch, s):
    """torch.save and torch.load with a path (or an open file): the
    program's checkpoints, so that doctor can say whether a restart resumes.
    The diagnostic passes (the trial, the uncapped pass) do not write the
    program's files: their steps are a measurement, and a checkpoint from
    them would be what the rerun resumes from, or would replace one the
    program made before. A save to a path goes to a file of memsplit's own
    instead, which a load of that path then reads (a program that loads what
    it saved: a best model evaluated, a checkpoint read back)."""
    for name in ("save", "load"):
        real = getattr(torch, name)

        def wrapped(*a, _real=real, _name=name, **k):
            at = 1 if _name == "save" else 0
            key = "f" if "f" in k else None
            target = k["f"] if key else (a[at] if len(a) > at else None)
            path = _path_of(target, "write" if _name == "save" else "read")
            # under a plan: a save's modules (and storages' stages) noted; a load that puts each
            # storage back where it was saved from (no map_location) is placed as they were
            homes = target is not None and _homes.applies(s, k) and \
                (bool(a) if _name == "save" else len(a) <= 1 and k.get("map_location") is None)
            if homes and _name == "save":
                _homes.note_save(torch, s, a[0], target)
            elif homes:
                k = _homes.load_kwargs(torch, s, target, k)
            if path is not None and _name == "save":
                if _diagnostic(s):
                    theirs = _standing_for(s, path)
                    if theirs:
                        path = theirs   # a file the program opened that memsplit's stands for (_watch_opens)
                        _skip_save(s, "torch.save", path, s.redirects[theirs])
                    elif not isinstance(target, (str, bytes, os.PathLike)):
                        _skip_save(s, "torch.save", path)       # the program opened (emptied) it itself
                        return None
                    else:
                        a, k = _retarget(a, k, at, key, _redirect(s, "torch.save", path))
            elif path is not None:
                full = os.path.abspath(path)
                mine = s.redirects.get(full) or s.aliases.get(full)
                if mine is not None and isinstance(target, (str, bytes, os.PathLike)):
                    a, k = _retarget(a, k, at, key, mine)
                elif mine is None:
                    _loaded(s, full)            # the program's own checkpoint (a resume)
            if path is not None:
                s.send(_name, path=path, step=s.steps)
                if _name == "save":
                    s.saved_paths.add(os.path.abspath(path))
            if _name == "save" or not homes:
                return _real(*a, **k)
            try:
                out = _real(*a, **k)
            finally:
                s.load_homes.clear()       # storages it made and no tensor took: addresses free again
            _homes.place_loaded(torch, s, target, out)
            return out

        wrapped.__wrapped__ = real
        setattr(torch, name, wrapped)


def _watch_moves(s):
    """A checkpoint saved to a temporary path and renamed over the real one
    (os.replace, os.rename, shutil.move: an atomic save). In a diagnostic
    pass the temporary file is memsplit's own: it is renamed to memsplit's
    file for the checkpoint's path, which the program's loads of that path
    read, and the program's folder is left alone; before, the rename failed
    (FileNotFoundError) and the pass with it. In every pass the checkpoint's
    path is what doctor hears was saved, so that a restart loading it is
    known to resume. In a diagnostic pass os.remove and os.unlink of a path
    it saved remove memsplit's file instead.

    A checkpoint the program loaded (the one it resumed from) is the
    program's file: a diagnostic pass neither renames nor removes it (a
    backup made before each save, os.replace(P, P + ".bak"), moved the
    program's checkpoint away in the trial, and the rerun then began from
    the first step). Its new name stands for it instead: the program's loads
    of that name read it. A file renamed over a checkpoint of either (one
    the program wrote through open and renames into place) takes memsplit's
    file for that path. A rename or removal of anything else is the
    program's own."""
    for name in ("replace", "rename"):
        real = getattr(os, name)

        def wrapped(src, dst, *a, _real=real, _name=name, **k):
            paths = not a and not k and all(isinstance(p, (str, bytes, os.PathLike)) for p in (src, dst))
            if not paths:
                return _real(src, dst, *a, **k)
            diagnostic = _diagnostic(s)
            if not (s.saved_paths or s.loaded_paths or s.redirects):    # no checkpoint yet: the program's
                if diagnostic:
                    _keep(s, os.path.abspath(os.fsdecode(dst)))
                return _real(src, dst)
            full = os.path.abspath(os.fsdecode(src))
            to = os.fsdecode(dst)
            if full in s.pending:       # a file still being written, renamed: put in place first
                _settle(s, full, flush=True)
            if not (full in s.saved_paths or diagnostic and (full in s.redirects or _programs(s, full))):
                dst_full = os.path.abspath(to)
                if diagnostic and (dst_full in s.redirects or _programs(s, dst_full)):
                    # a file written beside a checkpoint and renamed over it (an atomic write): memsplit's
                    # file for that path takes it; the program's checkpoint stays
                    if dst_full not in s.redirects:
                        _skip_write(s, "os.%s" % _name, to)
                    return _real(src, _mine(s, dst_full))
                if diagnostic:
                    _keep(s, dst_full)      # the program's rename over its file from before (_put_back)
                return _real(src, dst)
            if diagnostic and full not in s.saved_paths and full in s.redirects:
                # a file of memsplit's standing for the program's checkpoint (_watch_opens)
                return _real(s.redirects[full], _mine(s, to))
            if diagnostic:
                mine = s.redirects.get(full)
                if mine is None and full in s.saved_paths and full not in s.aliases:
                    _skip_save(s, "os.%s" % _name, to)  # a save the pass skipped (into a file the program opened)
                    return None
                if mine is None:        # the program's checkpoint, or a name standing for it
                    s.aliases[os.path.abspath(to)] = s.aliases.pop(full, full)
                    s.hidden.add(full)
                    _skip_move(s, "os.%s" % _name, full, to)
                    return None
                out = _real(mine, _redirect(s, "os.%s" % _name, to))
            else:
                out = _real(src, dst)
                s.send("save", path=to, step=s.steps)
            s.saved_paths.discard(full)
            s.saved_paths.add(os.path.abspath(to))
            return out

        wrapped.__wrapped__ = real
        setattr(os, name, wrapped)
    for name in ("remove", "unlink"):
        real = getattr(os, name)

        def removed(path, *a, _real=real, _name=name, **k):
            # a diagnostic pass's removal of a checkpoint it saved (the program keeps its last k):
            # memsplit's file; the program's, of that name, is not the pass's to delete (before,
            # the trial deleted it, or failed with FileNotFoundError where there was none)
            if (s.redirects or s.loaded_paths) and not a and not k and isinstance(path, (str, bytes, os.PathLike)) \
                    and _diagnostic(s):
                full = os.path.abspath(os.fsdecode(path))
                mine = s.redirects.get(full)
                if mine is not None:
                    return _real(mine)
                if _programs(s, full):
                    s.aliases.pop(full, None)
                    s.hidden.add(full)
                    _skip_remove(s, "os.%s" % _name, full)
                    return None
            return _real(path, *a, **k)

        removed.__wrapped__ = real
        setattr(os, name, removed)


def _watch_links(s):
    """A link to a checkpoint saved (os.symlink: ModelCheckpoint's
    save_last="link", last.ckpt a link to the checkpoint just saved). In a
    diagnostic pass the link to a checkpoint that went to memsplit's own
    file is made among memsplit's files, and the program's loads and
    checks of its path follow it; before, the trial left a link in the
    program's folder to a file never written (which the rerun's
    ckpt_path="last" then failed to load), or, where the program's own
    link stayed (the one a resumed run loaded), failed with
    FileNotFoundError. In every pass doctor hears the link's path saved, so
    a restart that loads it is known to resume."""
    real_symlink = os.symlink

    def symlink(src, dst, *a, **k):
        if not s.saved_paths or a or k or not all(isinstance(p, (str, bytes, os.PathLike)) for p in (src, dst)):
            return real_symlink(src, dst, *a, **k)
        to = os.path.abspath(os.fsdecode(dst))
        target = os.path.abspath(os.path.join(os.path.dirname(to), os.fsdecode(src)))
        if target not in s.saved_paths:
            return real_symlink(src, dst)
        if _diagnostic(s):
            mine = s.redirects.get(target)
            if mine is None:
                return real_symlink(src, dst)
            link = _redirect(s, "os.symlink", to)
            if _real_lexists(link):
                _real_remove(link)
            out = real_symlink(mine, link)
        else:
            out = real_symlink(src, dst)
            s.send("save", path=to, step=s.steps)
        s.saved_paths.add(to)
        return out

    symlink.__wrapped__ = real_symlink
    os.symlink = symlink


def _watch_opens(s):
    """A diagnostic pass's opens of the program's files. A read of a path
    the pass saved (torch.save, Lightning's, safetensors') reads memsplit's
    file for it, as torch.load does: a program that reads back its
    checkpoint's bytes (to copy it as the best model, to hash it) runs as
    it does alone; before, it got FileNotFoundError, or the program's older
    file. A rewrite ("w") of the program's checkpoint (one it loaded: the
    run it resumed, or a name standing for it) goes to a file of memsplit's
    own, which later opens of the path see. A binary file the program opens
    for writing ("wb": the only kind torch.save can write into) is written
    beside its path first (_pending): when it is closed, or at the pass's
    end, it is renamed over the path as alone, unless the program saved a
    checkpoint into it (open(path, "wb"), then torch.save into the file),
    which goes to memsplit's files. Before, such a save was skipped, and the
    pass's open had emptied the file: a checkpoint of a run before, or the
    one the program resumed from, which the rerun then could not load. Text
    files, appends and changes in place are the program's, written as
    alone; a file from before the pass that a write replaces is kept under
    a hidden name until the pass's end, which puts it back if it is a
    checkpoint's companion (_put_back). Only in the diagnostic passes: the
    rerun is the program's own run."""
    import io
    real_open = _real_open

    def open(file, mode="r", *a, **k):
        if not isinstance(file, (str, bytes, os.PathLike)) or not isinstance(mode, str):
            return real_open(file, mode, *a, **k)
        write = "w" in mode
        if not (write or s.redirects or s.aliases or s.loaded_paths):
            return real_open(file, mode, *a, **k)
        full = os.path.abspath(os.fsdecode(file))
        if write and _programs(s, full):
            _mine(s, full)
            _skip_write(s, "open", full)
        elif write and full not in s.redirects and k.get("opener") is None and _standing_for(s, full) is None \
                and _own(s):
            kind = _kind(s, full)
            if kind is not None and "b" in mode:
                f = _pending(s, real_open, full, mode, a, k)
                if f is not None:
                    return f
            elif kind == "old":
                return _rewrite(s, real_open, full, mode, a, k)
            elif kind == "new":
                _made(s, full)
        stands = s.redirects.get(full) or s.aliases.get(full)
        return real_open(file if stands is None else stands, mode, *a, **k)

    open = functools.update_wrapper(open, real_open)
    builtins.open = open
    io.open = open


def _watch_exit(s):
    """os._exit in a diagnostic pass (a program that ends so, not waiting
    for its workers): the pass's files are settled and the program's put
    back first (tidy), as at the end Python's exit handlers see; os._exit
    runs none of them, and before, the files the pass replaced stayed
    under their hidden names."""
    real = os._exit

    def _exit(code, _real=real):
        _tidy_at(s, "os._exit")
        _real(code)

    os._exit = functools.update_wrapper(_exit, real)
    _tidy_at_term(s)


def _tidy_at(s, when):
    """tidy at an end the program asked for (os._exit, a signal), which
    goes ahead whatever this finds."""
    try:
        tidy(s)
    except Exception as e:
        s.lib.warn("checkpoint", "the pass's files were not all put back at %s: %s" % (when, str(e)[:200]))


def _tidy_at_term(s):
    """A SIGTERM the program leaves to the default (memsplit passes on the
    one it gets, a scheduler's or a timeout's): the pass's files are
    settled and the program's put back, then the program dies by the
    signal as alone. By default the signal ended the program at once, with
    no exit handler. Only from the main thread (where Python runs signal
    handlers), and only where the program has no handler of its own; a
    program stuck in one call until memsplit's SIGKILL still leaves its
    files as a killed pass does. A handler the program sets later that
    calls the one it found (Lightning's _HandlersCompose) finds this one
    doing nothing, as the default it replaced: the program ends its own
    way, and the pass's end tidies."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum, frame):
        if signal.getsignal(signum) is not on_term:
            # called from a handler the program set later, which takes in the one it found
            # (Lightning's at fit: alone, with the default there, it calls none): as alone
            return
        _tidy_at(s, "SIGTERM")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)


def _own(s):
    """This is the pass's own process, not a child forked from it (a
    DataLoader's worker), which writes as the program alone does and
    leaves the pass's files to it."""
    return getattr(s, "pid", None) in (None, os.getpid())


def _older(st, began):
    """A file's status says it is from before the pass: its contents (mtime)
    or its inode (ctime, which no program sets) older than the pass. The
    earlier of the two: a file from before with an mtime set ahead (a copy
    from a host whose clock ran ahead) still has its older ctime, and one the
    pass kept under a second name (_keep: a link, a new ctime) its mtime."""
    return min(st.st_mtime, st.st_ctime) < began


def _kind(s, full):
    """What a diagnostic pass's write would replace at full: "new" (no file
    yet), "old" (a regular file from before the pass), "ours" (one the pass
    wrote), None (a link, a device, a pipe, a folder: written as alone)."""
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return "new"
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return "old" if _older(st, s.began) else "ours"


def _rewrite(s, real_open, full, mode, a, k):
    """A text file from before the pass, opened for writing: kept (_keep),
    then written as a new file at its path with the old one's permissions,
    as alone (what the program writes is at its path as it writes it)."""
    st = _keep(s, full)
    if full not in s.kept:
        return real_open(full, mode, *a, **k)
    try:
        _real_remove(full)
    except OSError:             # a folder the program may not change, a file it may: in place, as alone
        _real_remove(s.kept.pop(full))
        _journal(s)
        return real_open(full, mode, *a, **k)
    try:
        f = real_open(full, mode, *a, **k)
    except BaseException:
        _real_replace(s.kept.pop(full), full)
        _journal(s)
        raise
    try:
        os.chmod(full, stat.S_IMODE(st.st_mode))
    except OSError:
        pass
    return f


def _keep(s, full):
    """full, about to be replaced by a diagnostic pass's write or rename: a
    regular file from before the pass keeps its contents under a second,
    hidden name beside it (a hard link: nothing copied), so that the pass's
    end can put it back where it belongs to a checkpoint of the program's
    (tidy, _put_back), and a pass killed before then leaves it there; a
    path with no file yet is noted as the pass's (made_files). Its status
    (None where there is none), for the permissions of what replaces it. A
    file with other names already (hard links), or where no link can be
    made, is not kept: its rewrite is the program's, as alone."""
    if full in s.kept:
        try:
            return os.lstat(s.kept[full])
        except OSError:
            return None         # removed by hand: the end says it could not put it back
    if not _own(s):
        return None             # a forked child's (a DataLoader worker's): the program's, as alone
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        _made(s, full)
        return None
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or not _older(st, s.began) or st.st_nlink > 1:
        return st
    kept = _beside(full, ".before")
    try:
        os.link(full, kept)
    except OSError:
        return st
    s.kept[full] = kept
    _journal(s)
    return st


def _made(s, full):
    """full, a file the pass makes where there was none: in a checkpoint's
    folder the journal names it (memsplit removes it if the pass is
    killed). Elsewhere the journal is not written again: a program may
    make thousands of files in a pass (a log, images), and each write
    rebuilds the journal."""
    if full in s.made_files:
        return
    s.made_files.add(full)
    if os.path.dirname(full) in _checkpoint_dirs(s):
        _journal(s)


def _checkpoint_dirs(s):
    """The folders of the program's checkpoints: those of what it loaded,
    and those from before that the pass saved over (_put_back)."""
    return {os.path.dirname(p) for p in s.loaded_paths} | s.before_dirs


def _loaded(s, full):
    """full, a checkpoint of the program's that it loaded."""
    if full not in s.loaded_paths:
        s.loaded_paths.add(full)
        if s.kept or s.made_files:
            _journal(s)         # its folder may be one where a kept file goes back, or an added one goes


def _journal(s):
    """What the pass's end would do now with the files it holds in the
    program's folders, in the pass's scratch folder for memsplit to do if
    the pass is killed before it (run/undo_files.h): each kept file back
    over its path where its folder is a checkpoint's (_put_back), else
    removed; each file being written beside its path removed (the
    program's file stays as it was, not half written); each file the pass
    added in a checkpoint's folder removed (memsplit removes only one
    changed since the pass began). Written when it changes, through a
    rename: never half a journal."""
    scratch = s.cfg.get("scratch_dir")
    if not isinstance(scratch, str) or not _own(s):
        return
    ours = _checkpoint_dirs(s) if s.kept or s.made_files else set()
    fields = []
    for full, was in s.kept.items():
        fields += [b"R", os.fsencode(was), os.fsencode(full)] if os.path.dirname(full) in ours else \
            [b"D", os.fsencode(was)]
    for full in s.pending:
        beside = s.redirects.get(full)
        if beside is not None:
            fields += [b"D", os.fsencode(beside)]
    for full in sorted(f for f in s.made_files if os.path.dirname(f) in ours and f not in s.kept):
        fields += [b"N", os.fsencode(full)]
    data = b"".join(f + b"\0" for f in fields)
    if data == s.journal:
        return
    path = os.path.join(scratch, "undo")
    try:
        if data:
            with _real_open(path + ".new", "wb") as f:
                f.write(data)
            _real_replace(path + ".new", path)
        elif _real_lexists(path):
            _real_remove(path)
    except OSError as e:        # the scratch folder gone too: said, a killed pass would put nothing back
        _say_once(s, "journal", "could not note, for a pass killed before its end, which of the program's files to put "
                  "back (%s)" % e)
    s.journal = data


def _beside(full, tail=""):
    """A hidden name in full's folder for a file of the pass's that stands
    in for full's: renamed over it (or removed) later."""
    here, name = os.path.split(full)
    return os.path.join(here, ".%s.memsplit-%d-%d%s" % (name, os.getpid(), next(_beside_names), tail))


def _put_back(s):
    """At a diagnostic pass's end: the program's files from before that the
    pass replaced (_keep) in the folder of a checkpoint of the program's (one
    it loaded, or one from before that the pass saved over) are put back as
    they were, and the files the pass added there are removed: a checkpoint
    is its folder's files together (HF's checkpoint-N: the weights, the
    optimizer's state, the config and the trainer's state in JSON), and
    before, the trial left its own JSON beside the run before's weights.
    Anywhere else what the pass wrote is the program's output, as alone."""
    kept, s.kept = s.kept, {}
    ours = _checkpoint_dirs(s)
    back, failed = [], []
    for full, was in kept.items():
        try:
            if os.path.dirname(full) in ours:
                _real_replace(was, full)
                back.append(full)
            else:
                _real_remove(was)
        except OSError as e:
            failed.append("%s (%s; it is at %s)" % (full, e, was))
    made, s.made_files = s.made_files, set()
    added = []
    for full in sorted(made):
        if os.path.dirname(full) in ours and _kind(s, full) == "ours":
            try:
                _real_remove(full)
                added.append(full)
            except OSError as e:
                failed.append("%s (%s)" % (full, e))
    _journal(s)
    if back or added:
        s.lib.warn("checkpoint", "the %s put back %d of the program's files in its checkpoints' folders as they were "
                   "before it%s%s" % (_pass_name(s), len(back), _some(back),
                                      ", and removed %d it added there%s" % (len(added), _some(added)) if added else ""))
    if failed:
        s.lib.warn("checkpoint", "the %s could not put back the program's files as they were in its checkpoints' folders: "
                   "%s" % (_pass_name(s), "; ".join(failed[:4])))


def _some(paths):
    """ (the first few of paths), for a warning; "" for none."""
    return " (%s%s)" % (", ".join(paths[:4]), ", ..." if len(paths) > 4 else "") if paths else ""


def _pending(s, real_open, full, mode, a, k):
    """A binary file the program opens for writing, opened on a file of
    memsplit's beside its path (hidden, in the same folder: renamed over
    the path later, the file the program wrote is the one there, also what
    it keeps writing through a memory map after closing it); settled
    (_settle) when the program closes it (its close, or its finalizer),
    else at the pass's end (tidy). None where no such file can be made
    (the program's own open then says why)."""
    beside = _beside(full)
    try:
        f = real_open(beside, mode, *a, **k)
    except OSError:
        return None
    ref, cls = weakref.ref(f), type(f)

    def close():
        g = ref()
        try:
            if g is not None:
                cls.close(g)
        finally:                # under the path it has now (a rename carries it)
            for p in [p for p, r in s.pending.items() if r is ref]:
                _settle(s, p)

    try:
        f.close = close         # a weak reference: the file is freed as it would be
    except AttributeError:
        pass                    # no attributes of its own: settled at the pass's end
    s.redirects[full] = beside
    s.pending[full] = ref
    _journal(s)
    return f


def _settle(s, full, flush=False):
    """A pending binary file (_pending), its writing done: a checkpoint the
    program saved into it goes to memsplit's files (its loads of the path
    read it); anything else is renamed over the program's path, as alone."""
    ref = s.pending.pop(full, None)
    if ref is None:
        return
    beside = s.redirects.pop(full, None)
    if beside is None:
        return
    try:
        _settle_beside(s, full, ref, beside, flush)
    finally:
        _journal(s)


def _settle_beside(s, full, ref, beside, flush):
    g = ref()
    if flush and g is not None and not g.closed:
        g.flush()
    try:
        if full in s.saved_paths:
            mine = _mine(s, full)
            try:
                _real_replace(beside, mine)
            except OSError:     # another filesystem
                with _real_open(beside, "rb") as src, _real_open(mine, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                _real_remove(beside)
        else:
            st = _keep(s, full)
            _real_replace(beside, full)
            if st is not None:
                os.chmod(full, stat.S_IMODE(st.st_mode))     # as a truncation keeps them
    except OSError as e:
        s.redirects[full] = beside      # the program's reads of the path still see what it wrote
        s.lib.warn("checkpoint", "the %s could not put %s in place (%s): it stays at %s" %
                   (_pass_name(s), full, e, beside))


def _standing_for(s, path):
    """The program's path that path, a file of memsplit's own (or one being
    written beside it: _pending), stands for ("" for a file of memsplit's
    that stands for none now); None for any other path."""
    mine = os.path.abspath(path)
    theirs = next((p for p, m in s.redirects.items() if m == mine), None)
    if theirs is None and s.redirect_dir is not None and mine.startswith(s.redirect_dir + os.sep):
        return ""
    return theirs


def _skip_write(s, how, path):
    """In a diagnostic pass, a write over the program's checkpoint (one it
    loaded): to memsplit's file for that path instead, said once per way."""
    _say_once(s, how + " write", "does not rewrite the program's checkpoints: %s of %s went to a file of memsplit's "
              "own, which the program's reads of that path see (the checkpoint keeps what it held)" % (how, path))


def _watch_safetensors(s):
    """safetensors writes and reads its files itself (not through torch.save
    or open): a model saved with it (save_file, save_model, HF's
    save_pretrained) is a checkpoint as torch.save's is, and a diagnostic
    pass writes it to memsplit's own file; safe_open (load_file, HF's
    loading) of such a path reads that. Wrapped where safetensors keeps
    them (serialize_file, safe_open), as soon as it is imported, before
    safetensors.torch and the program take their names from there."""
    def wrap(mod):
        try:
            _wrap_safetensors(s, mod)
        except Exception as exc:  # the bridge must never break the program
            s.lib.warn("bridge", "safetensors' saves and loads not watched: %r" % (exc,))

    _imports.after_import("safetensors", wrap)


def _wrap_safetensors(s, mod):
    """serialize_file and safe_open of safetensors, as _watch_safetensors
    says."""
    real_write = getattr(mod, "serialize_file", None)
    real_open = getattr(mod, "safe_open", None)
    if real_write is None or real_open is None or getattr(real_write, "_memsplit", False):
        return

    def serialize_file(tensors, filename, *a, **k):
        if not isinstance(filename, (str, bytes, os.PathLike)):
            return real_write(tensors, filename, *a, **k)
        path = os.fsdecode(filename)
        s.saved_paths.add(os.path.abspath(path))
        if _diagnostic(s):
            return real_write(tensors, _redirect(s, "safetensors' save", path), *a, **k)
        s.send("save", path=path, step=s.steps)
        return real_write(tensors, filename, *a, **k)

    def safe_open(filename, *a, **k):
        if not isinstance(filename, (str, bytes, os.PathLike)):
            return real_open(filename, *a, **k)
        full = os.path.abspath(os.fsdecode(filename))
        mine = s.redirects.get(full) or s.aliases.get(full)
        if mine is None:
            _loaded(s, full)
        s.send("load", path=os.fsdecode(filename), step=s.steps)
        return real_open(filename if mine is None else mine, *a, **k)

    for fn, was in ((serialize_file, real_write), (safe_open, real_open)):
        functools.update_wrapper(fn, was, updated=())   # safe_open is a class: not its attributes
        fn._memsplit = True
        s.rebind[id(was)] = (was, fn)
    mod.serialize_file = serialize_file
    mod.safe_open = safe_open


def rebind(s):
    """The names a module took from safetensors before the bridge wrapped
    them (a `from safetensors import safe_open` that ran before the
    program's `import torch`), bound to the wrappers: called once the
    program trains. safetensors' own compiled module keeps its originals."""
    if not s.rebind:
        return
    for name, mod in list(sys.modules.items()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict) or name.startswith("safetensors._"):
            continue
        for attr, v in list(d.items()):
            hit = s.rebind.get(id(v))
            if hit is not None and hit[0] is v:
                d[attr] = hit[1]


def _watch_folders(s):
    """Folders in a diagnostic pass. A checkpoint folder the program removes
    (shutil.rmtree: the last k kept, one folder a checkpoint) loses the
    files of memsplit's own that stand for the checkpoints the pass saved
    in it; the folder itself goes only where it holds nothing from before
    the pass (no file older than the pass, none the program loaded): else it
    is the program's (a run before saved to that name, or the program
    resumed from it), left where it is, with a warning, and the program's
    checks of a path see it gone (_watch_looks). Before, the trial deleted
    it. A folder that holds no checkpoint of the pass's or the program's is
    the program's to remove. The folders the pass makes (os.makedirs) are
    noted, so that its checkpoint folders are removed at its end (tidy): a
    program that resumes from its latest checkpoint folder finds none of
    the pass's."""
    real_mkdir = os.mkdir

    def mkdir(path, *a, **k):
        full = os.path.abspath(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) and \
            k.get("dir_fd") is None and _diagnostic(s) else None
        if full is not None and full in s.hidden and _real_isdir(full):
            s.hidden.discard(full)      # made again where the program removed it: the pass's to use
            return None
        out = real_mkdir(path, *a, **k)
        if full is not None:
            s.made_dirs.append(full)
        return out

    mkdir.__wrapped__ = real_mkdir
    os.mkdir = mkdir

    def rmtree(path, *a, **k):
        if not (s.redirects or s.loaded_paths or s.aliases) or not _diagnostic(s) or \
                not isinstance(path, (str, bytes, os.PathLike)) or k.get("dir_fd") is not None:
            return _real_rmtree(path, *a, **k)
        top = os.path.abspath(os.fsdecode(path))
        under = top.rstrip(os.sep) + os.sep
        mine = [p for p in s.redirects if p.startswith(under)]
        programs = [p for p in list(s.loaded_paths) + list(s.aliases) if p.startswith(under)]
        if not mine and not programs:
            return _real_rmtree(path, *a, **k)      # no checkpoint in it: the program's own folder
        for p in mine:
            try:
                _real_remove(s.redirects[p])
            except FileNotFoundError:
                pass                    # removed before (os.remove of the checkpoint)
        if programs or _holds_older(top, s.began):
            s.hidden.add(top)
            _skip_rmtree(s, top, bool(mine))
            return None
        return _real_rmtree(path, *a, **k)

    # its name and attributes too (avoids_symlink_attacks, which callers read)
    shutil.rmtree = functools.update_wrapper(rmtree, _real_rmtree)


def _holds_older(top, began):
    """Whether a folder holds a file older than the pass (a run before's)."""
    for here, _, files in os.walk(top):
        for f in files:
            try:
                if _older(os.lstat(os.path.join(here, f)), began):
                    return True
            except OSError:
                pass
    return False


def _watch_looks(s):
    """A diagnostic pass's checks of a path (os.path.exists, lexists,
    isfile, isdir, islink) see what the program alone would: a checkpoint the pass
    saved is there (memsplit's file stands for it), a new name of the
    program's checkpoint is there, and a file or folder of the program's
    that the pass left where the program removed it is not. Before, a
    program that checked its checkpoint after saving it (a best model
    evaluated when it exists) took the other branch in the trial. Other
    reads of a folder (os.listdir, glob) see the folder as it is."""
    for name in ("exists", "lexists", "isfile", "isdir", "islink"):
        real = getattr(os.path, name)

        def look(path, _real=real):
            if not (s.redirects or s.aliases or s.hidden) or not isinstance(path, (str, bytes, os.PathLike)):
                return _real(path)
            full = os.path.abspath(os.fsdecode(path))
            stands = s.redirects.get(full) or s.aliases.get(full)
            if stands is not None:
                return _real(stands)
            return False if s.hidden and _hidden(s, full) else _real(path)

        setattr(os.path, name, functools.update_wrapper(look, real))


def _hidden(s, full):
    while True:
        if full in s.hidden:
            return True
        up = os.path.dirname(full)
        if up == full:
            return False
        full = up


def tidy(s):
    """At a diagnostic pass's end, first the binary files the program still
    has open for writing (_pending: flushed, settled), then the checkpoint
    folders the pass made: a folder the pass made that holds a checkpoint
    which went to memsplit's own file is the pass's checkpoint, with
    whatever else the program wrote there (a config and a trainer's state
    in JSON, no checkpoint of torch's or safetensors'), and goes whole,
    unless it holds a file older than the pass (one the program moved in). Before, a run after the trial
    that resumes from its latest checkpoint folder (HF Trainer's
    resume_from_checkpoint=True) found the trial's, and resumed from the
    trial's weights without the optimizer state that went to memsplit's
    file. Then the folders it made on the way to such a checkpoint, left
    empty, deepest first."""
    if not _own(s):
        return                          # a forked child's end (its atexit, its os._exit): the files are the parent's
    for full in list(s.pending):
        _settle(s, full, flush=True)
    _put_back(s)
    if not s.redirects or not s.made_dirs:
        return
    made = set(s.made_dirs)
    for d in sorted({os.path.dirname(p) for p in s.redirects} & made):
        if _real_isdir(d) and not _holds_older(d, s.began):
            _real_rmtree(d, ignore_errors=True)
    ways = set()
    for p in s.redirects:
        up = os.path.dirname(p)
        while up not in ways and os.path.dirname(up) != up:
            ways.add(up)
            up = os.path.dirname(up)
    for d in sorted(made & ways, key=len, reverse=True):
        try:
            if not os.listdir(d):
                _real_rmdir(d)
        except OSError:
            pass                        # not empty, or gone: the program's to keep


def _programs(s, full):
    """full is a checkpoint of the program's that the pass did not write: one
    it loaded, or a name standing for one (a rename the pass skipped)."""
    return full not in s.redirects and (full in s.loaded_paths or full in s.aliases)


def _path_of(target, how):
    """The path a save or load names: a path, or an open file's name."""
    path = os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else \
        getattr(target, "name", None) if hasattr(target, how) else None
    return path if isinstance(path, str) else None


def _retarget(a, k, at, key, path):
    if key is not None:
        return a, dict(k, **{key: path})
    return a[:at] + (path,) + a[at + 1:], k


def _diagnostic(s):
    return s.cfg.get("pass", "trial") in ("trial", "uncapped", "record", "ballast-only")


def _redirect(s, how, path):
    """A diagnostic pass's save to path: the file of memsplit's own it goes
    to instead (_mine), said once per way of saving."""
    mine = _mine(s, path)
    _skip_save(s, how, path, mine)
    return mine


def _mine(s, path):
    """The file of memsplit's own that stands for path in a diagnostic pass,
    made the first time. In a folder of this process's own, inside the
    pass's (the config's scratch_dir, which memsplit removes after the pass
    however the program ends: run/scratch_dir.h); removed when Python exits
    too."""
    full = os.path.abspath(path)
    s.aliases.pop(full, None)       # a write to a name that stood for the program's checkpoint
    mine = s.redirects.get(full)
    if mine is None and _kind(s, full) == "old" and os.path.dirname(full) not in s.before_dirs:
        s.before_dirs.add(os.path.dirname(full))    # a checkpoint's folder from before (_put_back)
        _journal(s)
    if mine is None:
        if s.redirect_dir is None:
            import shutil
            import tempfile
            scratch = s.cfg.get("scratch_dir")
            s.redirect_dir = tempfile.mkdtemp(prefix="memsplit-checkpoints-",
                                              dir=scratch if isinstance(scratch, str) and os.path.isdir(scratch)
                                              else None)
            atexit.register(shutil.rmtree, s.redirect_dir, True)
        mine = os.path.join(s.redirect_dir, "%d-%s" % (len(s.redirects), os.path.basename(full) or "checkpoint"))
        s.redirects[full] = mine
    return mine


def _skip_save(s, how, path, instead=None):
    """In a diagnostic pass (the trial, the uncapped pass) a checkpoint save
    does not write the program's file (instead: memsplit's own file it goes
    to): said once per way of saving."""
    s.send("save", path=path, step=s.steps, skipped=1)
    _say_once(s, how, "does not write the program's checkpoints: %s to %s %s (the rerun resumes from what was "
              "there before)" % (how, path, "skipped" if instead is None else
                                 "went to a file of memsplit's own, which the program's loads of that path read"))


def _skip_move(s, how, src, dst):
    """In a diagnostic pass, a rename of the program's checkpoint (one it
    loaded): left where it is, the new name standing for it, said once per
    way of renaming."""
    _say_once(s, how + " of", "does not rename the program's checkpoints: %s of %s to %s skipped (the program's "
              "loads of %s read %s)" % (how, src, dst, dst, src))


def _pass_name(s):
    return {"uncapped": "uncapped pass", "record": "record pass"}.get(s.cfg.get("pass", "trial"), "trial")


def _say_once(s, key, what):
    """A checkpoint warning, "the <pass> <what>", said once per key (a way
    of saving, renaming or removing)."""
    if key not in s.skip_warned:
        s.skip_warned.add(key)
        s.lib.warn("checkpoint", "the %s %s" % (_pass_name(s), what))


def _skip_remove(s, how, path):
    """In a diagnostic pass, a removal of a checkpoint the pass did not save:
    the program's file, left where it is, said once per way of removing."""
    _say_once(s, how, "does not remove the program's checkpoints: %s of %s skipped (the pass never saved it; the "
              "file is the program's own)" % (how, path))


def _skip_rmtree(s, top, mine):
    """In a diagnostic pass, a removal of a checkpoint folder that holds the
    program's files from before the pass: left, said once."""
    _say_once(s, "shutil.rmtree", "does not remove the program's checkpoint folders: shutil.rmtree of %s %sleft the "
              "folder (it holds the program's files from before the pass)" %
              (top, "removed the files of memsplit's own in it and " if mine else ""))


def watch_lightning(s):
    """Lightning writes its checkpoints itself (torch.save into a buffer, the
    bytes through fsspec): its CheckpointIO's save is where their path is.
    Wrapped once the program trains (Lightning is imported by then), so the
    diagnostic passes write theirs to memsplit's own files and doctor sees
    them, as with torch.save."""
    for name in ("lightning.fabric.plugins.io.torch_io", "lightning_fabric.plugins.io.torch_io"):
        cls = getattr(sys.modules.get(name), "TorchCheckpointIO", None)
        real = getattr(cls, "save_checkpoint", None)
        if real is None or getattr(real, "_memsplit", False):
            continue

        def save_checkpoint(self, checkpoint, path, *a, _real=real, **k):
            p = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
            s.saved_paths.add(os.path.abspath(p))
            if _diagnostic(s):
                return _real(self, checkpoint, _redirect(s, "Lightning's save", p), *a, **k)
            s.send("save", path=p, step=s.steps)
            return _real(self, checkpoint, path, *a, **k)

        real_load = cls.load_checkpoint

        def load_checkpoint(self, path, *a, _real=real_load, **k):
            p = os.path.abspath(os.fspath(path)) if isinstance(path, (str, os.PathLike)) else None
            mine = (s.redirects.get(p) or s.aliases.get(p)) if p is not None else None
            if mine is None and p is not None:
                _loaded(s, p)               # ckpt_path: the program's own checkpoint
            return _real(self, path if mine is None else mine, *a, **k)

        real_remove = cls.remove_checkpoint

        def remove_checkpoint(self, path, *a, _real=real_remove, **k):
            # ModelCheckpoint removes the checkpoint a better one replaces: in a diagnostic pass
            # that is a file of memsplit's own, or, where the pass never saved that path (a best
            # model the run it resumed from listed), the program's, which the pass leaves alone
            if not _diagnostic(s):
                return _real(self, path, *a, **k)
            p = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
            mine = s.redirects.get(os.path.abspath(p)) if p is not None else None
            if mine is not None:
                return _real(self, mine, *a, **k)
            if p is not None:
                s.hidden.add(os.path.abspath(p))
            _skip_remove(s, "Lightning's remove", str(path))
            return None

        for fn, was in ((save_checkpoint, real), (load_checkpoint, real_load), (remove_checkpoint, real_remove)):
            fn._memsplit = True
            fn.__wrapped__ = was
        cls.save_checkpoint = save_checkpoint
        cls.load_checkpoint = load_checkpoint
        cls.remove_checkpoint = remove_checkpoint
