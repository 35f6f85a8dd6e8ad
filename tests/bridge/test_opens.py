"""A diagnostic pass's opens of checkpoints (_checkpoints._watch_opens,
docs/bridge.md "Checkpoints"), its renames over them, and the import hook
the bridge waits on (_imports.AfterImport),
on a stand-in of the session, in a temporary folder. The wrappers are
global (builtins.open, os.replace), as in a program: installed once, on one
session whose records each test begins empty.

Run: /usr/bin/python3 tests/bridge/test_opens.py
"""
import importlib
import importlib.util
import os
import pathlib
import shutil
import sys
import tempfile
import time
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bridge", "python"))

from memsplit_bridge import _checkpoints, _imports  # noqa: E402


WARNINGS = []      # what the pass said (the session's lib.warn)
S = types.SimpleNamespace(cfg={"pass": "trial"}, steps=0, send=lambda *a, **k: None,
                          lib=types.SimpleNamespace(warn=lambda kind, text: WARNINGS.append(text)))


def begin():
    """A pass's records, empty, beginning now."""
    S.__dict__.update(redirects={}, aliases={}, hidden=set(), saved_paths=set(), loaded_paths=set(),
                      made_dirs=[], redirect_dir=None, skip_warned=set(), began=time.time(), rebind={},
                      pending={}, kept={}, made_files=set(), before_dirs=set(), journal=b"")
    del WARNINGS[:]


begin()
_checkpoints._watch_moves(S)
_checkpoints._watch_opens(S)
_checkpoints._watch_looks(S)
_real_exit = os._exit
_checkpoints._watch_exit(S)
EXIT, os._exit = os._exit, _real_exit     # the wrapper, called by hand: this process exits as it would


class Opens(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-writes-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.old = self.path("ckpt.pt")         # the program's checkpoint, from a run before
        with open(self.old, "w") as f:
            f.write("before")
        then = time.time() - 100
        os.utime(self.old, (then, then))
        self.mtime = os.stat(self.old).st_mtime
        begin()

    def path(self, name):
        return os.path.join(self.dir, name)

    def loaded(self):
        S.loaded_paths.add(self.old)            # the run resumed from it (torch.load)

    def kept(self):
        """The program's checkpoint holds what it held before, unwritten."""
        with _checkpoints._real_open(self.old) as f:
            self.assertEqual(f.read(), "before")
        self.assertEqual(os.stat(self.old).st_mtime, self.mtime)

    def read(self, path):
        with open(path) as f:
            return f.read()

    def test_rewrite_of_a_loaded_checkpoint(self):
        self.loaded()
        with open(self.old, "w") as f:
            f.write("the pass")
        self.kept()
        self.assertEqual(self.read(self.old), "the pass")
        self.assertEqual(len(WARNINGS), 1)
        self.assertIn("does not rewrite the program's checkpoints: open of " + self.old, WARNINGS[0])
        with open(self.old, "w") as f:          # again: the same file of memsplit's, said once
            f.write("again")
        self.assertEqual(self.read(self.old), "again")
        self.assertEqual(len(WARNINGS), 1)
        self.kept()

    def test_other_files_are_the_programs(self):
        # not loaded: the program's output, written as alone (a results file of a run before too)
        with open(self.old, "w") as f:
            f.write("results")
        with _checkpoints._real_open(self.old) as f:
            self.assertEqual(f.read(), "results")
        new = self.path("new.json")
        with open(new, "w") as f:
            f.write("one")
        with _checkpoints._real_open(new) as f:
            self.assertEqual(f.read(), "one")
        self.assertEqual(S.redirects, {})
        self.assertEqual(WARNINGS, [])

    def test_in_place_and_appends_change_the_file(self):
        # "r+" (numpy's memmap of a dataset) and "a": no copy of the file, changed as alone
        self.loaded()
        with open(self.old, "r+") as f:
            f.seek(0)
            f.write("BE")
        with open(self.old, "a") as f:
            f.write("!")
        with _checkpoints._real_open(self.old) as f:
            self.assertEqual(f.read(), "BEfore!")
        self.assertEqual(S.redirects, {})

    def test_paths_of_every_kind(self):
        self.loaded()
        pathlib.Path(self.old).write_text("through pathlib")
        self.kept()
        self.assertEqual(pathlib.Path(self.old).read_text(), "through pathlib")
        with open(os.fsencode(self.old), "rb") as f:
            self.assertEqual(f.read(), b"through pathlib")
        with open(os.devnull, "w") as f:        # no path of a checkpoint
            f.write("x")

    def test_binary_outputs_land_when_closed(self):
        # "wb" of the program's own output (not loaded, no torch.save into it): written to
        # memsplit's file, then to its path as the program closes it, a run before's file too
        out = self.path("preds.bin")
        with open(out, "wb") as f:
            f.write(b"one")
            self.assertFalse(_checkpoints._real_lexists(out))          # memsplit's file, for now
            self.assertTrue(os.path.exists(out))            # ... which the program's checks see
        with _checkpoints._real_open(out, "rb") as f:
            self.assertEqual(f.read(), b"one")
        with open(self.old, "wb") as f:
            f.write(b"results")
        with _checkpoints._real_open(self.old, "rb") as f:
            self.assertEqual(f.read(), b"results")
        g = open(out, "wb")                                 # closed by its finalizer, not by the program
        g.write(b"two")
        del g
        with _checkpoints._real_open(out, "rb") as f:
            self.assertEqual(f.read(), b"two")
        self.assertEqual((S.redirects, S.pending, WARNINGS), ({}, {}, []))
        _checkpoints.tidy(S)            # the run before's results, kept until the end, go (no checkpoint's)
        with _checkpoints._real_open(self.old, "rb") as f:
            self.assertEqual(f.read(), b"results")
        self.no_files_beside()

    def no_files_beside(self):
        self.assertEqual([n for n in os.listdir(self.dir) if ".memsplit-" in n], [])

    def test_a_memory_map_written_after_close(self):
        # a cache made through a memory map (numpy's memmap, mode "w+"): the map outlives the
        # file object, and what it writes is in the file at the program's path
        import mmap
        out = self.path("cache.bin")
        f = open(out, "w+b")
        f.truncate(4)
        m = mmap.mmap(f.fileno(), 4)
        f.close()
        m[:] = b"data"
        m.flush()
        m.close()
        with _checkpoints._real_open(out, "rb") as g:
            self.assertEqual(g.read(), b"data")
        self.no_files_beside()

    def test_binary_outputs_still_open_at_the_end(self):
        out = self.path("log.bin")
        f = open(out, "wb")
        f.write(b"partial")
        _checkpoints.tidy(S)                                # the pass ends with it open
        with _checkpoints._real_open(out, "rb") as g:
            self.assertEqual(g.read(), b"partial")
        f.close()
        self.assertEqual(S.pending, {})
        self.no_files_beside()

    def test_a_save_into_an_opened_file_stays_memsplits(self):
        # what torch.save does with a file the program opened (_watch_checkpoints: the file's
        # name is memsplit's, which stands for the program's path): a checkpoint, kept apart
        with open(self.old, "wb") as f:
            theirs = _checkpoints._standing_for(S, f.name)
            self.assertEqual(theirs, self.old)
            S.saved_paths.add(theirs)
            f.write(b"checkpoint of the pass")
        self.kept()
        self.assertEqual(self.read(self.old), "checkpoint of the pass")
        new = self.path("new.pt")
        with open(new, "wb") as f:
            S.saved_paths.add(_checkpoints._standing_for(S, f.name))
            f.write(b"x")
        self.assertFalse(_checkpoints._real_lexists(new))      # no checkpoint of the pass's in the folder
        self.assertTrue(os.path.exists(new))
        self.no_files_beside()

    def test_a_pending_file_renamed_lands_at_its_new_name(self):
        tmp, out = self.path("out.tmp"), self.path("out.bin")
        with open(tmp, "wb") as f:
            f.write(b"data")
            os.replace(tmp, out)
        with _checkpoints._real_open(out, "rb") as f:
            self.assertEqual(f.read(), b"data")
        self.assertFalse(_checkpoints._real_lexists(tmp))
        self.no_files_beside()

    def test_reads_follow_a_save_of_the_pass(self):
        # torch.save(obj, path) went to memsplit's file: the program's open of path, and a copy of
        # it as its best model, read that (before: FileNotFoundError, or the older file)
        with open(_checkpoints._redirect(S, "torch.save", self.old), "w") as f:
            f.write("saved by the pass")
        self.kept()
        self.assertEqual(self.read(self.old), "saved by the pass")
        shutil.copyfile(self.old, self.path("best.pt"))
        with _checkpoints._real_open(self.path("best.pt")) as f:
            self.assertEqual(f.read(), "saved by the pass")

    def test_atomic_write_over_a_loaded_checkpoint(self):
        self.loaded()
        tmp = self.path("ckpt.pt.tmp")
        with open(tmp, "w") as f:
            f.write("atomic")
        os.replace(tmp, self.old)
        self.kept()
        self.assertFalse(_checkpoints._real_lexists(tmp))
        self.assertEqual(self.read(self.old), "atomic")
        self.assertTrue(any("os.replace of " + self.old in w for w in WARNINGS), WARNINGS)

    def test_rename_of_what_the_pass_wrote(self):
        self.loaded()
        with open(self.old, "w") as f:
            f.write("the pass")
        os.replace(self.old, self.path("ckpt.pt.bak"))
        self.kept()
        self.assertEqual(self.read(self.path("ckpt.pt.bak")), "the pass")
        self.assertFalse(_checkpoints._real_lexists(self.path("ckpt.pt.bak")))     # only memsplit's file moved
        with self.assertRaises(FileNotFoundError):                        # moved away, as alone
            open(self.old)

    def test_backup_of_a_loaded_checkpoint(self):
        # renamed to a backup: left where it is, the new name standing for it
        self.loaded()
        os.replace(self.old, self.old + ".bak")
        self.kept()
        self.assertFalse(_checkpoints._real_lexists(self.old + ".bak"))
        self.assertEqual(self.read(self.old + ".bak"), "before")
        with open(self.old + ".bak", "w") as f:     # and written: memsplit's, not the program's file
            f.write("new")
        self.kept()
        self.assertEqual(self.read(self.old + ".bak"), "new")


class FilesFromBefore(unittest.TestCase):
    """The program's files from a run before that a pass rewrites: put back
    at its end where they are a checkpoint's (its folder holds a checkpoint
    the program loaded, or one from before that the pass saved over: HF's
    checkpoint-N with its JSON), the program's output anywhere else."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-before-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.ck = os.path.join(self.dir, "checkpoint-2")
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.ck)
        os.makedirs(self.out)
        self.then = time.time() - 100
        self.files = {}
        for name, body in (("config.json", "{\"run\": 1}"), ("trainer_state.json", "{\"step\": 2, \"run\": 1}"),
                           ("model.safetensors", "weights of run 1"), ("optimizer.bin", "moments of run 1")):
            self.files[name] = self.before(os.path.join(self.ck, name), body)
        self.results = self.before(os.path.join(self.out, "results.json"), "{\"loss\": 1}")
        begin()
        self.addCleanup(self.release)

    def before(self, path, body, mode=0o644):
        with _checkpoints._real_open(path, "w") as f:
            f.write(body)
        os.chmod(path, mode)
        os.utime(path, (self.then, self.then))
        return path

    def release(self):
        for was in S.kept.values():
            os.remove(was)
        S.kept.clear()

    def real(self, path):
        with _checkpoints._real_open(path) as f:
            return f.read()

    def as_before(self, name, body):
        path = self.files[name]
        self.assertEqual(self.real(path), body)
        self.assertEqual(os.stat(path).st_mtime, self.then)

    def save_over_the_weights(self):
        # safetensors' save (or torch.save) of the pass over the run before's: memsplit's file
        with open(_checkpoints._redirect(S, "safetensors' save", self.files["model.safetensors"]), "w") as f:
            f.write("weights of the pass")

    def test_a_checkpoint_folder_is_put_back(self):
        with open(self.files["config.json"], "w") as f:         # before the weights, as save_pretrained
            f.write("{\"run\": 2}")
        self.save_over_the_weights()
        with open(self.files["trainer_state.json"], "w") as f:
            f.write("{\"step\": 2, \"run\": 2}")
        with open(self.files["trainer_state.json"]) as f:         # read back: what the pass wrote, as alone
            self.assertEqual(f.read(), "{\"step\": 2, \"run\": 2}")
        self.assertEqual(self.real(self.files["config.json"]), "{\"run\": 2}")
        extra = os.path.join(self.ck, "scheduler.json")           # none in the run before's folder
        with open(extra, "w") as f:
            f.write("{}")
        with open(self.files["optimizer.bin"], "wb") as f:
            f.write(b"moments of the pass")
        # until the end (and where a pass is killed before it) the run before's under a hidden name
        self.assertEqual(self.real(S.kept[self.files["config.json"]]), "{\"run\": 1}")
        _checkpoints.tidy(S)
        self.as_before("config.json", "{\"run\": 1}")
        self.as_before("trainer_state.json", "{\"step\": 2, \"run\": 1}")
        self.as_before("model.safetensors", "weights of run 1")
        self.as_before("optimizer.bin", "moments of run 1")
        self.assertFalse(_checkpoints._real_lexists(extra))
        self.assertEqual(S.kept, {})
        self.assertTrue(any("put back 3 of the program's files" in w and "and removed 1 it added there" in w
                            for w in WARNINGS), WARNINGS)
        self.assertEqual([n for n in os.listdir(self.ck) if ".memsplit-" in n], [])

    def test_a_file_from_before_dated_ahead(self):
        # the run before's config with an mtime ahead of the clock (a copy from a host whose clock ran ahead):
        # its ctime, which no program sets, is older than the pass, so it is kept and put back
        ahead = time.time() + 3600
        os.utime(self.files["config.json"], (ahead, ahead))
        time.sleep(0.05)                # the ctime just made, on the coarser clock of files, is behind this
        S.began = time.time()
        with open(self.files["config.json"], "w") as f:
            f.write("{\"run\": 2}")
        self.save_over_the_weights()
        _checkpoints.tidy(S)
        self.assertEqual(self.real(self.files["config.json"]), "{\"run\": 1}")
        self.assertEqual(os.stat(self.files["config.json"]).st_mtime, ahead)

    def test_the_folder_of_a_loaded_checkpoint(self):
        S.loaded_paths.add(self.files["model.safetensors"])      # the run resumed from it
        tmp = os.path.join(self.ck, "trainer_state.json.tmp")    # an atomic write of the trainer's state
        with open(tmp, "w") as f:
            f.write("{\"step\": 3}")
        os.replace(tmp, self.files["trainer_state.json"])
        self.assertEqual(self.real(self.files["trainer_state.json"]), "{\"step\": 3}")
        _checkpoints.tidy(S)
        self.as_before("trainer_state.json", "{\"step\": 2, \"run\": 1}")
        self.assertFalse(_checkpoints._real_lexists(tmp))

    def test_outputs_elsewhere_are_the_programs(self):
        self.save_over_the_weights()
        with open(self.results, "w") as f:
            f.write("{\"loss\": 2}")
        with open(self.files["config.json"], "w") as f:
            f.write("{\"run\": 2}")
        _checkpoints.tidy(S)
        self.assertEqual(self.real(self.results), "{\"loss\": 2}")
        self.assertGreaterEqual(os.stat(self.results).st_mtime, S.began)
        self.as_before("config.json", "{\"run\": 1}")
        self.assertEqual(S.kept, {})

    def test_os_exit_puts_back_first(self):
        # a program that ends by os._exit: its exit handlers never run, the wrapper settles first
        with open(self.files["config.json"], "w") as f:
            f.write("{\"run\": 2}")
        self.save_over_the_weights()
        exited = []
        EXIT(3, _real=exited.append)
        self.assertEqual(exited, [3])
        self.as_before("config.json", "{\"run\": 1}")

    def test_a_forked_childs_end_leaves_the_parents_files(self):
        with open(self.files["config.json"], "w") as f:
            f.write("{\"run\": 2}")
        self.save_over_the_weights()
        S.pid = os.getpid() + 1                 # as a DataLoader's worker forked from the pass
        try:
            _checkpoints.tidy(S)
            with open(self.files["trainer_state.json"], "w") as f:     # the worker's write: as alone
                f.write("{\"worker\": 1}")
        finally:
            del S.pid
        self.assertNotIn(self.files["trainer_state.json"], S.kept)
        self.assertEqual([n for n in os.listdir(self.ck) if ".memsplit-" in n and "config" not in n], [])
        self.assertEqual(self.real(self.files["config.json"]), "{\"run\": 2}")
        self.assertIn(self.files["config.json"], S.kept)
        _checkpoints.tidy(S)                    # the pass's own end
        self.as_before("config.json", "{\"run\": 1}")

    def test_a_sigterm_handler_the_program_composes_does_nothing(self):
        # Lightning's handler at fit calls the one it found: alone that was the default, which
        # it leaves out; the bridge's, found there, does nothing (no tidy, no kill)
        import signal
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)       # the one _watch_exit set above, out
            _checkpoints._tidy_at_term(S)
            ours = signal.getsignal(signal.SIGTERM)
            self.assertTrue(callable(ours))
            signal.signal(signal.SIGTERM, lambda n, f: ours(n, f))
            with open(self.files["config.json"], "w") as f:
                f.write("{\"run\": 2}")
            self.save_over_the_weights()
            os.kill(os.getpid(), signal.SIGTERM)    # alive after it: nothing killed this process
            self.assertEqual(self.real(self.files["config.json"]), "{\"run\": 2}")
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def test_the_journal_for_a_killed_pass(self):
        # what the pass's end would do, in its scratch folder for memsplit (run/undo_files.h)
        scratch = os.path.join(self.dir, "scratch")
        os.makedirs(scratch)
        S.cfg = dict(S.cfg, scratch_dir=scratch)
        journal = os.path.join(scratch, "undo")

        def records():
            with _checkpoints._real_open(journal, "rb") as f:
                fields = f.read().split(b"\0")
            self.assertEqual(fields[-1], b"")
            out, i = [], 0
            while i < len(fields) - 1:
                n = 3 if fields[i] == b"R" else 2
                out.append(tuple(os.fsdecode(x) for x in fields[i:i + n]))
                i += n
            return out

        try:
            with open(self.files["config.json"], "w") as f:
                f.write("{\"run\": 2}")
            kept = S.kept[self.files["config.json"]]
            self.assertEqual(records(), [("D", kept)])              # no checkpoint's folder yet: an output
            self.save_over_the_weights()
            self.assertEqual(records(), [("R", kept, self.files["config.json"])])
            f = open(os.path.join(self.ck, "new.bin"), "wb")
            beside = S.redirects[os.path.join(self.ck, "new.bin")]
            self.assertEqual(records()[-1], ("D", beside))          # being written: removed if killed
            f.close()
            new = os.path.join(self.ck, "new.bin")
            # written, a file the pass added in a checkpoint's folder: removed if killed
            self.assertEqual(records(), [("R", kept, self.files["config.json"]), ("N", new)])
            _checkpoints.tidy(S)
            self.assertFalse(os.path.exists(new))
            self.assertFalse(os.path.exists(journal))               # the pass's end did it all
        finally:
            S.cfg = {"pass": "trial"}

    def test_files_made_elsewhere_do_not_write_the_journal(self):
        # a pass that makes many files outside a checkpoint's folder (a log, images) does not rebuild
        # the journal at each: it names only files in checkpoints' folders
        S.cfg = dict(S.cfg, scratch_dir=os.path.join(self.dir, "scratch"))
        os.makedirs(S.cfg["scratch_dir"])
        writes = []
        real = _checkpoints._journal
        _checkpoints._journal = lambda s: writes.append(1) or real(s)
        try:
            for i in range(50):
                with open(os.path.join(self.out, "img-%d.txt" % i), "w") as f:
                    f.write("x")
            self.assertEqual(writes, [])
            self.save_over_the_weights()                     # checkpoint-2 is a checkpoint's folder now
            n = len(writes)
            with open(os.path.join(self.ck, "tokenizer.json"), "w") as f:
                f.write("{}")
            self.assertEqual(len(writes), n + 1)
            _checkpoints.tidy(S)
        finally:
            _checkpoints._journal = real
            S.cfg = {"pass": "trial"}

    def test_a_journal_that_cannot_be_written_is_said(self):
        S.cfg = dict(S.cfg, scratch_dir=os.path.join(self.dir, "gone"))     # no such folder
        try:
            with open(self.files["config.json"], "w") as f:
                f.write("{\"run\": 2}")
            self.assertTrue(any("could not note, for a pass killed before its end" in w for w in WARNINGS), WARNINGS)
            _checkpoints.tidy(S)                # nothing to note any more: no second warning, no error
            self.assertEqual(sum("could not note" in w for w in WARNINGS), 1)
        finally:
            S.cfg = {"pass": "trial"}

    def test_no_checkpoint_from_before_no_change(self):
        # a fresh run's trial into a new folder: its files there are the pass's, nothing put back
        with open(self.files["config.json"], "w") as f:
            f.write("{\"run\": 2}")
        _checkpoints.tidy(S)
        self.assertEqual(self.real(self.files["config.json"]), "{\"run\": 2}")
        self.assertFalse(any("put back" in w for w in WARNINGS), WARNINGS)

    def test_permissions_and_links_as_alone(self):
        secret = self.before(os.path.join(self.out, "token.txt"), "one", mode=0o600)
        with open(secret, "w") as f:
            f.write("two")
        self.assertEqual(stat_mode(secret), 0o600)
        with open(secret, "wb") as f:                           # the pass's own file now: in place
            f.write(b"three")
        self.assertEqual(stat_mode(secret), 0o600)
        link = os.path.join(self.out, "latest.bin")
        os.symlink("results.json", link)
        with open(link, "wb") as f:                             # through the link, as alone
            f.write(b"through")
        self.assertTrue(os.path.islink(link))
        self.assertEqual(self.real(self.results), "through")

    def test_a_file_with_other_names_is_not_held(self):
        os.link(self.files["config.json"], os.path.join(self.dir, "config-copy.json"))
        self.save_over_the_weights()
        with open(self.files["config.json"], "w") as f:
            f.write("{\"run\": 2}")
        self.assertEqual(self.real(os.path.join(self.dir, "config-copy.json")), "{\"run\": 2}")
        _checkpoints.tidy(S)
        self.assertEqual(self.real(self.files["config.json"]), "{\"run\": 2}")


def stat_mode(path):
    return os.stat(path).st_mode & 0o777


class Safetensors(unittest.TestCase):
    """safetensors' writer and reader, wrapped where the package keeps them
    (a module of that shape here: it writes outside Python's open)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-safetensors-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        begin()

        def serialize_file(tensors, filename, metadata=None):
            fd = os.open(filename, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, tensors.encode())
            os.close(fd)

        def safe_open(filename, framework="pt"):
            with _checkpoints._real_open(filename) as f:
                return f.read()

        self.pkg = types.ModuleType("msw_safetensors")
        self.pkg.serialize_file, self.pkg.safe_open = serialize_file, safe_open
        # a module that took the reader before the bridge wrapped it (imported before torch)
        self.early = types.ModuleType("msw_early")
        self.early.safe_open = safe_open
        sys.modules["msw_early"] = self.early
        self.addCleanup(sys.modules.pop, "msw_early", None)
        _checkpoints._wrap_safetensors(S, self.pkg)

    def test_a_save_goes_to_memsplit_and_loads_follow(self):
        path = os.path.join(self.dir, "model.safetensors")
        with open(path, "w") as f:
            f.write("a run before's weights")
        self.pkg.serialize_file("the pass's weights", path)
        with _checkpoints._real_open(path) as f:
            self.assertEqual(f.read(), "a run before's weights")
        self.assertEqual(self.pkg.safe_open(path), "the pass's weights")
        self.assertTrue(os.path.isfile(S.redirects[os.path.abspath(path)]))
        self.assertIn("safetensors' save to " + path, WARNINGS[0])

    def test_names_taken_before_are_bound_again(self):
        self.assertIsNot(self.early.safe_open, self.pkg.safe_open)
        _checkpoints.rebind(S)
        self.assertIs(self.early.safe_open, self.pkg.safe_open)
        path = os.path.join(self.dir, "model.safetensors")
        self.pkg.serialize_file("the pass's weights", path)
        self.assertEqual(self.early.safe_open(path), "the pass's weights")


class Imports(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-imports-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.seen = []

    def module(self, name):
        with open(os.path.join(self.dir, name + ".py"), "w") as f:
            f.write("VALUE = 1\n")
        self.addCleanup(sys.modules.pop, name, None)

    def test_a_look_before_the_import_leaves_the_hook(self):
        self.module("msw_looked_at")
        sys.path.insert(0, self.dir)
        self.addCleanup(sys.path.remove, self.dir)
        _imports.after_import("msw_looked_at", self.seen.append)
        self.assertIsNotNone(importlib.util.find_spec("msw_looked_at"))     # as transformers asks for torch
        self.assertEqual(self.seen, [])
        import msw_looked_at
        self.assertEqual(self.seen, [msw_looked_at])
        self.assertEqual(msw_looked_at.VALUE, 1)
        self.assertFalse(any(isinstance(f, _imports.AfterImport) for f in sys.meta_path))

    def test_missing_then_found(self):
        _imports.after_import("msw_later", self.seen.append)
        with self.assertRaises(ImportError):
            importlib.import_module("msw_later")
        self.module("msw_later")
        sys.path.append(self.dir)
        self.addCleanup(sys.path.remove, self.dir)
        importlib.invalidate_caches()
        mod = importlib.import_module("msw_later")
        self.assertEqual(self.seen, [mod])

    def test_imported_already(self):
        _imports.after_import("json", self.seen.append)
        self.assertEqual(self.seen, [sys.modules["json"]])


if __name__ == "__main__":
    unittest.main()
