"""hostile.py — module names a program could choose, and checks that memsplit
carries them safely (issue 38). Standard library only.

  hostile.py names PROFILE.json OUT.json PWNED
      OUT.json: PROFILE (a built-in profile) made a program's, its layers named
      by hostile module paths: quotes that end a Python string and run code
      (touching PWNED), commas and semicolons, backslashes, ESC/CSI/OSC, CR, BS,
      a bidirectional override, a name that looks like a run ("h.0-12").
  hostile.py snippet PLAN.json PLAN.out PWNED
      the snippet in PLAN.out, run with a stand-in torch: it creates nothing,
      and its PLACEMENT is every module of PLAN.json on its stage's device.
  hostile.py placement PLAN.json PLAN.out
      the placement line parses back to the same modules per stage and devices.
  hostile.py clean FILE...
      no control character but newline in the files (what a terminal acts on),
      and valid UTF-8 (no character cut in half).
"""
import ast
import json
import os
import re
import sys
import types


def hostile_names(n_layers, pwned):
    blocks = ["h.%d" % i for i in range(n_layers - 2)]
    blocks[3] = 'x" if __import__("os").system("touch %s") else "' % pwned
    blocks[9] = "x'), __import__('os').system('touch %s'), ('" % pwned
    blocks[4] = "a,b;c d"
    blocks[5] = "it's \\ back'"
    blocks[6] = "\x1b[2J\x1b]0;title\x07\r\b"
    blocks[7] = "caf\u00e9 \u202eevil \u2192 x"
    blocks[8] = "h.0-12"
    # the first module's name runs past a table's cell in the middle of a
    # two-byte character (tables cut at characters, never inside one)
    return ["x" + "\u00e9" * 30 + ",wpe\x1b[31m,drop"] + blocks + ["ln_f,lm_head"]


def modules_per_stage(plan):
    """[(modules, device)] of a program's plan, as the applier reads it."""
    names = plan["program"]["layer_names"] if "program" in plan else plan["layer_names"]
    n = len(names)
    out = []
    for st in plan["stages"]:
        mods = []
        for l in range(st["layers"][0], st["layers"][1] + 1):
            if l in (0, n - 1):
                mods += [m for m in names[l].split(",") if m and m not in ("(before the units)", "(after the units)", "(before the blocks)", "(after the blocks)")]
            else:
                mods.append(names[l])
        dev = [d for d in plan["devices"] if d["index"] == st["device"]][0]["device"]
        out.append((mods, dev))
    return out


def parse_placement(line):
    """The placement line's grammar (docs/bridge.md): stages "; "-separated,
    each ITEMS " → " DEVICE; items ", "-separated; an item is a Python string
    literal, or a bare name, or a run PREFIX.A-B of bare names."""
    assert line.startswith("placement: "), line
    s, i, stages = line[len("placement: "):].rstrip("\n"), 0, []

    def item(i):
        if s[i] == "'":
            j = i + 1
            while s[j] != "'":
                j += 2 if s[j] == "\\" else 1
            return [ast.literal_eval(s[i:j + 1])], j + 1
        m = re.compile(r"[A-Za-z0-9_.:/-]+").match(s, i)
        tok = m.group(0)
        r = re.fullmatch(r"(.*\.)(\d+)-(\d+)", tok)
        if r and ":" not in tok and "/" not in tok:
            return ["%s%d" % (r.group(1), k) for k in range(int(r.group(2)), int(r.group(3)) + 1)], m.end()
        return [tok], m.end()

    mods = []
    while i < len(s):
        got, i = item(i)
        if s.startswith(", ", i):
            mods += got
            i += 2
        elif s.startswith(" \u2192 ", i):
            mods += got
            dev, i = item(i + 3)
            stages.append((mods, dev[0]))
            mods = []
            if i < len(s):
                assert s.startswith("; ", i), s[i:]
                i += 2
        else:
            raise ValueError("unexpected text at %d: %r" % (i, s[i:i + 20]))
    return stages


def main():
    what = sys.argv[1]
    if what == "names":
        p = json.load(open(sys.argv[2]))
        names = hostile_names(len({r["index"] for r in p["layers"]}), sys.argv[4])
        for r in p["layers"]:
            r["name"] = names[r["index"]]
        p["program"] = {"fingerprint": "fnv64:0123456789abcdef", "framework": "torch 2.0",
                        "layer_list": "h: ModuleList of identical \x1b[2JBlock\r"}
        json.dump(p, open(sys.argv[3], "w"))
        return 0
    plan = json.load(open(sys.argv[2])) if what != "clean" else None
    if what == "snippet":
        text = open(sys.argv[3], encoding="utf-8").read()
        code = text[text.index("# Place the modules by hand"):].split("\nplan written to ")[0]
        sys.modules["torch"] = types.ModuleType("torch")
        ns = {}
        try:
            exec(compile(code, "snippet", "exec"), ns)
        except Exception as e:
            ns["PLACEMENT"] = "the snippet does not run: %r" % e
        want = [(m, dev) for mods, dev in modules_per_stage(plan) for m in mods]
        if os.path.exists(sys.argv[4]):
            print("the snippet ran code hidden in a module name")
            return 1
        if ns["PLACEMENT"] != want:
            print("PLACEMENT differs:", ns["PLACEMENT"], "\nwanted:", want)
            return 1
        return 0
    if what == "placement":
        lines = [l for l in open(sys.argv[3], encoding="utf-8") if l.startswith("placement: ")]
        got = parse_placement(lines[0]) if len(lines) == 1 else None
        want = modules_per_stage(plan)
        if got != want:
            print("the placement line reads back as", got, "\nwanted:", want)
            return 1
        return 0
    if what == "clean":
        for f in sys.argv[2:]:
            data = open(f, "rb").read()
            bad = sorted({b for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F})
            if bad or re.search(rb"\xc2[\x80-\x9f]", data):
                print("%s holds control characters %s" % (f, bad))
                return 1
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as e:
                print("%s is not UTF-8 (a character cut in half?): %s" % (f, e))
                return 1
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
