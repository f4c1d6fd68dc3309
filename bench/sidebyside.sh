#!/usr/bin/env bash
# bench/sidebyside.sh — nibble against llama.cpp on the same file, interleaved passes:
# llama-bench on the Q4_K_M, then `nibble bench` on every nibble build, then again;
# prints best and range of each. Run on a quiet machine.
# Usage: bench/sidebyside.sh DIR [passes=3] [threads=2]
#   DIR holds qwen3-1.7b-q4_k_m.gguf and the nibble builds qwen3-1.7b-*.nib (e.g.
#   -w4a8.nib, -w4a16.nib, -balanced.nib; docs/benchmarks.md shows how to make them);
#   LLAMA_BENCH=path/to/llama-bench.
set -euo pipefail
dir=${1:?usage: bench/sidebyside.sh DIR [passes] [threads]}
passes=${2:-3}
threads=${3:-2}
nibble=${NIBBLE:-build/release/nibble}
llama=${LLAMA_BENCH:-llama-bench}
name=${MODEL_NAME:-qwen3-1.7b}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((p = 1; p <= passes; p++)); do
  "$llama" -m "$dir/$name-q4_k_m.gguf" -p 512 -n 128 -t "$threads" -r 1 -o jsonl 2>/dev/null \
    >>"$out/llama.jsonl"
  ms=()
  for f in "$dir/$name"-*.nib; do ms+=(-m "$f"); done
  "$nibble" bench "${ms[@]}" -p 512 -n 128 -r 1 -t "$threads" -o jsonl 2>/dev/null \
    >>"$out/nibble.jsonl"
done
python3 - "$out/llama.jsonl" "$out/nibble.jsonl" <<'PY'
import json, sys
rows = {}
for i, f in enumerate(sys.argv[1:]):
    for line in open(f):
        d = json.loads(line)
        build = "llama.cpp Q4_K_M" if i == 0 else "nibble %s (%s)" % (
            d["model_filename"].rsplit("/", 1)[-1], d["weight_path"])
        test = "pp%d" % d["n_prompt"] if d["n_prompt"] else "tg%d" % d["n_gen"]
        rows.setdefault(build, {}).setdefault(test, []).append(d["avg_ts"])
base = rows["llama.cpp Q4_K_M"]
print("| build | pp512 best (range) | tg128 best (range) | pp vs llama.cpp | tg vs llama.cpp |")
print("|---|---|---|---|---|")
for build, t in rows.items():
    pp, tg = t["pp512"], t["tg128"]
    print("| %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f | %.2f |" % (
        build, max(pp), min(pp), max(pp), max(tg), min(tg), max(tg),
        max(pp) / max(base["pp512"]), max(tg) / max(base["tg128"])))
PY
