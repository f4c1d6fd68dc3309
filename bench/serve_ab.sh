#!/usr/bin/env bash
# bench/serve_ab.sh — two builds of `nibble serve`, one model, interleaved passes (A B A B
# ...) of bench/serve_load.sh's client at each concurrency: the way to compare server
# builds on a machine whose speed swings by 30% (issue 35: the I/O redesign must keep
# 16-stream throughput and single-stream latency within 5%).
#
#   bench/serve_ab.sh BIN_A BIN_B [MODEL] [passes=3] [clients=1,16] [tokens=64] [threads=2]
#
# Each pass starts each build's server afresh (--parallel = clients), runs the client
# (each client 4 streaming requests), and prints per build and concurrency the aggregate
# tok/s, the time to first token p50 and the inter-token p50; then best and range per
# build. Run nothing else meanwhile: both servers share the same cores.
set -euo pipefail
a=${1:?usage: bench/serve_ab.sh BIN_A BIN_B [MODEL] [passes] [clients] [tokens] [threads]}
b=${2:?usage: bench/serve_ab.sh BIN_A BIN_B [MODEL] [passes] [clients] [tokens] [threads]}
model=${3:-../shared/models/kjv-7m/kjv-7m-f32.gguf}
passes=${4:-3}
clients=${5:-1,16}
tokens=${6:-64}
threads=${7:-2}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for pass in $(seq 1 "$passes"); do
  for c in ${clients//,/ }; do
    for which in A B; do
      bin=$a; [ "$which" = B ] && bin=$b
      NIBBLE=$bin bash "$here/serve_load.sh" "$model" "$c" 4 "$tokens" "$threads" | python3 -c '
import re, sys
t = sys.stdin.read()
agg = float(re.search(r"([0-9.]+) tok/s aggregate", t).group(1))
err = int(re.search(r"errors (\d+)", t).group(1))
ttft = float(re.search(r"first token p50 ([0-9.na]+) ms", t).group(1))
itl = float(re.search(r"inter-token p50 ([0-9.na]+) ms", t).group(1))
print(sys.argv[1], sys.argv[2], sys.argv[3], "%.1f %.1f %.3f %d" % (agg, ttft, itl, err))' "$which" "$pass" "$c" | tee -a "$out"
    done
  done
done
python3 - "$out" "$a" "$b" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1])]
names = {"A": sys.argv[2], "B": sys.argv[3]}
print("\nbuild  clients  tok/s best (range)         ttft p50 ms best (range)   itl p50 ms best (range)  errors")
for c in sorted({int(r[2]) for r in rows}):
    for w in "AB":
        rs = [r for r in rows if r[0] == w and int(r[2]) == c]
        agg = [float(r[3]) for r in rs]; ttft = [float(r[4]) for r in rs]; itl = [float(r[5]) for r in rs]
        print(f"{w} {c:>8}  {max(agg):8.1f} ({min(agg):.1f}-{max(agg):.1f})   {min(ttft):8.1f} ({min(ttft):.1f}-{max(ttft):.1f})"
              f"   {min(itl):7.3f} ({min(itl):.3f}-{max(itl):.3f})  {sum(int(r[6]) for r in rs)}")
print("A:", names["A"]); print("B:", names["B"])
EOF
