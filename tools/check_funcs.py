#!/usr/bin/env python3
"""tools/check_funcs.py — fail on a function longer than 120 lines in src/server/ or app/.

Issue 34: the server and the CLI are read by people adding endpoints and commands; a
function that does not fit a screen or two is split into named steps. A function is
counted from the first line of its signature to its closing brace (the house style puts
a definition's braces at column 0). Run by ctest (test `funcs`, label lint).
"""
import glob
import os
import re
import sys

LIMIT = 120
DIRS = ("src/server", "app")
SIG = re.compile(r"^[A-Za-z_].*\(")


def long_functions(path):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    out, start = [], None
    for i, line in enumerate(lines):
        if line == "{" and i > 0:
            j = i - 1
            while j > 0 and not SIG.match(lines[j]) and lines[j].startswith((" ", "\t")):
                j -= 1
            start = j if SIG.match(lines[j]) else None
        elif line.startswith("}") and start is not None:
            n = i - start + 1
            if n > LIMIT:
                out.append((lines[start].strip(), start + 1, n))
            start = None
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad = []
    for d in DIRS:
        for path in sorted(glob.glob(os.path.join(root, d, "*.c"))):
            for sig, line, n in long_functions(path):
                bad.append(f"{os.path.relpath(path, root)}:{line}: {n} lines (at most {LIMIT}): {sig}")
    for b in bad:
        print(b)
    print(f"funcs: {'ok' if not bad else f'{len(bad)} too long'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
