#!/usr/bin/env bash
# bench/fusions.sh — measure each fusion switch in the whole step (not in isolation):
# interleaved passes of `nibble bench` over NIBBLE_FUSE settings, best and spread of
# each. Usage: bench/fusions.sh MODEL.nib [passes=3] [threads=2]
# Run it on a quiet machine; differences under ~8% are noise on a shared VM.
set -euo pipefail
model=${1:?usage: bench/fusions.sh MODEL.nib [passes] [threads]}
passes=${2:-3}
threads=${3:-2}
nibble=${NIBBLE:-build/release/nibble}
variants=(none norm-quant act-quant resid-norm "norm-quant,act-quant,resid-norm" all)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((p = 1; p <= passes; p++)); do
  for v in "${variants[@]}"; do
    NIBBLE_FUSE=$v "$nibble" bench -m "$model" -p 512 -n 64 -r 1 -t "$threads" -o jsonl 2>/dev/null |
      sed "s/^{/{\"fuse\":\"$v\",/" >>"$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    test = "pp%d" % d["n_prompt"] if d["n_prompt"] else "tg%d" % d["n_gen"]
    rows.setdefault((d["fuse"], test), []).append(d["avg_ts"])
print("| NIBBLE_FUSE | test | best t/s | spread | passes |")
print("|---|---|---|---|---|")
for (fuse, test), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print("| %s | %s | %.1f | %.1f%% | %d |" % (fuse, test, max(v), 100 * (max(v) - min(v)) / max(v), len(v)))
PY
