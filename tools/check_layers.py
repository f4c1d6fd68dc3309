#!/usr/bin/env python3
"""tools/check_layers.py — fail on an #include that crosses a layer boundary.

The layers of ../shared/DESIGN.md, lowest first; a folder may include its own headers
and those of the folders listed for it, nothing else of ours:

  core       nothing (include/nibble.h, the public contract, is allowed everywhere:
             enum nb_status and the public structs are every layer's vocabulary)
  kernels    core
  formats    core                        (parse and validate; they do not compute)
  tokenizer  core, formats
  quant      core, kernels, formats
  model      core, kernels, formats, quant
  runtime    core, kernels, formats, quant, model, tokenizer
  eval       ... everything below, runtime
  server     core, formats, tokenizer, runtime, eval (the model and the context only
             through nibble.h: no model/, kernels/ or quant/ header, issue 34)
  tests/, bench/: anything under src/; nothing under src/ includes app/.
  app/       only the public nibble*.h, app/*.h, system headers and <cjson/cJSON.h>: the CLI is a
             program of the public API (issue 11 item 3), so it never includes src/.

KNOWN lists the crossings that exist today, each with the issue that removes it; the
check fails on any other, and on a KNOWN entry that has gone (so the list only shrinks).
Run by ctest (test `layers`).
"""
import os
import re
import sys

ALLOWED = {
    "core": set(),
    "kernels": {"core"},
    "formats": {"core"},
    "tokenizer": {"core", "formats"},
    "quant": {"core", "kernels", "formats"},
    "model": {"core", "kernels", "formats", "quant"},
    "runtime": {"core", "kernels", "formats", "quant", "model", "tokenizer"},
    "eval": {"core", "kernels", "formats", "quant", "model", "tokenizer", "runtime"},
    # the server reads the model and the context only through nibble.h (issue 34): no
    # model/, kernels/ or quant/ header
    "server": {"core", "formats", "tokenizer", "runtime", "eval"},
}

# (file, included header): crossings still to be removed (none left: issue 11 moved the
# weight-format vocabulary to core/wformat.h).
KNOWN = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# A model's kind is decided in one place (issue 34): formats/source.c sniffs the first bytes
# and parses the header once; everything else takes the opened source. A second sniff is a
# call of the llama2.c sniff (the heuristic that is only meaningful as a sniff) elsewhere.
SNIFF = re.compile(r'\bnb_llama2c_sniff\s*\(')
SNIFF_HOME = os.path.join("src", "formats", "source.c")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, seen = [], set()
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for name in sorted(files):
            if not name.endswith((".c", ".h", ".inc")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            layer = rel.split(os.sep)[1]
            if layer not in ALLOWED:
                bad.append(f"{rel}: folder src/{layer}/ is not a known layer")
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if rel != SNIFF_HOME and not rel.endswith(".h") and \
                    rel != os.path.join("src", "formats", "llama2c.c") and SNIFF.search(text):
                bad.append(f"{rel}: sniffs a model's kind: open it with nb_source_open "
                           "(formats/source.h), the one place that does")
            for inc in INCLUDE.findall(text):
                if "/" not in inc:
                    if not re.fullmatch(r"nibble(_[a-z]+)?\.h", inc) and \
                            not os.path.exists(os.path.join(dirpath, inc)):
                        bad.append(f"{rel}: includes \"{inc}\" (unknown)")
                    continue
                target = inc.split("/")[0]
                if target in ("app",):
                    bad.append(f"{rel}: includes \"{inc}\": nothing under src/ includes app/")
                elif target == layer or target in ALLOWED.get(layer, set()):
                    continue
                elif (rel, inc) in KNOWN:
                    seen.add((rel, inc))
                elif target in ALLOWED:
                    bad.append(f"{rel}: includes \"{inc}\": src/{layer}/ may include only "
                               f"{', '.join(sorted(ALLOWED[layer] | {layer}))}")
    # app/: nibble.h and its own headers only ("..." includes; <...> are system or cJSON).
    app = os.path.join(root, "app")
    for name in sorted(os.listdir(app)) if os.path.isdir(app) else []:
        if not name.endswith((".c", ".h")):
            continue
        with open(os.path.join(app, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            if not re.fullmatch(r"nibble(_[a-z]+)?\.h", inc) and not (inc.startswith("app/") and
                                          os.path.exists(os.path.join(root, inc))):
                bad.append(f"app/{name}: includes \"{inc}\": app/ may include only nibble*.h, "
                           "app/*.h, system headers and <cjson/cJSON.h>")
        for inc in re.findall(r'^\s*#\s*include\s+<([^>]+)>', text, re.M):
            if os.path.exists(os.path.join(root, "src", inc)):
                bad.append(f"app/{name}: includes <{inc}>, a header of src/")
    for gone in sorted(KNOWN - seen):
        bad.append(f"{gone[0]} no longer includes \"{gone[1]}\": remove it from KNOWN in "
                   "tools/check_layers.py")
    for b in bad:
        print("layers:", b)
    print(f"layers: {'FAILED' if bad else 'ok'} ({len(KNOWN)} known crossing(s) left)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
