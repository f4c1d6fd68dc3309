#!/usr/bin/env bash
# nibble export --format gptq: a w4a8 .nib (quantize --path w4a8 --recipe speed) goes out
# as a GPTQ checkpoint whose every linear, dequantized by the independent reader
# (tools/gptq_reader.py, numpy only), equals nibble's own decoding of the .nib
# (inspect --dump) bit for bit; config.json has the fields vLLM reads; a float model goes
# out through the same grid (GGUF, HF and llama2.c sources of kjv-7m give the same
# model.safetensors: the GGUF/llama2.c Q/K row permutation is undone); matrices off the
# checkpoint's grid go out as float with "dynamic" rules; spark and w4a16 free-min builds
# are refused by name; bad input gets its message and exit status 1.
set -u
bin="${NIBBLE_BIN:?}"
src="${NIBBLE_SOURCE_DIR:?}"
models="${NIBBLE_MODELS_DIR:-}"
py="${NIBBLE_PYTHON:-python3}"
reader="$src/tools/gptq_reader.py"
kjv="$models/kjv-7m"
tiny="$models/tiny"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
mkdir -p "$tmp/d"

# every GPTQ (and float) linear of export DIR against `inspect --dump` of NIB; $3: how
# many modules there must be
compare_all() {
  local nib=$1 dir=$2 want=$3 n=0 pairs=() mod name mods
  mods=$("$py" - "$dir" <<'PY'
import json, struct, sys
raw = open(sys.argv[1] + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
mods = {k.rsplit(".", 1)[0] for k in h if k.endswith(".qweight")}
mods |= {k[:-7] for k, v in h.items() if k.endswith(".weight") and len(v.get("shape", [])) == 2
         and "embed_tokens" not in k}
print("\n".join(sorted(mods)))
PY
)
  for mod in $mods; do
    name=$(echo "$mod" | sed -e 's/^lm_head$/output.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.self_attn\.q_proj$/blk.\1.attn_q.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.self_attn\.k_proj$/blk.\1.attn_k.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.self_attn\.v_proj$/blk.\1.attn_v.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.self_attn\.o_proj$/blk.\1.attn_output.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.mlp\.gate_proj$/blk.\1.ffn_gate.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.mlp\.up_proj$/blk.\1.ffn_up.weight/' \
      -e 's/^model\.layers\.\([0-9]*\)\.mlp\.down_proj$/blk.\1.ffn_down.weight/')
    # a tied head stored once is the .nib's token_embd.weight
    "$bin" inspect --dump "$name" -o "$tmp/d/$n.f32" "$nib" >/dev/null 2>&1 ||
      { [ "$name" = output.weight ] &&
        "$bin" inspect --dump token_embd.weight -o "$tmp/d/$n.f32" "$nib" >/dev/null; } || return 1
    pairs+=("$mod=$tmp/d/$n.f32"); n=$((n+1))
  done
  [ "$n" -eq "$want" ] || { echo "compare_all: $n modules, expected $want"; return 1; }
  "$py" "$reader" compare "$dir" "${pairs[@]}"
}

# config.json: the source's shape and a GPTQ quantization_config ($3: sym, $4: lm_head,
# $5: number of dynamic rules)
check_config() {
  "$py" - "$1" "$2" "$3" "$4" "$5" <<'PY'
import json, sys
out = json.load(open(sys.argv[1] + "/config.json"))
src = json.load(open(sys.argv[2] + "/config.json"))
sym, lm_head, n_dyn = sys.argv[3] == "1", sys.argv[4] == "1", int(sys.argv[5])
for k in ("architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings",
          "rms_norm_eps", "rope_theta", "bos_token_id", "eos_token_id"):
    assert out[k] == src[k], (k, out[k], src[k])
assert out["head_dim"] == src.get("head_dim", src["hidden_size"] // src["num_attention_heads"])
assert out["tie_word_embeddings"] is False and out["hidden_act"] == "silu"
q = out["quantization_config"]
assert q["quant_method"] == "gptq" and q["bits"] == 4 and q["group_size"] == 128, q
assert q["desc_act"] is False and q["checkpoint_format"] == "gptq", q
assert q["sym"] is sym and q["lm_head"] is lm_head, q
assert len(q.get("dynamic", {})) == n_dyn, q.get("dynamic")
assert all(k.startswith("-:") for k in q.get("dynamic", {}))
assert json.load(open(sys.argv[1] + "/quantize_config.json")) == q
PY
}

"$bin" export --help > "$tmp/help"; ok test $? -eq 0
ok grep -q -- "--format gptq" "$tmp/help"

if [ -d "$kjv/hf" ]; then
  # ---- kjv-7m: w4a8 speed .nib -> GPTQ, every linear bit for bit
  "$bin" quantize -m "$kjv/hf" --path w4a8 --recipe speed -q -o "$tmp/kjv.nib" >/dev/null 2>&1
  ok test $? -eq 0
  "$bin" export --format gptq -m "$tmp/kjv.nib" -o "$tmp/kjv-gptq" > "$tmp/out" 2>&1
  ok test $? -eq 0
  ok grep -q "57 linear layers as GPTQ, 0 as float" "$tmp/out"
  "$py" "$reader" check "$tmp/kjv-gptq" > "$tmp/check"; ok test $? -eq 0
  ok grep -q "57 GPTQ modules, bits 4, group 128, sym True, lm_head True" "$tmp/check"
  ok compare_all "$tmp/kjv.nib" "$tmp/kjv-gptq" 57
  ok check_config "$tmp/kjv-gptq" "$kjv/hf" 1 1 0
  ok cmp "$tmp/kjv-gptq/tokenizer.model" "$kjv/hf/tokenizer.model"
  ok cmp "$tmp/kjv-gptq/tokenizer_config.json" "$kjv/hf/tokenizer_config.json"
  echo "kjv-7m w4a8 speed: model.safetensors $(stat -c %s "$tmp/kjv-gptq/model.safetensors") bytes"

  # the same .nib with f32 float tensors: norms and embeddings are nibble's values exactly
  "$bin" export --format gptq -m "$tmp/kjv.nib" -o "$tmp/kjv-f32" --dtype f32 >/dev/null 2>&1
  ok test $? -eq 0
  "$bin" inspect --dump token_embd.weight -o "$tmp/emb.f32" "$tmp/kjv.nib" >/dev/null
  "$bin" inspect --dump blk.3.ffn_norm.weight -o "$tmp/norm.f32" "$tmp/kjv.nib" >/dev/null
  ok "$py" - "$tmp/kjv-f32" "$tmp/emb.f32" "$tmp/norm.f32" <<'PY'
import json, struct, sys
import numpy as np
raw = open(sys.argv[1] + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
def get(name):
    b, e = h[name]["data_offsets"]
    assert h[name]["dtype"] == "F32"
    return np.frombuffer(raw[8 + n + b:8 + n + e], "<f4")
assert np.array_equal(get("model.embed_tokens.weight"), np.fromfile(sys.argv[2], "<f4"))
assert np.array_equal(get("model.layers.3.post_attention_layernorm.weight"),
                      np.fromfile(sys.argv[3], "<f4"))
assert list(h)[0] == "__metadata__" and h["__metadata__"] == {"format": "pt"}
names = [k for k in h if k != "__metadata__"]
assert names == sorted(names)
PY

  # ---- the float model: quantized in memory on the same grid; HF, GGUF and llama2.c
  # sources (GGUF and llama2.c rows permuted for interleaved RoPE) give one file
  "$bin" export --format gptq -m "$kjv/hf" -o "$tmp/kjv-float" > "$tmp/out" 2>&1
  ok test $? -eq 0
  ok "$py" "$reader" same "$tmp/kjv-float" "$tmp/kjv-gptq"
  ok check_config "$tmp/kjv-float" "$kjv/hf" 1 1 0
  if [ -f "$kjv/kjv-7m-f32.gguf" ]; then
    "$bin" export --format gptq -m "$kjv/kjv-7m-f32.gguf" -o "$tmp/kjv-gguf" > "$tmp/out" 2>&1
    ok test $? -eq 0
    ok cmp "$tmp/kjv-gguf/model.safetensors" "$tmp/kjv-float/model.safetensors"
    ok grep -q "tokenizer: none written (the source's tokenizer is GGUF metadata" "$tmp/out"
    # a .nib built from the GGUF (X16 layout, permuted rows) gives the same linears
    "$bin" quantize -m "$kjv/kjv-7m-f32.gguf" --path w4a8 --recipe speed -q \
      -o "$tmp/kjv-g.nib" >/dev/null 2>&1
    "$bin" export --format gptq -m "$tmp/kjv-g.nib" -o "$tmp/kjv-g" >/dev/null 2>&1
    ok test $? -eq 0
    ok cmp "$tmp/kjv-g/model.safetensors" "$tmp/kjv-gptq/model.safetensors"
  fi
  if [ -f "$kjv/kjv-7m.bin" ]; then
    "$bin" export --format gptq -m "$kjv/kjv-7m.bin" -o "$tmp/kjv-l2c" >/dev/null 2>&1
    ok test $? -eq 0
    ok cmp "$tmp/kjv-l2c/model.safetensors" "$tmp/kjv-float/model.safetensors"
  fi

  # ---- off the grid: fidelity (v, down at 8 bits; head and embeddings at 8) goes out
  # with q/k/v (fused in vLLM) and down as float, one dynamic rule each, lm_head float;
  # with --dtype f32 those float matrices are nibble's values too
  "$bin" quantize -m "$kjv/hf" --path w4a8 --recipe fidelity -q -o "$tmp/fid.nib" >/dev/null 2>&1
  "$bin" export --format gptq -m "$tmp/fid.nib" -o "$tmp/fid" --dtype f32 > "$tmp/out" 2>&1
  ok test $? -eq 0
  ok grep -q "24 linear layers as GPTQ, 33 as float" "$tmp/out"
  ok grep -q "model.layers.0.self_attn.q_proj: float (fused with model.layers.0.self_attn.v_proj" "$tmp/out"
  ok check_config "$tmp/fid" "$kjv/hf" 1 0 16
  ok compare_all "$tmp/fid.nib" "$tmp/fid" 57

  # ---- refused: w4a16 with free minimums (named), and the folder is not created
  "$bin" quantize -m "$kjv/hf" --path w4a16 --recipe speed -q -o "$tmp/a16.nib" >/dev/null 2>&1
  "$bin" export --format gptq -m "$tmp/a16.nib" -o "$tmp/a16" 2> "$tmp/err"; ok test $? -eq 1
  ok grep -q "(w4a16) is not on GPTQ's grid" "$tmp/err"
  ok grep -q "Export a w4a8 build" "$tmp/err"
  ok test ! -e "$tmp/a16"
  ok test -z "$(ls "$tmp" | grep '^a16\.' | grep -v '^a16\.nib$')"

  # ---- an existing folder: refused unless --force
  "$bin" export --format gptq -m "$tmp/kjv.nib" -o "$tmp/kjv-gptq" 2> "$tmp/err"; ok test $? -eq 1
  ok grep -q "exists and is not empty (--force replaces it)" "$tmp/err"
  "$bin" export --format gptq -m "$tmp/kjv.nib" -o "$tmp/kjv-gptq" --force --dtype bf16 \
    >/dev/null 2>&1; ok test $? -eq 0
  ok grep -q '"torch_dtype": "bfloat16"' "$tmp/kjv-gptq/config.json"
  ok test -z "$(ls "$tmp" | grep '^kjv-gptq\.')"
  mkdir "$tmp/empty"
  "$bin" export --format gptq -m "$tmp/kjv.nib" -o "$tmp/empty" >/dev/null 2>&1; ok test $? -eq 0
  ok test -f "$tmp/empty/model.safetensors"
  # a full disk while writing: the message names the file, nothing is left behind
  shim="${NIBBLE_TEST_SHIM:-}"
  if [ -n "$shim" ] && [ -f "$shim" ]; then
    LD_PRELOAD="$shim" NIBBLE_TEST_WRITE_FAIL=ENOSPC \
      "$bin" export --format gptq -m "$tmp/kjv.nib" -o "$tmp/full" 2> "$tmp/err"
    ok test $? -eq 1
    ok grep -q "model.safetensors" "$tmp/err"
    ok grep -q "(nothing written to $tmp/full)" "$tmp/err"
    ok test -z "$(ls "$tmp" | grep '^full')"
  fi
  "$bin" inspect --dump no.such.tensor -o "$tmp/x.f32" "$tmp/kjv.nib" 2> "$tmp/err"
  ok test $? -eq 1
  ok grep -q "no tensor 'no.such.tensor'" "$tmp/err"
fi

# ---- qwen3-tiny (q/k norms, head_dim != hidden / heads) and qwen2-tiny (q/k/v bias)
for m in qwen3-tiny qwen2-tiny; do
  [ -d "$tiny/$m" ] || continue
  "$bin" quantize -m "$tiny/$m" --path w4a8 --recipe speed -q -o "$tmp/$m.nib" >/dev/null 2>&1
  ok test $? -eq 0
  "$bin" export --format gptq -m "$tmp/$m.nib" -o "$tmp/$m-gptq" > "$tmp/out" 2>&1
  ok test $? -eq 0
  ok grep -q "29 linear layers as GPTQ, 0 as float" "$tmp/out"
  ok grep -q "tokenizer: none written" "$tmp/out"
  ok compare_all "$tmp/$m.nib" "$tmp/$m-gptq" 29
  ok check_config "$tmp/$m-gptq" "$tiny/$m" 1 1 0
  "$bin" export --format gptq -m "$tiny/$m" -o "$tmp/$m-float" >/dev/null 2>&1; ok test $? -eq 0
  ok "$py" "$reader" same "$tmp/$m-float" "$tmp/$m-gptq"
  echo "$m w4a8 speed: model.safetensors $(stat -c %s "$tmp/$m-gptq/model.safetensors") bytes"
done
if [ -d "$tiny/qwen2-tiny" ]; then
  ok grep -q '"model.layers.0.self_attn.k_proj.bias"' "$tmp/qwen2-tiny-gptq/model.safetensors"
fi
if [ -d "$tiny/qwen3-tiny" ]; then
  ok grep -q '"model.layers.3.self_attn.q_norm.weight"' "$tmp/qwen3-tiny-gptq/model.safetensors"
fi

# ---- spark: no vLLM class, refused by name (from a .nib and from the float model)
if [ -d "$tiny/spark-tiny" ]; then
  "$bin" quantize -m "$tiny/spark-tiny" --path w4a8 --recipe speed -q -o "$tmp/spark.nib" \
    >/dev/null 2>&1
  for m in "$tmp/spark.nib" "$tiny/spark-tiny"; do
    "$bin" export --format gptq -m "$m" -o "$tmp/spark" 2> "$tmp/err"; ok test $? -eq 1
    ok grep -q "architecture 'spark' cannot be exported: vLLM and transformers have no model class" "$tmp/err"
    ok test ! -e "$tmp/spark"
  done
fi

# ---- bad input
"$bin" export --format awq -m x -o "$tmp/x" 2> "$tmp/err"; ok test $? -eq 1
ok grep -q "'awq' is not a format nibble writes (gptq)" "$tmp/err"
"$bin" export --format gptq -m "$tmp/no-such-model" -o "$tmp/x" 2> "$tmp/err"; ok test $? -eq 1
ok grep -q "no-such-model" "$tmp/err"
"$bin" export --format gptq -m x -o "$tmp/x" --bogus 2> "$tmp/err"; ok test $? -eq 1
ok grep -q "unknown option '--bogus'" "$tmp/err"
"$bin" export --format gptq -m x -o "$tmp/x" --dtype f8 2> "$tmp/err"; ok test $? -eq 1
"$bin" export -m x -o "$tmp/x" 2> "$tmp/err"; ok test $? -eq 1
ok grep -q -- "--format, -m MODEL and -o DIR are required" "$tmp/err"
ok test ! -e "$tmp/x"

echo "export: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
