"""A diagnostic pass's writes to the program's files from before it
(_checkpoints._watch_writes, docs/bridge.md "Checkpoints"), its renames
over them, and the import hook the bridge waits on (_imports.AfterImport),
on a stand-in of the session, in a temporary folder. The wrappers are
global (builtins.open, os.replace), as in a program: installed once, on one
session whose records each test begins empty.

Run: /usr/bin/python3 tests/bridge/test_writes.py
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
                      made_dirs=[], redirect_dir=None, skip_warned=set(), began=time.time())
    del WARNINGS[:]


begin()
_checkpoints._watch_moves(S)
_checkpoints._watch_writes(S)


class Writes(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="test-writes-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.old = self.path("old.json")
        with open(self.old, "w") as f:
            f.write("before")
        then = time.time() - 100
        os.utime(self.old, (then, then))
        self.mtime = os.stat(self.old).st_mtime
        begin()

    def path(self, name):
        return os.path.join(self.dir, name)

    def kept(self):
        """The program's file holds what it held before, unwritten."""
        with _checkpoints._real_open(self.old) as f:
            self.assertEqual(f.read(), "before")
        self.assertEqual(os.stat(self.old).st_mtime, self.mtime)

    def test_w_goes_to_memsplit_and_reads_follow(self):
        with open(self.old, "w") as f:
            f.write("the pass")
        self.kept()
        with open(self.old) as f:
            self.assertEqual(f.read(), "the pass")
        self.assertEqual(len(WARNINGS), 1)
        self.assertIn("does not rewrite the program's files from before it: open of " + self.old, WARNINGS[0])
        with open(self.old, "w") as f:          # again: the same file of memsplit's, said once
            f.write("again")
        with open(self.old) as f:
            self.assertEqual(f.read(), "again")
        self.assertEqual(len(WARNINGS), 1)
        self.kept()

    def test_in_place_changes_the_file(self):
        # "r+" (numpy's memmap of a dataset): no copy of it, the file changed as alone
        with open(self.old, "r+") as f:
            self.assertEqual(f.read(), "before")
            f.seek(0)
            f.write("BE")
        with _checkpoints._real_open(self.old) as f:
            self.assertEqual(f.read(), "BEfore")
        self.assertEqual(S.redirects, {})

    def test_append_adds_to_the_file(self):
        with open(self.old, "a") as f:
            f.write(" and after")
        with open(self.old) as f:
            self.assertEqual(f.read(), "before and after")
        self.assertEqual(S.redirects, {})

    def test_new_files_and_the_pass_own_are_written(self):
        new = self.path("new.json")
        with open(new, "w") as f:
            f.write("one")
        with open(new, "w") as f:               # made by the pass: written again where it is
            f.write("two")
        with _checkpoints._real_open(new) as f:
            self.assertEqual(f.read(), "two")
        with open(os.devnull, "w") as f:        # no regular file
            f.write("x")
        self.assertEqual(S.redirects, {})
        self.assertEqual(WARNINGS, [])

    def test_paths_of_every_kind(self):
        pathlib.Path(self.old).write_text("through pathlib")
        self.kept()
        self.assertEqual(pathlib.Path(self.old).read_text(), "through pathlib")
        with open(os.fsencode(self.old), "rb") as f:
            self.assertEqual(f.read(), b"through pathlib")

    def test_atomic_write_over_a_file_from_before(self):
        tmp = self.path("old.json.tmp")
        with open(tmp, "w") as f:
            f.write("atomic")
        os.replace(tmp, self.old)
        self.kept()
        self.assertFalse(os.path.lexists(tmp))
        with open(self.old) as f:
            self.assertEqual(f.read(), "atomic")
        self.assertTrue(any("os.replace of " + self.old in w for w in WARNINGS), WARNINGS)

    def test_rename_of_what_the_pass_wrote(self):
        with open(self.old, "w") as f:
            f.write("the pass")
        os.replace(self.old, self.path("old.json.bak"))
        self.kept()
        with open(self.path("old.json.bak")) as f:
            self.assertEqual(f.read(), "the pass")
        self.assertFalse(os.path.lexists(self.path("old.json.bak")))     # only memsplit's file moved
        with self.assertRaises(FileNotFoundError):                        # moved away, as alone
            open(self.old)

    def test_backup_of_a_loaded_checkpoint(self):
        # the program's checkpoint it resumed from, renamed to a backup: left, the new name standing for it
        S.loaded_paths.add(self.old)
        os.replace(self.old, self.old + ".bak")
        self.kept()
        self.assertFalse(os.path.lexists(self.old + ".bak"))
        with open(self.old + ".bak") as f:
            self.assertEqual(f.read(), "before")
        with open(self.old + ".bak", "w") as f:     # and written: memsplit's, not the program's file
            f.write("new")
        self.kept()


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
