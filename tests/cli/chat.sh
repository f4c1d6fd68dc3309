#!/usr/bin/env bash
# nibble chat: multi-turn over stdin, the KV cache is reused between turns, and a
# model without a chat template falls back to ChatML, said once.
set -u
bin="${NIBBLE_BIN:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache" # chat takes run's road: --path auto quantizes into the cache
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
if [ ! -f "$gguf" ]; then
  echo "kjv-7m not found: skipped"
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
printf 'And God said\nLet there be light\n' | "$bin" chat -m "$gguf" --chat-template chatml -n 12 -t 2 >"$tmp/out" 2>"$tmp/err"
ok test $? -eq 0
ok test "$(wc -l < "$tmp/out")" -eq 2
reused=$(sed -n 's/^\[\([0-9]*\) cached tokens reused.*/\1/p' "$tmp/err" | tail -1)
ok test "${reused:-0}" -gt 30
# run's model and sampler options: a weight path, top-k 1 (greedy), a seed, --opt=value
printf 'And God said\n' | "$bin" chat -m "$gguf" --chat-template=chatml --path w4a8 --top-k 1 \
  --temp 0.7 -s 3 --ctx-size 128 -n 6 -t 2 >"$tmp/o1" 2>"$tmp/err"
ok test $? -eq 0
ok grep -q "as w4a8: cache" "$tmp/err"
printf 'And God said\n' | "$bin" chat -m "$gguf" --chat-template chatml --path w4a8 --temp 0 \
  -n 6 -t 2 >"$tmp/o2" 2>/dev/null
ok cmp -s "$tmp/o1" "$tmp/o2" # top-k 1 is greedy whatever the temperature
# a model without a chat template is chatted with in ChatML, as nibble serve does, said once
printf 'hello\n' | "$bin" chat -m "$gguf" -n 4 >/dev/null 2>"$tmp/err"
ok test $? -eq 0
ok test "$(grep -c "no chat template in the model: using ChatML; --chat-template NAME picks another" "$tmp/err")" -eq 1
ok grep -q "template chatml;" "$tmp/err"
printf 'hello\n' | "$bin" chat -m "$gguf" --chat-template nosuch -n 4 >/dev/null 2>"$tmp/err"
ok test $? -eq 1
ok grep -q "nosuch" "$tmp/err"
# a message longer than the context is refused with a message; the session goes on
long=$(for i in $(seq 60); do printf 'And God said, Let there be light: and there was light. '; done)
printf '%s\nAnd God said\n' "$long" | "$bin" chat -m "$gguf" --chat-template chatml -c 64 -n 8 -t 2 >"$tmp/out" 2>"$tmp/err"
ok test $? -eq 0
ok grep -q "message not sent: it is [0-9]* tokens with the chat template, the context holds 64 (--ctx)" "$tmp/err"
ok test "$(wc -l < "$tmp/out")" -eq 1
ok grep -q "cached tokens reused" "$tmp/err"
# turns that together outgrow the context, without context shift (tests/cli/ctxshift.sh
# has it): earlier turns are dropped, the session goes on
printf 'And God said\nLet there be light\nAnd there was light\nAnd God saw the light\n' |
  "$bin" chat -m "$gguf" --chat-template chatml -c 48 -n 16 -t 2 --no-shift >"$tmp/out" 2>"$tmp/err"
ok test $? -eq 0
ok test "$(wc -l < "$tmp/out")" -eq 4
ok grep -q "earlier turns dropped" "$tmp/err"
echo "cli chat: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
