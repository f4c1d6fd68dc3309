#!/usr/bin/env python3
"""tools/check_exports.py LIB.so HEADER... — libnibble.so exports exactly the
functions the public headers (include/nibble*.h) declare NB_API: none missing (a program linking the shared library
would fail), none extra (internals are hidden and free to change). Run by ctest
(test `exports`). Symbols of the toolchain or a sanitizer runtime (leading underscore)
are not ours and are ignored."""
import re
import subprocess
import sys


def main():
    lib, headers = sys.argv[1], sys.argv[2:]
    declared = set()
    for header in headers:
        with open(header, encoding="utf-8") as f:
            declared |= set(re.findall(r"^NB_API\b[^(]*?\b(nb_[a-z0-9_]+)\s*\(", f.read(),
                                       re.M))
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    exported = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "TtWwDdBbRrVv" and not parts[2].startswith("_"):
            exported.add(parts[2].split("@")[0])
    missing = sorted(declared - exported)
    extra = sorted(exported - declared)
    for m in missing:
        print(f"exports: {m} is declared NB_API in the headers but not exported")
    for e in extra:
        print(f"exports: {e} is exported but is not part of the public headers")
    print(f"exports: {len(exported)} exported, {len(declared)} declared: "
          f"{'FAILED' if missing or extra else 'ok'}")
    return 1 if missing or extra or not declared else 0


if __name__ == "__main__":
    sys.exit(main())
