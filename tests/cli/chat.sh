#!/usr/bin/env bash
# nibble chat: multi-turn over stdin, the KV cache is reused between turns, and a
# model without a chat template asks for --chat-template.
set -u
bin="${NIBBLE_BIN:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
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
printf 'hello\n' | "$bin" chat -m "$gguf" -n 4 >/dev/null 2>"$tmp/err"
ok test $? -eq 1
ok grep -q -- "--chat-template" "$tmp/err"
printf 'hello\n' | "$bin" chat -m "$gguf" --chat-template nosuch -n 4 >/dev/null 2>"$tmp/err"
ok test $? -eq 1
ok grep -q "nosuch" "$tmp/err"
echo "cli chat: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
