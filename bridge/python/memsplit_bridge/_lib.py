"""The C half of the bridge, libmemsplit_bridge.so, through ctypes (msb.h)."""
import ctypes
import json
import os

# vocab.h's enumerations, in their order
CAT = {name: i for i, name in enumerate(
    ["param", "master", "grad", "optim", "act", "transient", "comm", "reserve"])}
PH_INIT, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_VALIDATION = range(5)

_u64, _int, _dbl, _str = ctypes.c_uint64, ctypes.c_int, ctypes.c_double, ctypes.c_char_p


class Lib:
    """One loaded library; every call is cheap and never raises."""

    def __init__(self, path):
        self.c = c = ctypes.CDLL(path)
        sig = {
            "msb_open": ([], _int), "msb_active": ([], _int), "msb_now_us": ([], _dbl),
            "msb_send": ([_str], _int), "msb_warn": ([_str, _str], _int),
            "msb_where": ([_int, _int], None),
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
        }
        for name, (args, res) in sig.items():
            f = getattr(c, name)
            f.argtypes, f.restype = args, res
        self.connected = c.msb_open() == 0
        self.alloc, self.free, self.relabel, self.where = c.msb_alloc, c.msb_free, c.msb_relabel, c.msb_where
        self.now_us = c.msb_now_us

    def send(self, ev, **fields):
        fields["ev"] = ev
        return self.c.msb_send(json.dumps(fields, separators=(",", ":")).encode())

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


def load():
    path = os.environ.get("MEMSPLIT_BRIDGE_LIB", "")
    return Lib(path) if path else None
