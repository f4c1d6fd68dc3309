#!/usr/bin/env bash
# GPTQ / AWQ checkpoints in, through the CLI: checkpoints written by
# tools/make_gptq_fixture.py (numpy) from kjv-7m/hf run (--path source and the default
# path), inspect, quantize keeping their codes (w4a16: greedy ids and logits close to the
# checkpoint's own --path source run), act-order ones are re-quantized with a log line
# that says so, and refused variants name what they are.
set -u
bin="${NIBBLE_BIN:?}"
src="${NIBBLE_SOURCE_DIR:?}"
hf="${NIBBLE_MODELS_DIR:-}/kjv-7m/hf"
py="${NIBBLE_PYTHON:-python3}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
if [ ! -f "$hf/config.json" ]; then echo "kjv-7m/hf not found: skipped"; [ "${CI:-}" = "true" ] && exit 1; exit 0; fi
export XDG_CACHE_HOME="$tmp/cache" NIBBLE_LOG=info
gen() { "$py" "$src/tools/make_gptq_fixture.py" "$hf" "$tmp/$1${2:+-$2}" "$1" ${2:+--break "$2"}; }
for v in gptq-asym-v2 gptq-sym-v1 gptq-act awq; do ok gen $v; done
ok gen awq method

# run: the checkpoint's exact weights, and the default path
for v in gptq-asym-v2 awq; do
  "$bin" run -m "$tmp/$v" --path source --ids 1,1046,261,2074 -n 12 --print-ids -t 2 >"$tmp/o" 2>"$tmp/err"
  ok test $? -eq 0
  ok test "$(wc -w <"$tmp/o")" -eq 12
  ok grep -q ": $(echo $v | cut -d- -f1) checkpoint: 4-bit codes, group 128" "$tmp/err"
  "$bin" run -m "$tmp/$v" --ids 1,1046,261,2074 -n 4 -t 2 >/dev/null 2>"$tmp/err"
  ok test $? -eq 0
done
"$bin" inspect --json "$tmp/gptq-asym-v2" >"$tmp/o" 2>"$tmp/err"; ok test $? -eq 0
ok "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); q=d["quantization"]; assert q["method"]=="gptq" and q["bits"]==4 and q["group_size"]==128 and q["checkpoint_format"]=="gptq_v2" and not q["sym"], q; assert "model.layers.0.self_attn.q_proj.qweight" in open(sys.argv[1]).read()' "$tmp/o"
"$bin" inspect --json "$tmp/awq-method" >"$tmp/o" 2>"$tmp/err"; ok test $? -eq 0
ok grep -q "quant_method 'fp8' is not supported" "$tmp/o"

# quantize: codes kept (w4a16), greedy and logits against the source run
prompts="$tmp/p"
printf 'ids: 1,1046,261,2074\nIn the beginning God\nAnd it came to pass\nAnd the LORD spake unto Moses\n' >"$prompts"
for v in gptq-asym-v2 awq gptq-sym-v1; do
  "$bin" quantize -m "$tmp/$v" --path w4a16 -t 2 -q -o "$tmp/$v.nib" >/dev/null 2>"$tmp/err"
  ok test $? -eq 0
  ok grep -q "56 int4 matrices kept the checkpoint's codes, 0 were re-quantized" "$tmp/err"
  "$bin" eval --ref "$tmp/$v" --test "$tmp/$v.nib" --kv-type f32 --prompts "$prompts" -n 16 \
    -o json -t 2 >"$tmp/$v.json" 2>"$tmp/err"
  ok test $? -eq 0
  ok "$py" - "$tmp/$v.json" "$v" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}: source vs codes-kept w4a16: reproduced {d['reproduced']}/{d['prompts']}, "
      f"top-1 {d['top1_agreement']:.4f}, mean KL {d['mean_kl']:.7f}")
sys.exit(0 if d["top1_agreement"] >= 0.97 and d["mean_kl"] < 1e-4 else 1)
PY
done
# symmetric codes fit w4a8 as well
"$bin" quantize -m "$tmp/gptq-sym-v1" --path w4a8 -t 2 -q -o "$tmp/s8.nib" >/dev/null 2>"$tmp/err"
ok test $? -eq 0
ok grep -q "56 int4 matrices kept the checkpoint's codes" "$tmp/err"
# an asymmetric checkpoint asked for w4a8, and act order: re-quantized, said so
"$bin" quantize -m "$tmp/gptq-asym-v2" --path w4a8 -t 2 -q -o "$tmp/a8.nib" >/dev/null 2>"$tmp/err"
ok test $? -eq 0
ok grep -q "an asymmetric grid (w4a8 needs every zero at 8), so w4a8 re-quantizes" "$tmp/err"
ok grep -q "0 int4 matrices kept the checkpoint's codes, 56 were re-quantized" "$tmp/err"
"$bin" quantize -m "$tmp/gptq-act" --path w4a16 -t 2 -q -o "$tmp/act.nib" >/dev/null 2>"$tmp/err"
ok test $? -eq 0
ok grep -q "act order (g_idx), so w4a16 re-quantizes" "$tmp/err"

# refused by name
"$bin" run -m "$tmp/awq-method" --ids 1 -n 1 >/dev/null 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "quant_method 'fp8' is not supported (gptq, awq are)" "$tmp/err"
echo "cli hfquant: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
