#!/usr/bin/env bash
# The insn_count plugin's test (ctest qemu_insn_count, cross builds for aarch64): runs
# insn_loop under qemu with the plugin for 1000 and 3000 iterations of its 2-instruction
# loop; the counts must differ by exactly 4000 and each run must be counted (a count of
# at least the loop's own instructions).
# Usage: check.sh QEMU CPU PLUGIN.so INSN_LOOP
set -euo pipefail
qemu=$1 cpu=$2 plugin=$3 prog=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {
  "$qemu" -L / -cpu "$cpu" -plugin "$plugin,out=$tmp/c" "$prog" "$1"
  awk '$1 == "insns" { print $2 }' "$tmp/c"
}
a=$(count 1000)
b=$(count 3000)
echo "insn_count: -cpu $cpu: $a instructions for 1000 iterations, $b for 3000"
[ "$a" -ge 2000 ] || { echo "insn_count: $a is fewer than the loop's 2000" >&2; exit 1; }
[ $((b - a)) -eq 4000 ] || { echo "insn_count: difference $((b - a)), expected 4000" >&2; exit 1; }
# an unknown option makes qemu refuse the plugin
if "$qemu" -L / -cpu "$cpu" -plugin "$plugin,bogus=1" "$prog" 1 2>"$tmp/err"; then
  echo "insn_count: an unknown option was accepted" >&2; exit 1
fi
grep -q "unknown option" "$tmp/err" || { echo "insn_count: no message for an unknown option:" >&2; cat "$tmp/err" >&2; exit 1; }
echo "insn_count: ok"
