#!/usr/bin/env bash
# bench/arm_insn.sh — instructions per token of kjv-7m decode on aarch64, counted under
# emulation (issue 17; docs/arm.md "Instructions per token"): for each weight path (f32,
# w8a16, w4a16, w4a8) and each emulated CPU (qemu-aarch64 -cpu max: dotprod, i8mm;
# -cpu cortex-a53: armv8.0), `nibble run` generates N and then 2N greedy tokens after the
# same prompt on one thread, under the counting plugin (tools/qemu-insn/insn_count.c);
# (count(2N) - count(N)) / N is the instructions of one decode step, start-up, loading and
# the prompt cancelling out (the average over positions N+1..2N of the prompt + context).
# Guest instructions, not speed: qemu's time says nothing about an Arm core's.
# Usage: bench/arm_insn.sh [N=16] [CPU ...]   after cmake --build --preset release-aarch64
#   (which builds the plugin with the host compiler). NIBBLE_ARM_BUILD: the build folder
#   (build/aarch64); NIBBLE_MODELS_DIR: the test models (../shared/models).
# The .nib files are written once, by the aarch64 nibble under qemu, into BUILD/arm-insn/.
# Then the kernel lab's own count per kernel (bench_kernels --insn NAME N_TOK REPS: one
# 2048 x 2048 X16 matrix, group 64, one thread): REPS and 2 REPS calls, the difference per
# call, for decode (1 token) and a 16-token prefill tile; per 1000 multiply-adds too.
# NIBBLE_INSN_KERNELS=0 skips that table.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-16}
shift || true
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(max cortex-a53)
build=${NIBBLE_ARM_BUILD:-build/aarch64}
models=${NIBBLE_MODELS_DIR:-../shared/models}
model=$models/kjv-7m/kjv-7m-f32.gguf
plugin=$build/qemu-insn/libinsn_count.so
nibble=$build/nibble
lab=$build/bench_kernels
for f in "$nibble" "$plugin" "$model" "$lab"; do
  [ -e "$f" ] || { echo "arm_insn: $f not found (cmake --build --preset release-aarch64?)" >&2; exit 1; }
done
command -v qemu-aarch64 >/dev/null || { echo "arm_insn: qemu-aarch64 not found" >&2; exit 1; }
work=$build/arm-insn
mkdir -p "$work"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
paths=(f32 w8a16 w4a16 w4a8)
prompt="In the beginning"
# One thread everywhere (OpenBLAS's idle workers would poll) and no address randomization
# (setarch -R: where the heap and the mappings land changes a few hundred thousand
# instructions of a run). A run's count then repeats to within a few thousand, but now
# and then one executes ~0.22 M more (about 1 run in 4, whatever the token count), so
# each count is the least of NIBBLE_INSN_RUNS runs (3).
export OPENBLAS_NUM_THREADS=1
norand=()
setarch "$(uname -m)" -R true 2>/dev/null && norand=(setarch "$(uname -m)" -R)
# the multiarch loader: -L / (cmake/toolchain-aarch64.cmake)
qemu() { "${norand[@]}" qemu-aarch64 -L / "$@"; }

for p in "${paths[@]}"; do
  [ -s "$work/kjv-7m-$p.nib" ] && continue
  qemu -cpu max "$nibble" quantize -m "$model" --path "$p" -q -t 1 -o "$work/kjv-7m-$p.nib" \
    >/dev/null
done

runs=${NIBBLE_INSN_RUNS:-3}
# least CPU WHAT PROGRAM ARGS...: the guest instructions of a run of PROGRAM under -cpu CPU,
# the least of $runs runs (WHAT names it in an error)
least() {
  local cpu=$1 what=$2 out=$tmp/count best="" c i
  shift 2
  for ((i = 0; i < runs; i++)); do
    rm -f "$out"
    qemu -cpu "$cpu" -plugin "$plugin,out=$out" "$@" >"$tmp/run.out" 2>"$tmp/run.err" ||
      { echo "arm_insn: $what failed (-cpu $cpu):" >&2; cat "$tmp/run.err" >&2; exit 1; }
    c=$(awk '$1 == "insns" { print $2 }' "$out")
    [ -n "$best" ] && [ "$best" -le "$c" ] || best=$c
  done
  echo "$best"
}
# count CPU PATH TOKENS: a nibble run of TOKENS greedy tokens on the PATH build
count() {
  least "$1" "nibble run ($2)" "$nibble" run -m "$work/kjv-7m-$2.nib" -p "$prompt" -n "$3" \
    --ignore-eos -t 1
}

declare -A per
for cpu in "${cpus[@]}"; do
  for p in "${paths[@]}"; do
    c1=$(count "$cpu" "$p" "$n")
    c2=$(count "$cpu" "$p" $((2 * n)))
    per[$cpu/$p]=$(((c2 - c1) / n))
    echo "arm_insn: -cpu $cpu $p: $c1 insns for $n tokens, $c2 for $((2 * n)): $((per[$cpu/$p])) per token" >&2
  done
done

echo "kjv-7m decode, guest instructions per token, millions (qemu-aarch64 user mode, 1 thread,"
echo "tokens $((n + 1))..$((2 * n)) after \"$prompt\"; emulation counts, not speed;"
echo "max runs the neon+dotprod+i8mm table, cortex-a53 plain neon):"
echo
header="| path |"
rule="|---|"
for cpu in "${cpus[@]}"; do
  header+=" -cpu $cpu |"
  rule+="---:|"
done
echo "$header"
echo "$rule"
for p in "${paths[@]}"; do
  row="| $p |"
  for cpu in "${cpus[@]}"; do row+=" $(awk -v n="${per[$cpu/$p]}" 'BEGIN { printf "%.3f M", n / 1e6 }') |"; done
  echo "$row"
done

[ "${NIBBLE_INSN_KERNELS:-1}" = 1 ] || exit 0
# count_lab CPU KERNEL N_TOK REPS: a kernel-lab run of REPS calls
count_lab() { least "$1" "bench_kernels --insn $2" "$lab" --insn "$2" "$3" "$4"; }
kernels=("w4a8 neon" "w4a8 neon-dotprod" "w4a8 neon-i8mm" "w4a16 neon" "w4a16 neon-bf16")
reps=${NIBBLE_INSN_REPS:-4}
declare -A kin
for cpu in "${cpus[@]}"; do
  for k in "${kernels[@]}"; do
    for nt in 1 16; do
      # a kernel this CPU lacks: --insn refuses it (exit 2), the cell stays empty
      qemu -cpu "$cpu" "$lab" --insn "$k" 1 1 >/dev/null 2>&1 || continue
      c1=$(count_lab "$cpu" "$k" "$nt" "$reps")
      c2=$(count_lab "$cpu" "$k" "$nt" $((2 * reps)))
      kin[$cpu/$k/$nt]=$(((c2 - c1) / reps))
      echo "arm_insn: -cpu $cpu $k n_tok $nt: $((kin[$cpu/$k/$nt])) per call" >&2
    done
  done
done
echo
echo "kernel lab: guest instructions per call on one 2048 x 2048 X16 matrix (group 64), and"
echo "per 1000 multiply-adds; decode = 1 token, prefill = 16 tokens (w4a8: activations already"
echo "quantized; emulation counts, not speed):"
echo
header="| kernel |"
rule="|---|"
for cpu in "${cpus[@]}"; do
  header+=" -cpu $cpu decode | prefill 16 |"
  rule+="---:|---:|"
done
echo "$header"
echo "$rule"
for k in "${kernels[@]}"; do
  row="| $k |"
  for cpu in "${cpus[@]}"; do
    for nt in 1 16; do
      v=${kin[$cpu/$k/$nt]:-}
      if [ -z "$v" ]; then row+=" - |"; continue; fi
      row+=" $(awk -v v="$v" -v nt="$nt" 'BEGIN { printf "%.2f M (%.1f)", v / 1e6, v / (2048 * 2048 * nt / 1000) }') |"
    done
  done
  echo "$row"
done
