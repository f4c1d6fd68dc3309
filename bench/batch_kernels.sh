#!/usr/bin/env bash
# bench/batch_kernels.sh — one weight kernel's time a call for small batches of tokens (the
# decode steps of several streams, drafts, prompt tails), 1 thread, the 2048x2048 q/o shape
# of bench_kernels --insn: the wall time of N2 calls minus that of N1, over N2 - N1, so
# the set-up cancels out. Kernels and token counts alternate within each pass.
#
#   bench/batch_kernels.sh [PASSES=2] [TOKENS="1 2 3 4 5 6 8 12 15"] [KERNEL ...]
#
# KERNEL: a name of bench_kernels' table on this CPU (default: "w4a8 avx512vnni" "w4a8 amx"
# "w4a16 avx512bf16" "w4a16 amx"; a kernel this CPU lacks is skipped). BENCH_KERNELS= the
# binary (default build/release/bench_kernels); NIBBLE_BENCH_GROUP= the group (default 128);
# NIBBLE_BENCH_SLICE=N times what one thread of N does (its 1/N of the rows, all the tokens).
# Prints "kernel tokens best_us [range]" per line.
set -euo pipefail
passes=${1:-2}
tokens=${2:-"1 2 3 4 5 6 8 12 15"}
shift $(($# < 2 ? $# : 2))
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] ||
  kernels=("w4a8 avx512vnni" "w4a8 amx" "w4a16 avx512bf16" "w4a16 amx")
bin=${BENCH_KERNELS:-build/release/bench_kernels}
export NIBBLE_BENCH_GROUP=${NIBBLE_BENCH_GROUP:-128}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
calls() { # kernel tokens n: wall microseconds of n calls (empty when the kernel is absent)
  local s e
  s=$(date +%s%N)
  "$bin" --insn "$1" "$2" "$3" >/dev/null 2>&1 || return 0
  e=$(date +%s%N)
  echo $(((e - s) / 1000))
}
for _ in $(seq 1 "$passes"); do
  for n in $tokens; do
    for k in "${kernels[@]}"; do
      n1=$((2000 / n + 50)) n2=$((10000 / n + 250))
      a=$(calls "$k" "$n" "$n1")
      [ -n "$a" ] || continue
      b=$(calls "$k" "$n" "$n2")
      echo "$k|$n|$(((b - a) / (n2 - n1)))" >>"$out"
    done
  done
done
python3 - "$out" <<'EOF'
import sys, collections
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    k, n, us = line.rstrip("\n").split("|")
    rows.setdefault((k, int(n)), []).append(int(us))
print("kernel tokens best_us [range]")
for (k, n), v in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    print(f"{k} {n} {min(v)} [{min(v)}-{max(v)}]")
EOF
