"""The C half of the bridge, libmemsplit_bridge.so, through ctypes (msb.h)."""
import array
import ctypes
import json
import os

# vocab.h's enumerations, in their order
CAT = {name: i for i, name in enumerate(
    ["param", "master", "grad", "optim", "act", "transient", "comm", "reserve"])}
PH_INIT, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_VALIDATION = range(5)

_u64, _int, _dbl, _str = ctypes.c_uint64, ctypes.c_int, ctypes.c_double, ctypes.c_char_p


def _carray(ctype, code, values):
    """A C array of ctype holding values, filled by array.array where its
    type code has ctype's size (array fills from a list about three times
    faster than ctypes' own (ctype * n)(*values))."""
    if array.array(code).itemsize != ctypes.sizeof(ctype):
        return (ctype * len(values))(*values)
    a = array.array(code, values)
    return (ctype * len(a)).from_buffer(a)      # (the ctypes array keeps a alive)


class Lib:
    """One loaded library; every call is cheap and never raises."""

    def __init__(self, path):
        self.c = c = ctypes.CDLL(path)
        sig = {
            "msb_open": ([], _int), "msb_active": ([], _int), "msb_now_us": ([], _dbl),
            "msb_send": ([_str], _int), "msb_warn": ([_str, _str], _int),
            "msb_where": ([_int, _int], None),
            "msb_transition": ([_int, _int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_int64, _int, _int], _int),
            "msb_batch_transitions": ([_int], None),
            "msb_set_capacity": ([_int, _u64], _int),
            "msb_alloc": ([_int, _u64, _u64, _int, _int], _int),
            "msb_free": ([_u64], None), "msb_relabel": ([_u64, _int, _int], _int),
            "msb_live": ([_int, _int], _u64), "msb_peak": ([_int], _u64),
            "msb_peak_cat": ([_int, _int], _u64),
            "msb_is": ([_u64, _int, ctypes.POINTER(_int)], _int), "msb_device_of": ([_u64], _int),
            "msb_move": ([_u64, _int], _int), "msb_reset_peak": ([_int], None),
            "msb_units": ([_str, _str, ctypes.POINTER(_int), _int, ctypes.c_char_p, ctypes.c_size_t], _int),
            "msb_fingerprint_of": ([_str, ctypes.c_char_p, ctypes.c_size_t], _int),
            "msb_ballast": ([_int, _u64, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int64),
            "msb_replay": ([_int, ctypes.c_char_p, ctypes.POINTER(_u64), ctypes.POINTER(_u64), ctypes.POINTER(_int),
                            ctypes.POINTER(_int), ctypes.POINTER(_int), _int, ctypes.POINTER(_dbl)], _int),
        }
        for name, (args, res) in sig.items():
            f = getattr(c, name)
            f.argtypes, f.restype = args, res
        self.connected = c.msb_open() == 0
        self.alloc, self.free, self.relabel, self.where = c.msb_alloc, c.msb_free, c.msb_relabel, c.msb_where
        self.transition = c.msb_transition
        self.now_us = c.msb_now_us

    def send(self, ev, **fields):
        """One event; never raises for what a string holds: text that is
        not valid Unicode (a lone surrogate from undecodable bytes, in
        sys.argv say) goes as U+FFFD. Module names that must travel whole
        are checked before (name_problem)."""
        fields["ev"] = ev
        text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            data = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")
        return self.c.msb_send(data)

    def replay(self, ops, keys, sizes, cats, layers, phase, times, devs=None):
        """A run of ledger events in order (msb_replay): ops is bytes of
        b'a' (allocation), b'f' (free) and b'r' (relabel), the rest lists of
        its length; devs, each allocation's device (None: device 0)."""
        n = len(ops)
        if n == 0:
            return 0
        # through array.array, which fills a C array from a list about three times faster than
        # ctypes' (type * n)(*list): a GPU step's drain is thousands of events (issue 40)
        return self.c.msb_replay(n, ops, _carray(_u64, "Q", keys), _carray(_u64, "Q", sizes),
                                 _carray(_int, "i", cats), _carray(_int, "i", layers),
                                 None if devs is None else _carray(_int, "i", devs), phase,
                                 _carray(_dbl, "d", times))

    def warn(self, what, text):
        self.c.msb_warn(what.encode(), text.encode(errors="replace"))

    def owner(self, key, cat):
        layer = _int(-1)
        return layer.value if self.c.msb_is(key, cat, ctypes.byref(layer)) else None

    def owner_device(self, key):
        d = self.c.msb_device_of(key)
        return d if d >= 0 else None

    def units(self, tree, layers, n_modules):
        """The units (layers.h: msb_pick_units): (count, unit of each module
        or -1, why); count -1 with why on a bad --layers or tree."""
        why = ctypes.create_string_buffer(1024)
        unit_of = (_int * max(n_modules, 1))()
        n = self.c.msb_units(tree.encode(), (layers or "").encode(), unit_of, n_modules, why, len(why))
        return n, list(unit_of)[:n_modules], why.value.decode(errors="replace")

    def fingerprint(self, tree):
        out = ctypes.create_string_buffer(64)
        self.c.msb_fingerprint_of(tree.encode(), out, len(out))
        return out.value.decode()

    def ballast(self, ordinal, capacity):
        err = ctypes.create_string_buffer(512)
        taken = self.c.msb_ballast(ordinal, capacity, err, len(err))
        return taken, err.value.decode(errors="replace")


# ---- module names (docs/bridge.md, "Module names") ---------------------------

NAME_MAX = 255      # bytes of UTF-8 memsplit keeps of a module path (vocab/profile.h: MS_NAME_MAX - 1)


def tsv(text):
    """A field of the module tree (layers.h) that cannot break its lines or
    columns: tab, newline and NUL written as \\t, \\n, \\0, and text that is
    not valid Unicode escaped (\\udc80). Only the C side's choice of the list
    and the fingerprint read these; the names that travel are the modules'
    own."""
    if text.isprintable() and text.isascii():
        return text
    text = text.replace("\t", "\\t").replace("\n", "\\n").replace("\0", "\\0")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(name):
    """A module name as a message shows it: quoted, escaped, cut."""
    return repr(name[:60]) + ("... (%d characters)" % len(name) if len(name) > 60 else "")


def name_problem(name, member=False):
    """Why a module path cannot travel whole through memsplit's records
    (profile rows, the run database, plans), or None. A member of the layer
    before or after the blocks is joined with commas into that layer's
    name, so it may hold no comma and may not begin with '('."""
    try:
        n = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid Unicode (a lone surrogate, as undecodable bytes make): memsplit's records hold UTF-8"
    if not name:
        return "it is empty"
    if "\0" in name:
        return "it holds a NUL character"
    if n > NAME_MAX:
        return "it is %d bytes long; memsplit keeps module paths of up to %d bytes (UTF-8)" % (n, NAME_MAX)
    if member and "," in name:
        return "it holds a comma, which joins the module paths of the layer before or after the blocks"
    if member and name.startswith("("):
        return "it begins with '(', which marks a layer with no module of its own"
    return None


def load():
    path = os.environ.get("MEMSPLIT_BRIDGE_LIB", "")
    return Lib(path) if path else None
