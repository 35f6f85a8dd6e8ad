"""same_profile.py A.json B.json: the two profiles (memsplit profile --json)
hold the same bytes everywhere: every field but times (*_ms) and the run id.
Prints each difference (up to 20) and exits 1 when there is one."""
import json
import sys


def walk(a, b, path, out):
    if isinstance(a, dict):
        if not isinstance(b, dict):
            out.append((path, a, b))
            return
        for k in sorted(set(a) | set(b)):
            if k.endswith("_ms") or k == "run_id":
                continue
            walk(a.get(k), b.get(k), "%s.%s" % (path, k), out)
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            out.append((path, "%d items" % len(a) if isinstance(a, list) else a,
                        "%d items" % len(b) if isinstance(b, list) else b))
            return
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, "%s[%d]" % (path, i), out)
    elif a != b:
        out.append((path, a, b))


def main():
    a, b = (json.load(open(p)) for p in sys.argv[1:3])
    out = []
    walk(a, b, "", out)
    for path, x, y in out[:20]:
        print("%s: %r against %r" % (path, x, y))
    if out:
        print("%d differences" % len(out))
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
