#!/usr/bin/env bash
# bench/ab.sh — two builds of nibble, one model, interleaved passes (A B A B ...):
# the way to compare builds on a machine whose speed swings by 30%.
#
#   bench/ab.sh BIN_A BIN_B MODEL PASSES [nibble bench options, e.g. -p 512 -n 128 -t 2]
#
# Prints one line per pass and build (pp and tg tok/s: the best of `nibble bench -r 1`,
# or of -r N when the options say so), then best and range per build and test. Example (issue 10,
# hardening flags): cmake --preset release -B build/release-nohard -DNIBBLE_HARDEN=OFF;
# bench/ab.sh build/release-nohard/nibble build/release/nibble m.nib 4 -p 512 -n 128 -t 2
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
a=$1 b=$2 model=$3 passes=$4
shift 4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pass in $(seq 1 "$passes"); do
  for which in A B; do
    bin=$a; [ "$which" = B ] && bin=$b
    "$bin" bench -m "$model" -r 1 "$@" -o jsonl 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    test = "pp%d" % d["n_prompt"] if d.get("n_prompt", 0) > 0 else "tg%d" % d["n_gen"]
    print(sys.argv[1], sys.argv[2], test, "%.1f" % d.get("best_ts", d["avg_ts"]))' "$which" "$pass" | tee -a "$out"
  done
done
echo "A = $a"
echo "B = $b"
python3 - "$out" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    which, _, test, ts = line.split()
    runs[(test, which)].append(float(ts))
for (test, which), v in sorted(runs.items()):
    print("%-6s %s best %8.1f  range %.1f-%.1f  (%d passes)" % (test, which, max(v), min(v), max(v), len(v)))
PY
