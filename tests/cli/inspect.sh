#!/usr/bin/env bash
# nibble inspect: a .nib, a GGUF (metadata and tensors, like gguf-dump) and safetensors
# (a file or a model folder), as text and as JSON that parses whatever the file is named.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
"$bin" inspect 2>/dev/null; ok test $? -eq 1
"$bin" inspect --bogus x 2>/dev/null; ok test $? -eq 1
"$bin" inspect /nonexistent.gguf 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "/nonexistent.gguf" "$tmp/err"
if [ ! -f "$gguf" ]; then echo "kjv-7m not found: skipped"; [ "${CI:-}" = "true" ] && exit 1; exit 0; fi
# quotes, a backslash, a newline and non-ASCII in every name
weird=$(printf "$tmp/we\"ird\\\\na\nme-\303\251")
cp "$gguf" "$weird.gguf"
"$bin" quantize -m "$gguf" --path w4a8 -q -o "$weird.nib" >/dev/null 2>&1; ok test $? -eq 0
mkdir -p "$weird.hf" && cp "$models"/kjv-7m/hf/* "$weird.hf/"
check_json() { # file, python assertion on d
  "$bin" inspect --json "$1" >"$tmp/j" 2>"$tmp/err"; ok test $? -eq 0
  ok python3 -c "import json,sys; d=json.load(open(sys.argv[1])); f=sys.argv[2]; assert d['file']==f, d['file']; $2" "$tmp/j" "$1"
}
check_json "$weird.gguf" "assert d['format']=='gguf' and d['metadata']['general.architecture']=='llama' and len(d['tensors'])==74 and d['metadata']['tokenizer.ggml.tokens']['count']==4096"
check_json "$weird.nib" "assert d['format']=='nib' and d['header']['weight_path']=='w4a8' and any(t['kind']=='w4a8' and t['layout']=='x16' for t in d['tensors'])"
check_json "$weird.hf" "assert d['format']=='safetensors' and any(t['name']=='model.embed_tokens.weight' and t['shape']==[4096,256] for t in d['tensors'])"
check_json "$weird.hf/model.safetensors" "assert d['format']=='safetensors'"
"$bin" inspect "$weird.gguf" >"$tmp/t" 2>&1; ok test $? -eq 0
ok grep -q "^general.architecture \"llama\"" "$tmp/t"
ok grep -q "^token_embd.weight *F32 *4096 x 256" "$tmp/t"
"$bin" inspect "$weird.nib" >"$tmp/t" 2>&1; ok test $? -eq 0
ok grep -q "^weight_path \"w4a8\"" "$tmp/t"
echo "cli inspect: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
