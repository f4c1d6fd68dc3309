#!/usr/bin/env bash
# bench/device_scaling.sh — one prepared run on a lent many-core x86 machine (issue 37):
# the CPU probe, the kernel tests on this CPU's own tiles, the Qwen3-1.7B-shape model made
# there, then interleaved nibble / llama.cpp passes at 2 threads (the must-hold set) and at
# 16, 8, 4, 1 (the scaling table), measurement records and a decode profile. Each pass
# also runs the VNNI and AVX512-BF16 kernels (NIBBLE_AMX=0) beside the default AMX ones,
# the opt-in tile kernels (NIBBLE_AMX=all) on the w4a8 build, and at recorded counts the
# Q4_K_M file on the k-quant tiles, an earlier nibble's prefill (nibble-base) on both builds,
# and decode with the weights mapped (NIBBLE_MMAP=1) beside the default huge-page copy.
# Usage: bench/device_scaling.sh D OUT
#   D/bin: nibble, test_kernels_x86, llama-bench, llama-quantize, and optionally
#          nibble-base (an earlier nibble, benchmarked beside nibble on prefill) and
#          bench_kernels (the kernel lab, quick: lab.txt);
#   D/lib: the shared libraries they need (the machine has no -dev packages).
#   OUT: probe.txt, tests.txt, log.txt, bench.jsonl (nibble), llama.jsonl, profile.txt
#        (decode), profile-pp.txt and profile-pp-w4a16.txt (prefill at every core),
#        llama-depth.jsonl (llama.cpp's pp512 at depth 4096 at every core; nibble's are
#        the bench.jsonl lines labelled depth and depth-base),
#        records/ (nibble bench --record). Every step appends as it ends, so a run cut
#        short still returns what it measured. bench/scaling_table.py OUT prints tables.
# Environment: M (model folder, default /tmp/nbm), TS (thread counts after 2, default
# "16 8 4 1"), PASSES2 (passes at 2 threads, default 2), SHAPE (nibble synth's shape,
# default qwen3-1.7b; qwen3-tiny tries the script out in seconds).
set -uo pipefail
D=$(cd "${1:?usage: bench/device_scaling.sh D OUT}" && pwd)
OUT=${2:?usage: bench/device_scaling.sh D OUT}
M=${M:-/tmp/nbm}
S=${SHAPE:-qwen3-1.7b}
mkdir -p "$OUT/records" "$M"
export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
N=$D/bin/nibble
B=$D/bin/nibble-base
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/log.txt"; }
ncores=$(nproc)

log "cores $ncores; $(grep -m1 'model name' /proc/cpuinfo)"
lscpu >"$OUT/lscpu.txt" 2>&1
"$N" probe --explain >"$OUT/probe.txt" 2>&1
NIBBLE_TEST_VERBOSE=1 timeout 120 "$D/bin/test_kernels_x86" >"$OUT/tests.txt" 2>&1
log "test_kernels_x86 rc $?"
if [ -x "$D/bin/bench_kernels" ]; then # the kernel lab: each X16 kernel, tiles included
  NIBBLE_BENCH_QUICK=1 timeout 180 "$D/bin/bench_kernels" 1 >"$OUT/lab.txt" 2>&1
  log "bench_kernels rc $?"
fi

log "model"
[ -f "$M/$S-f16.gguf" ] ||
  "$N" synth --shape "$S" --dtype f16 -t "$ncores" -o "$M/$S-f16.gguf" >>"$OUT/log.txt" 2>&1
log "synth rc $?"
"$D/bin/llama-quantize" "$M/$S-f16.gguf" "$M/$S-q4_k_m.gguf" Q4_K_M "$ncores" \
  >"$OUT/quantize-llama.txt" 2>&1
log "llama-quantize rc $?"
# RTN with absmax scales: speed depends on the shapes and types alone
"$N" quantize -m "$M/$S-f16.gguf" --path w4a8 --recipe balanced --absmax -q -t "$ncores" \
  -o "$M/w4a8.nib" >>"$OUT/log.txt" 2>&1
log "w4a8 balanced rc $?"
"$N" quantize -m "$M/$S-f16.gguf" --path w4a16 --recipe balanced --absmax -q -t "$ncores" \
  -o "$M/w4a16.nib" >>"$OUT/log.txt" 2>&1
log "w4a16 balanced rc $?"
rm -f "$M/$S-f16.gguf"

lb() { # threads
  timeout 300 "$D/bin/llama-bench" -m "$M/$S-q4_k_m.gguf" -p 512 -n 128 -t "$1" -r 1 \
    -o jsonl 2>>"$OUT/log.txt" >>"$OUT/llama.jsonl"
  log "llama.cpp t$1 rc $?"
}
nb() { # label threads args...: one nibble bench, each line tagged with the label
  local label=$1 t=$2
  shift 2
  timeout 300 "$@" -r 1 -t "$t" -o jsonl 2>>"$OUT/log.txt" |
    sed "s/^{/{\"label\":\"$label\",/" >>"$OUT/bench.jsonl"
  log "$label t$t rc $?"
}
pass() { # threads [record]
  local t=$1 rec=()
  [ -n "${2:-}" ] && rec=(--record "$OUT/records")
  lb "$t"
  nb amx "$t" "$N" bench -m "$M/w4a8.nib" -m "$M/w4a16.nib" "${rec[@]}"
  if [ -x "$B" ]; then # an earlier nibble's prefill beside this one's (e.g. the token split)
    nb amx-base "$t" "$B" bench -m "$M/w4a8.nib" -n 0
    nb amx-base-w4a16 "$t" "$B" bench -m "$M/w4a16.nib" -n 0
  fi
  # decode from the file's 4 KiB pages beside the default huge-page copy of the weights
  NIBBLE_MMAP=1 nb mmap "$t" "$N" bench -m "$M/w4a8.nib" -p 0
  NIBBLE_AMX=0 nb vnni "$t" "$N" bench -m "$M/w4a8.nib" -n 0
  NIBBLE_AMX=all nb amx-all "$t" "$N" bench -m "$M/w4a8.nib" -n 0
  # the AVX512-BF16 w4a16 kernel: prefill beside the default AMX-BF16 one (the amx row)
  NIBBLE_AMX=0 nb w4a16-bf16 "$t" "$N" bench -m "$M/w4a16.nib" -n 0
  if [ -n "${2:-}" ]; then # the Q4_K_M file as stored: the k-quant tile kernels in situ
    nb gguf "$t" "$N" bench -m "$M/$S-q4_k_m.gguf" -n 0
    NIBBLE_AMX=all nb gguf-amx "$t" "$N" bench -m "$M/$S-q4_k_m.gguf" -n 0
  fi
}

pass 2 record
for ((p = 2; p <= ${PASSES2:-2}; p++)); do pass 2; done
"$N" bench -m "$M/w4a8.nib" -p 0 -n 64 -r 1 -t "$ncores" --profile >"$OUT/profile.txt" 2>&1
log "profile rc $?"
# prefill at every core: where the time goes once the GEMMs are on tiles
"$N" bench -m "$M/w4a8.nib" -p 512 -n 0 -r 1 -t "$ncores" --profile >"$OUT/profile-pp.txt" 2>&1
log "profile pp w4a8 rc $?"
"$N" bench -m "$M/w4a16.nib" -p 512 -n 0 -r 1 -t "$ncores" --profile \
  >"$OUT/profile-pp-w4a16.txt" 2>&1
log "profile pp w4a16 rc $?"
# prefill at depth 4096 at every core: the attention tiles (AMX-BF16 in nibble, AVX-512 in
# a nibble-base from before 2026-12-06's fb814e2) and llama.cpp at the same depth
nb depth "$ncores" "$N" bench -m "$M/w4a8.nib" -p 512 -n 0 -d 4096
[ -x "$B" ] && nb depth-base "$ncores" "$B" bench -m "$M/w4a8.nib" -p 512 -n 0 -d 4096
timeout 300 "$D/bin/llama-bench" -m "$M/$S-q4_k_m.gguf" -p 512 -n 0 -d 4096 -t "$ncores" -r 1 \
  -o jsonl 2>>"$OUT/log.txt" >>"$OUT/llama-depth.jsonl"
log "llama.cpp depth t$ncores rc $?"
for t in ${TS:-16 8 4 1}; do
  if [ "$t" = "$ncores" ]; then pass "$t" record; else pass "$t"; fi
done
log "done"
