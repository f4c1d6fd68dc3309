#!/usr/bin/env bash
# nibble eval: the JSON contract, and a build compared with itself is a perfect match.
set -u
bin="${NIBBLE_BIN:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
"$bin" eval --ref x 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "required" "$tmp/err"
if [ ! -f "$gguf" ]; then echo "kjv-7m not found: skipped"; [ "${CI:-}" = "true" ] && exit 1; exit 0; fi
printf 'In the beginning\nids: 1,1046,261\nAnd it came to pass\n' > "$tmp/p.txt"
printf 'In the beginning God created the heaven and the earth. And the earth was without form.' > "$tmp/t.txt"
# (an f32 KV cache on the test side too: the same model must score exactly; the default
# f16 cache's cost is test_model_kv's and docs/kv-cache.md's)
"$bin" eval --ref "$gguf" --test "$gguf" --kv-type f32 --prompts "$tmp/p.txt" -n 8 --text "$tmp/t.txt" -o json -t 2 >"$tmp/o" 2>"$tmp/err"
ok test $? -eq 0
for f in prompts reproduced mean_first_divergence top1_agreement mean_kl ppl_ref ppl_test; do
  ok grep -q "\"$f\"" "$tmp/o"
done
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["prompts"]==3 and d["reproduced"]==3 and d["top1_agreement"]==1 and d["mean_kl"]<1e-9 and d["ppl_ref"]==d["ppl_test"]' "$tmp/o"
# any file name gives valid JSON: quotes, backslashes, a newline, non-ASCII
weird=$(printf "$tmp/we\"ird\\\\na\nme-\303\251\346\226\207.gguf")
cp "$gguf" "$weird"
"$bin" eval --ref "$weird" --test "$weird" --prompts "$tmp/p.txt" -n 4 -o json -t 2 >"$tmp/w" 2>"$tmp/err"
ok test $? -eq 0
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ref"]==sys.argv[2] and d["test"]==sys.argv[2] and d["ppl_ref"] is None' "$tmp/w" "$weird"
# the test model opened as run opens it (--path, a cache of its own), the context options
# in run's spellings
export XDG_CACHE_HOME="$tmp/cache"
"$bin" eval --ref "$gguf" --test "$gguf" --path w4a16 --prompts "$tmp/p.txt" -n 4 -o json \
  --threads=2 --ctx-size 64 -b 8 >"$tmp/q" 2>"$tmp/err"
ok test $? -eq 0
ok grep -q "as w4a16: cache miss" "$tmp/err"
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["prompts"]==3 and 0 < d["top1_agreement"] <= 1' "$tmp/q"
"$bin" eval --ref "$gguf" --test "$gguf" --prompts "$tmp/p.txt" -c 8 -n 4 >/dev/null 2>"$tmp/err"
ok test $? -eq 1
"$bin" eval --ref "$gguf" --test "$gguf" --prompts /nonexistent -o json 2>"$tmp/err"; ok test $? -eq 1
ok grep -q "/nonexistent" "$tmp/err"
echo "cli eval: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
