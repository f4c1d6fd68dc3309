#!/usr/bin/env bash
# bench/depth.sh — decode at depth, nibble against llama.cpp, interleaved passes:
# llama-bench -d on the Q4_K_M (its default f16 cache), then `nibble bench -d` on one
# nibble build with each KV type asked, then again; prints best and range of tg at each
# depth. Run on a quiet machine (the fills are long: 16k tokens is minutes).
# Usage: bench/depth.sh Q4_K_M.gguf BUILD.nib [passes=2] [threads=2] [depths=4096,16384]
#   [kv types=f16]   LLAMA_BENCH=path/to/llama-bench, NIBBLE=path/to/nibble
set -euo pipefail
q4=${1:?usage: bench/depth.sh Q4_K_M.gguf BUILD.nib [passes] [threads] [depths] [kv types]}
nib=${2:?usage: bench/depth.sh Q4_K_M.gguf BUILD.nib [passes] [threads] [depths] [kv types]}
passes=${3:-2}
threads=${4:-2}
depths=${5:-4096,16384}
kvs=${6:-f16}
n=${N_GEN:-128}
nibble=${NIBBLE:-build/release/nibble}
llama=${LLAMA_BENCH:-llama-bench}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((p = 1; p <= passes; p++)); do
  "$llama" -m "$q4" -p 0 -n "$n" -d "$depths" -t "$threads" -r 1 -o jsonl 2>/dev/null \
    >>"$out/llama.jsonl"
  for kv in ${kvs//,/ }; do
    "$nibble" bench -m "$nib" -p 0 -n "$n" -d "$depths" -r 1 -t "$threads" --kv-type "$kv" \
      -o jsonl 2>/dev/null | sed "s/^{/{\"kv\":\"$kv\",/" >>"$out/nibble.jsonl"
  done
done
python3 - "$out/llama.jsonl" "$out/nibble.jsonl" "$n" <<'PY'
import json, sys
rows = {}
for i, f in enumerate(sys.argv[1:3]):
    for line in open(f):
        d = json.loads(line)
        build = "llama.cpp Q4_K_M (f16 KV)" if i == 0 else "nibble %s (%s KV)" % (
            d["model_filename"].rsplit("/", 1)[-1], d["kv"])
        rows.setdefault(build, {}).setdefault(int(d["n_depth"]), []).append(d["avg_ts"])
base = rows["llama.cpp Q4_K_M (f16 KV)"]
depths = sorted(base)
print("| build | " + " | ".join("tg%s @ d%d best (range)" % (sys.argv[3], x) for x in depths) +
      " | " + " | ".join("vs llama.cpp @ d%d" % x for x in depths) + " |")
print("|---|" + "---|" * (2 * len(depths)))
for build, t in rows.items():
    cells = ["%.2f (%.2f-%.2f)" % (max(t[x]), min(t[x]), max(t[x])) for x in depths]
    ratio = ["%.2f" % (max(t[x]) / max(base[x])) for x in depths]
    print("| %s | %s | %s |" % (build, " | ".join(cells), " | ".join(ratio)))
PY
