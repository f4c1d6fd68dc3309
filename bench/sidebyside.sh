#!/usr/bin/env bash
# bench/sidebyside.sh — nibble against llama.cpp on the same file, interleaved passes:
# llama-bench on the Q4_K_M, then `nibble bench` on every nibble build, then again;
# prints best and range of each. Run on a quiet machine.
# Usage: bench/sidebyside.sh DIR [passes=3] [threads=2] [plot.png]
#   DIR holds qwen3-1.7b-q4_k_m.gguf and the nibble builds qwen3-1.7b-*.nib (e.g.
#   -w4a8.nib, -w4a16.nib, -balanced.nib; docs/benchmarks.md shows how to make them);
#   threads: one count or a list (-t style: 1,2,4,16): each pass runs every count in turn
#   (all builds at one count, then the next), and with a list the script also prints a
#   scaling table (best tok/s against threads, and the speed-up over the first count)
#   LLAMA_TYPES="q4_k_m q5_k_m q6_k q8_0": llama-bench on each DIR/qwen3-1.7b-TYPE.gguf in
#   every pass (default q4_k_m), so each nibble build has every rung of the ladder beside
#   it; the ratio columns are against Q4_K_M (or the first type)
#   NIBBLE_ENVS="NIBBLE_AMX=0 NIBBLE_AMX=all": nibble runs every build once per setting in
#   every pass, each a row of its own (e.g. the VNNI and AMX kernels of one CPU side by side)
#   and, with gnuplot, writes plot.png (default DIR/scaling.png): pp and tg against
#   threads for every build. LLAMA_BENCH=path/to/llama-bench, NIBBLE=path/to/nibble.
set -euo pipefail
dir=${1:?usage: bench/sidebyside.sh DIR [passes] [threads[,threads...]] [plot.png]}
passes=${2:-3}
threads=${3:-2}
plot=${4:-$dir/scaling.png}
nibble=${NIBBLE:-build/release/nibble}
llama=${LLAMA_BENCH:-llama-bench}
name=${MODEL_NAME:-qwen3-1.7b}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
types=${GGUF_TYPES:-}
read -r -a envs <<<"${NIBBLE_ENVS:-}"
[ ${#envs[@]} -gt 0 ] || envs=("")
ms=()
if [ -z "$types" ]; then
  for f in "$dir/$name"-*.nib; do ms+=(-m "$f"); done
fi
for ((p = 1; p <= passes; p++)); do
  for t in ${threads//,/ }; do
    if [ -n "$types" ]; then
      for ty in $types; do
        "$llama" -m "$dir/$name-$ty.gguf" -p 512 -n 128 -t "$t" -r 1 -o jsonl 2>/dev/null \
          >>"$out/llama.jsonl"
        "$nibble" bench -m "$dir/$name-$ty.gguf" -p 512 -n 128 -r 1 -t "$t" -o jsonl 2>/dev/null \
          >>"$out/nibble.jsonl"
      done
      continue
    fi
    for ty in ${LLAMA_TYPES:-q4_k_m}; do
      "$llama" -m "$dir/$name-$ty.gguf" -p 512 -n 128 -t "$t" -r 1 -o jsonl 2>/dev/null \
        >>"$out/llama.jsonl"
    done
    for e in "${envs[@]}"; do # each setting a row of its own, tagged in the jsonl
      env ${e:+"$e"} "$nibble" bench "${ms[@]}" -p 512 -n 128 -r 1 -t "$t" -o jsonl 2>/dev/null \
        | sed "s/^{/{\"env\":\"$e\",/" >>"$out/nibble.jsonl"
    done
  done
done
python3 - "$out/llama.jsonl" "$out/nibble.jsonl" "$out" "$types" <<'PY'
import json, sys
pairs = bool(sys.argv[4].strip())
rows = {}  # build -> threads -> test -> [tok/s]
base_of = {}  # build -> the llama.cpp build its ratios are against
for i, f in enumerate(sys.argv[1:3]):
    for line in open(f):
        d = json.loads(line)
        fname = d["model_filename"].rsplit("/", 1)[-1]
        if pairs:
            build = ("llama.cpp %s" if i == 0 else "nibble %s") % fname
            base_of[build] = "llama.cpp %s" % fname
        else:
            ty = fname.rsplit("-", 1)[-1].split(".")[0].upper()
            build = "llama.cpp %s" % ty if i == 0 else "nibble %s (%s%s)" % (
                fname, d["weight_path"], ", " + d["env"] if d.get("env") else "")
        test = "pp%d" % d["n_prompt"] if d["n_prompt"] else "tg%d" % d["n_gen"]
        rows.setdefault(build, {}).setdefault(int(d["n_threads"]), {}).setdefault(
            test, []).append(d["avg_ts"])
if not pairs:  # every row against Q4_K_M, or the first llama.cpp type
    base = "llama.cpp Q4_K_M" if "llama.cpp Q4_K_M" in rows else next(
        b for b in rows if b.startswith("llama.cpp "))
    base_of = {b: base for b in rows}
counts = sorted(next(iter(rows.values())))
for t in counts:
    print("\n%d threads\n" % t)
    print("| build | pp512 best (range) | tg128 best (range) | pp vs llama.cpp | tg vs llama.cpp |")
    print("|---|---|---|---|---|")
    for build, bt in rows.items():
        pp, tg = bt[t]["pp512"], bt[t]["tg128"]
        base = rows[base_of[build]]
        print("| %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f | %.2f |" % (
            build, max(pp), min(pp), max(pp), max(tg), min(tg), max(tg),
            max(pp) / max(base[t]["pp512"]), max(tg) / max(base[t]["tg128"])))
if len(counts) > 1:
    print("\nscaling: best tok/s (speed-up over %d thread%s)\n" % (counts[0], "s"[counts[0] == 1:]))
    print("| build | test | " + " | ".join("t%d" % t for t in counts) + " |")
    print("|---|---|" + "---|" * len(counts))
    with open(sys.argv[3] + "/scaling.dat", "w") as dat:
        for k, (build, bt) in enumerate(rows.items()):
            for test in ("pp512", "tg128"):
                b0 = max(bt[counts[0]][test])
                print("| %s | %s | %s |" % (build, test, " | ".join(
                    "%.1f (%.2fx)" % (max(bt[t][test]), max(bt[t][test]) / b0) for t in counts)))
                dat.write('"%s %s"\n' % (build, test))
                for t in counts:
                    dat.write("%d %.3f\n" % (t, max(bt[t][test])))
                dat.write("\n\n")
PY
if [[ $threads == *,* ]]; then
  if command -v gnuplot >/dev/null; then
    n=$(grep -c '^"' "$out/scaling.dat")
    gnuplot <<GP
set terminal pngcairo size 1000,640 noenhanced
set output "$plot"
set title "$name: tok/s against threads (best of $passes interleaved passes)"
set xlabel "threads"; set ylabel "tok/s"; set logscale xy 2; set key outside right
set xtics ($(echo "$threads" | sed 's/\([0-9]*\)/"\1" \1/g'))
plot for [i=0:$((n - 1))] "$out/scaling.dat" index i using 1:2 with linespoints title columnheader(1)
GP
    echo "plot: $plot"
  else
    echo "plot: gnuplot not found (tools/install-deps.sh installs gnuplot-nox)"
  fi
fi
