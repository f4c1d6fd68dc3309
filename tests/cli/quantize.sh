#!/usr/bin/env bash
# nibble quantize / inspect / verify / run --path: the CLI contract on kjv-7m.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }

"$bin" quantize -m x --path w5 -o "$tmp/a.nib" 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "is not one of" "$tmp/err"
"$bin" quantize -o "$tmp/a.nib" 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "required" "$tmp/err"
"$bin" quantize -m x --path w4a8 --group 48 -o y 2>"$tmp/err"; ok test $? -eq 1
"$bin" verify /nonexistent.nib 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "/nonexistent.nib" "$tmp/err"
"$bin" quantize -m x --target watch -o y 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "not one of host, arm or phone" "$tmp/err"

if [ -f "$gguf" ]; then
  "$bin" quantize -m "$gguf" --path w4a8 --head 4 -o "$tmp/k.nib" >"$tmp/out" 2>"$tmp/table"; ok test $? -eq 0
  ok grep -q "4.125 bits per weight in linear layers" "$tmp/out"
  ok grep -q "blk.0.attn_q.weight" "$tmp/table"
  # the default build is one build: `quantize` (no --path: auto) writes the bytes `run`
  # caches for the same model (recipe, head and GPTQ on the installed calibration text)
  "$bin" quantize -m "$gguf" -q -o "$tmp/auto.nib" >"$tmp/out" 2>"$tmp/err"; ok test $? -eq 0
  ok grep -q -- "--path auto: .* + GPTQ" "$tmp/err"
  XDG_CACHE_HOME="$tmp/xdg" "$bin" run -m "$gguf" --ids 1,1046 -n 1 >/dev/null 2>"$tmp/err"
  ok test $? -eq 0
  entry=$(ls "$tmp"/xdg/nibble/*.nib 2>/dev/null | head -1)
  ok test -n "$entry"
  ok cmp -s "$entry" "$tmp/auto.nib"
  rm -rf "$tmp/xdg"
  # balanced's 6-bit head runs on the Q6_K block kernel: where the device has none (the
  # reference level, another target) auto takes the recipe's 4-bit head and embeddings;
  # the avx2 level has one (AVX-VNNI or AVX2). GPTQ's calibration passes run at the
  # level's speed (minutes at ref), and the head's width does not depend on them: 64 tokens
  NIBBLE_ISA=ref "$bin" quantize -m "$gguf" -q --calib-tokens 64 -o "$tmp/a2.nib" >"$tmp/out" 2>/dev/null
  ok test $? -eq 0
  ok grep -q "recipe balanced, head 4, embd 4" "$tmp/out"
  if "$bin" probe 2>/dev/null | grep -q avx2; then
    NIBBLE_ISA=avx2 "$bin" quantize -m "$gguf" -q --calib-tokens 64 -o "$tmp/a3.nib" >"$tmp/out" 2>/dev/null
    ok test $? -eq 0
    ok grep -q "^recipe balanced, bits per matrix" "$tmp/out"
    ok grep -q "^  head  *6 (Q6_K)" "$tmp/out"
  fi
  "$bin" inspect "$tmp/auto.nib" 2>/dev/null | grep -q "^token_embd.weight  *q6_k .* x16"
  q6=$?
  if "$bin" probe 2>/dev/null | grep -q avx512_vnni; then ok test "$q6" -eq 0; fi
  "$bin" inspect "$tmp/k.nib" >"$tmp/insp"; ok test $? -eq 0
  ok grep -q '"weight_path" *"w4a8"\|weight_path *"w4a8"' "$tmp/insp"
  ok grep -q "output.weight *w4a8" "$tmp/insp"
  "$bin" verify "$tmp/k.nib" >/dev/null; ok test $? -eq 0
  # --target: whom --path auto chooses for (arm: this host if it is one, else a generic
  # dotprod core: w4a8, speed: no GPTQ; phone: the w8a16 export)
  "$bin" quantize -m "$gguf" --target arm --priority speed -q -o "$tmp/arm.nib" >"$tmp/out" 2>"$tmp/err"
  ok test $? -eq 0
  ok grep -q "target arm" "$tmp/err"
  if [ "$(uname -m)" != aarch64 ]; then
    ok grep -q -- "--path auto: w4a8, recipe speed (kernel neon-dotprod (aarch64 build), unverified)" "$tmp/err"
    ok grep -q "w4a8, 4.125 bits per weight in linear layers" "$tmp/out"
  fi
  "$bin" quantize -m "$gguf" --target phone --priority speed -q -o "$tmp/ph.nib" >"$tmp/out" 2>"$tmp/err"
  ok test $? -eq 0
  ok grep -q "w8a16, " "$tmp/out"
  ok grep -q "attn_q.weight *w4a8 .* x16" "$tmp/insp"
  # the fast kernels and the scalar reference give the same greedy ids, for both int4
  # paths, and the X16 and rows layouts agree; blocked and whole-matrix repacks match
  for p in w4a8 w4a16; do
    "$bin" quantize -m "$gguf" --path $p --head 4 -q -o "$tmp/x.nib" >/dev/null 2>&1
    NIBBLE_LAYOUT=rows "$bin" quantize -m "$gguf" --path $p --head 4 -q -o "$tmp/r.nib" >/dev/null 2>&1
    NIBBLE_REPACK_ROWS=48 "$bin" quantize -m "$gguf" --path $p --head 4 -q -o "$tmp/xb.nib" >/dev/null 2>&1
    ok cmp -s "$tmp/x.nib" "$tmp/xb.nib"
    fast=$("$bin" run -m "$tmp/x.nib" --ids 1,1046,261,2074 -n 24 --print-ids -t 2 2>/dev/null)
    ref=$(NIBBLE_ISA=ref "$bin" run -m "$tmp/x.nib" --ids 1,1046,261,2074 -n 24 --print-ids -t 2 2>/dev/null)
    rows=$("$bin" run -m "$tmp/r.nib" --ids 1,1046,261,2074 -n 24 --print-ids -t 2 2>/dev/null)
    ok test -n "$fast"
    ok test "$fast" = "$ref"
    ok test "$fast" = "$rows"
  done
  ids=$("$bin" run -m "$tmp/k.nib" --ids 1,1046,261,2074 -n 8 --print-ids 2>/dev/null); ok test -n "$ids"
  # a corrupted weight byte: verify and run refuse the file
  printf '\x55' | dd of="$tmp/k.nib" bs=1 seek=$(( $(stat -c %s "$tmp/k.nib") - 3000 )) conv=notrunc 2>/dev/null
  "$bin" verify "$tmp/k.nib" 2>"$tmp/err"; ok test $? -eq 1
  ok grep -q "checksum mismatch" "$tmp/err"
  "$bin" run -m "$tmp/k.nib" --ids 1,2 -n 2 2>"$tmp/err"; ok test $? -eq 1
  # truncated
  head -c 100000 "$gguf" > /dev/null
  head -c 5000 "$tmp/k.nib" > "$tmp/t.nib"
  "$bin" inspect "$tmp/t.nib" 2>"$tmp/err"; ok test $? -eq 1
  ok grep -q "truncated or corrupt" "$tmp/err"
  # calibration: importance from the float model's activations on a text
  printf 'In the beginning God created the heaven and the earth.\nAnd God said, Let there be light.\n' > "$tmp/calib.txt"
  "$bin" quantize -m "$gguf" --path w4a16 --calib "$tmp/calib.txt" -q -o "$tmp/c.nib" >/dev/null 2>&1; ok test $? -eq 0
  "$bin" inspect "$tmp/c.nib" | grep -q '"calib"'; ok test $? -eq 0
  "$bin" quantize -m "$gguf" --path w4a16 --calib /nonexistent.txt -q -o "$tmp/d.nib" 2>"$tmp/err"; ok test $? -eq 1
  ok grep -q "/nonexistent.txt" "$tmp/err"
  # text in, text out from a .nib: its tokenizer is inside
  out=$("$bin" run -m "$tmp/c.nib" -p "In the beginning" -n 6 2>/dev/null); ok test -n "$out"
  # warm start: the first run quantizes into the cache, the second maps it
  export XDG_CACHE_HOME="$tmp/cache"
  "$bin" run -m "$gguf" --path w4a16 --ids 1,1046 -n 4 --print-ids >"$tmp/o1" 2>"$tmp/e1"; ok test $? -eq 0
  ok grep -q "cache miss" "$tmp/e1"
  "$bin" run -m "$gguf" --path w4a16 --ids 1,1046 -n 4 --print-ids >"$tmp/o2" 2>"$tmp/e2"; ok test $? -eq 0
  ok grep -q "cache hit" "$tmp/e2"
  ok cmp -s "$tmp/o1" "$tmp/o2"
else
  echo "kjv-7m not found: model checks skipped"
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI must have the test models"; fail=$((fail+1)); }
fi
# A GGUF k-quant source (tests/data): its Q4_K matrices keep their codes on w4a16 in
# groups of 32 (the sub-blocks), and what it stored with 6 bits (Q6_K: the head, some v and
# down) is not cut to 4 (quant/kq_repack.h, docs/interop.md): the layers' at 8 bits, the
# tied head and embeddings (6 bits in the recipe) keep their Q6_K blocks, bit for bit, once.
kq="${NIBBLE_SOURCE_DIR:?}/tests/data/gguf-quants/kjv-7m-Q4_K_M.gguf"
"$bin" quantize -m "$kq" --path w4a16 --recipe balanced -t 2 -o "$tmp/kq.nib" >/dev/null 2>&1
ok test $? -eq 0
"$bin" inspect "$tmp/kq.nib" >"$tmp/kqi" 2>&1
ok grep -Eq '^blk\.0\.attn_q\.weight +w4a16 .* 32 +x16' "$tmp/kqi"
ok grep -Eq '^token_embd\.weight +q6_k .* x16 ' "$tmp/kqi"
ok grep -Eq '^blk\.0\.ffn_down\.weight +w8a16 ' "$tmp/kqi"
ok grep -q '^head        "q6_k (tied: one copy)"' "$tmp/kqi"
"$bin" run -m "$tmp/kq.nib" -p "In the beginning" -n 8 --temp 0 >"$tmp/kqo" 2>/dev/null
ok test -s "$tmp/kqo"
# auto runs the file as stored, its blocks repacked for the integer kernels (no cache
# entry, nothing quantized), whatever the priority; --path w4a16 keeps the Q4_K codes on
# w4a16 (cached), --path w4a8 re-quantizes
XDG_CACHE_HOME="$tmp/xdg" "$bin" run -m "$kq" -p "In the beginning" -n 4 --temp 0 >/dev/null 2>"$tmp/kqa"
ok grep -q "Q4_K, Q6_K blocks run as stored" "$tmp/kqa"
ok grep -q "repacked for the integer kernels" "$tmp/kqa"
ok test ! -e "$tmp/xdg/nibble"
XDG_CACHE_HOME="$tmp/xdg" "$bin" run -m "$kq" --priority speed -p "In the beginning" -n 4 --temp 0 \
  >/dev/null 2>"$tmp/kqs"
ok grep -q "blocks run as stored" "$tmp/kqs"
XDG_CACHE_HOME="$tmp/xdg" "$bin" run -m "$kq" --path w4a16 -p "In the beginning" -n 4 --temp 0 \
  >/dev/null 2>"$tmp/kqw"
ok grep -q "as w4a16" "$tmp/kqw"
XDG_CACHE_HOME="$tmp/xdg" "$bin" run -m "$kq" --path w4a8 -p "In the beginning" -n 4 --temp 0 \
  >/dev/null 2>"$tmp/kq8"
ok grep -q "as w4a8" "$tmp/kq8"
echo "cli quantize: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
