#!/usr/bin/env bash
# nibble quantize writes the same bytes whatever the thread count and whichever ISA
# level runs the scale search (AVX-512, AVX2 or the baseline build of quant/search.c):
# kjv-7m on every weight path, with the default and a mixed recipe, with absmax and with
# importance from a calibration text; a tiny Qwen3 from safetensors.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
tiny="$models/tiny/qwen3-tiny"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }

# same MODEL NAME ARGS...: -t 1, -t 3 and the scalar build at -t 2 give one file
same() {
  local m=$1 name=$2; shift 2
  "$bin" quantize -m "$m" "$@" -t 1 -q -o "$tmp/$name.1.nib" >/dev/null 2>&1; ok test $? -eq 0
  "$bin" quantize -m "$m" "$@" -t 3 -q -o "$tmp/$name.3.nib" >/dev/null 2>&1; ok test $? -eq 0
  ok cmp -s "$tmp/$name.1.nib" "$tmp/$name.3.nib"
  if [ "${ISA_TOO:-1}" = 1 ]; then
    for isa in ref avx2; do
      NIBBLE_ISA=$isa "$bin" quantize -m "$m" "$@" -t 2 -q -o "$tmp/$name.$isa.nib" >/dev/null 2>&1
      ok cmp -s "$tmp/$name.1.nib" "$tmp/$name.$isa.nib"
    done
  fi
  rm -f "$tmp/$name".*.nib
}

if [ -f "$gguf" ]; then
  same "$gguf" w4a8 --path w4a8
  same "$gguf" w4a16 --path w4a16
  same "$gguf" w8a16 --path w8a16
  same "$gguf" w4a8-bal --path w4a8 --recipe balanced
  same "$gguf" w4a16-fid --path w4a16 --recipe fidelity --group 64
  same "$gguf" w4a8-absmax --path w4a8 --absmax
  # importance from activations: the forward pass's kernels differ by ISA, so only the
  # thread count is varied here
  printf 'In the beginning God created the heaven and the earth.\nAnd God said, Let there be light: and there was light.\n' > "$tmp/calib.txt"
  ISA_TOO=0 same "$gguf" w4a16-calib --path w4a16 --calib "$tmp/calib.txt"
else
  echo "kjv-7m not found: model checks skipped"
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI must have the test models"; fail=$((fail+1)); }
fi
if [ -d "$tiny" ]; then
  same "$tiny" tiny-w4a8 --path w4a8 --group 32
else
  echo "qwen3-tiny not found: checks skipped"
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI must have the test models"; fail=$((fail+1)); }
fi
echo "cli quantize_threads: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
