#!/usr/bin/python3
"""check_ref.py — compare tools/ref_forward.py with the float64 PyTorch references that
come with the shared test models (tiny/*/reference.json and kjv-7m's first_logits).

    /usr/bin/python3 tools/check_ref.py [MODELS_DIR]     (default ../shared/models)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_forward import Model  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    models = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "shared",
                                                                 "models")
    worst = 0.0
    for name in ("qwen2-tiny", "qwen3-tiny", "spark-tiny"):
        d = os.path.join(models, "tiny", name)
        m = Model(d)
        with open(os.path.join(d, "reference.json")) as f:
            ref = json.load(f)
        for case in ref["cases"]:
            p = case["prompt"]
            lg = m.forward(p)
            dl = np.abs(lg[-1] - case["last_logits"]).max()
            dm = np.abs(lg[case["mid_logits_pos"]] - case["mid_logits"]).max()
            same = m.greedy(p, len(case["greedy"])) == case["greedy"]
            worst = max(worst, dl, dm)
            print("%-11s prompt %3d: last %.2e  mid %.2e  greedy %s" %
                  (name, len(p), dl, dm, "same" if same else "DIFFERENT"))
    d = os.path.join(models, "kjv-7m")
    m = Model(os.path.join(d, "hf"))
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    for case in ref["cases"]:
        lg = m.forward(case["prompt"])
        dl = np.abs(lg[-1] - case["first_logits"]).max()
        worst = max(worst, dl)
        # the first greedy id (the full continuation is slow in numpy)
        first = int(np.argmax(lg[-1])) == case["greedy"][0]
        print("kjv-7m      prompt %3d: first_logits %.2e  first id %s" %
              (len(case["prompt"]), dl, "same" if first else "DIFFERENT"))
    print("max |diff| %.3e" % worst)
    return 0 if worst < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
