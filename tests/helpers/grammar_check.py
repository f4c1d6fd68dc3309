#!/usr/bin/env python3
"""tests/helpers/grammar_check.py KIND FILE — exit 0 when FILE's text (less one final
newline) is an output of tests/data/grammar/KIND.gbnf, checked independently of nibble's
recogniser: an equivalent regular expression (Python's re), or json.loads for the JSON
grammar (an object, its trailing whitespace allowed)."""
import json
import re
import sys

PATTERNS = {
    "sentence": r"And (God|the LORD|Moses|the people) (said|saw|made|called) [a-z]+( [a-z]+){0,4}\.",
    "list": r"\[[1-9][0-9]{0,2}(, [1-9][0-9]{0,2}){2,4}\]",
    "greek": r"«[α-ω]{1,8}» (ναι|όχι)",
}


def main():
    kind, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.endswith("\n"):
        text = text[:-1]
    if kind == "json":
        try:
            ok = isinstance(json.loads(text), dict)
        except ValueError:
            ok = False
    else:
        ok = re.fullmatch(PATTERNS[kind], text) is not None
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
