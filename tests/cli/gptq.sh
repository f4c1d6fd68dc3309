#!/usr/bin/env bash
# nibble quantize --gptq on kjv-7m: a GPTQ build is never worse than the same recipe
# without GPTQ on KL against the f32 model (held-out text written by kjv-7m itself,
# data/calib/kjv-7m-heldout.txt), for both int4 paths; the recipe is recorded; bad
# combinations are refused by name. KL: eval --ppl-chunks (llama-perplexity's method).
set -u
bin="${NIBBLE_BIN:?}"
src="${NIBBLE_SOURCE_DIR:?}"
models="${NIBBLE_MODELS_DIR:-}"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
calib="$src/data/calib/kjv-7m-calib.txt"
held="$src/data/calib/kjv-7m-heldout.txt"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
py="${NIBBLE_PYTHON:-python3}"

"$bin" quantize -m x --path w4a8 --gptq -o "$tmp/a.nib" 2>"$tmp/err"; ok test $? -eq 1
ok grep -q -- "--gptq needs a calibration text" "$tmp/err"

if [ -f "$gguf" ]; then
  "$bin" quantize -m "$gguf" --path w8a16 --calib "$calib" --gptq -o "$tmp/b.nib" 2>"$tmp/err"
  ok test $? -eq 1
  ok grep -q "needs an int4 weight path" "$tmp/err"
  echo "ids: 1,1046,261,2074" > "$tmp/p"
  for p in w4a8 w4a16; do
    for v in rtn gptq; do
      extra=""; [ $v = gptq ] && extra="--gptq"
      "$bin" quantize -m "$gguf" --path $p --head 4 --calib "$calib" --calib-tokens 4096 \
        $extra -t 2 -q -o "$tmp/$p-$v.nib" >/dev/null 2>"$tmp/err"; ok test $? -eq 0
      "$bin" eval --ref "$gguf" --test "$tmp/$p-$v.nib" --prompts "$tmp/p" -n 8 --text "$held" \
        --ppl-chunks 256 -t 2 -o json > "$tmp/$p-$v.json" 2>/dev/null; ok test $? -eq 0
    done
    "$bin" inspect --json "$tmp/$p-gptq.nib" > "$tmp/insp" 2>/dev/null
    ok grep -q '"gptq"' "$tmp/insp"
    ok "$py" - "$tmp/$p-rtn.json" "$tmp/$p-gptq.json" <<'PY'
import json, sys
rtn, gptq = (json.load(open(f))["ppl_chunks"] for f in sys.argv[1:3])
print(f"held-out KL rtn {rtn['mean_kl']:.5f} gptq {gptq['mean_kl']:.5f}; "
      f"ppl {rtn['ppl_test']:.4f} vs {gptq['ppl_test']:.4f} (f32 {rtn['ppl_ref']:.4f})")
ok = rtn["chunks"] > 0 and rtn["scored"] == gptq["scored"] and gptq["mean_kl"] <= rtn["mean_kl"]
sys.exit(0 if ok else 1)
PY
  done
fi
echo "gptq: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
