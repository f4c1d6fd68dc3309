#!/usr/bin/env bash
# A full context is not an error: run and chat shift it (keep the start, drop the oldest
# half of the rest, run the newest again) and go on; --no-shift stops cleanly; --keep,
# a prompt longer than the context and -c beyond the model's training are checked.
set -u
bin="${NIBBLE_BIN:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
if [ ! -f "$gguf" ]; then
  echo "kjv-7m not found: skipped"
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
# the float weights as stored: exact, and no quantization on first use
run() { "$bin" run -m "$gguf" --path source -t 2 --print-ids "$@"; }
prompt=1,1046,261,2074 # BOS "In the beginning": 4 tokens
# nth ids (1-based, inclusive range A-B) of a file of space-separated ids
ids() { tr ' ' '\n' <"$1" | sed -n "$2p" | paste -sd' '; }
count() { wc -w <"$1" | tr -d ' '; }

# -c 64 -n 200: the context fills after 61 generated tokens and shifts; all 200 come out
run --ids $prompt -c 64 -n 200 >"$tmp/shift" 2>"$tmp/shift.err"
ok test $? -eq 0
ok test "$(count "$tmp/shift")" -eq 200
ok grep -q "generated 200 tokens" "$tmp/shift.err"
ok grep -q "the context of 64 tokens was full [0-9]* times: kept the first 1," "$tmp/shift.err"
# the same run with room for everything: identical up to the first shift (61 tokens:
# 4 prompt + 60 decoded fill the 64, the 61st is sampled from them), then its own way
run --ids $prompt -c 256 -n 200 >"$tmp/noshift" 2>/dev/null
ok test "$(ids "$tmp/shift" 1,61)" = "$(ids "$tmp/noshift" 1,61)"
ok test "$(ids "$tmp/shift" 1,200)" != "$(ids "$tmp/noshift" 1,200)"
# --lookup 8 with the shifts: the same 200 ids (drafts are verified and never fed past a
# full context, so every shift comes at the same token), and drafts were accepted; the
# same on the w4a8 path, sampled, with --keep
run --ids $prompt -c 64 -n 200 --lookup 8 >"$tmp/shiftlk" 2>"$tmp/shiftlk.err"
ok cmp -s "$tmp/shift" "$tmp/shiftlk"
ok grep -q "the context of 64 tokens was full [0-9]* times" "$tmp/shiftlk.err"
ok grep -Eq "prompt lookup: [0-9]+ draft tokens verified, [1-9][0-9]* accepted" "$tmp/shiftlk.err"
for lk in 0 8; do
  "$bin" run -m "$gguf" --path w4a8 -t 2 --print-ids --ids $prompt -c 40 --keep 4 -n 150 \
    --temp 0.7 --seed 3 --lookup $lk >"$tmp/w$lk" 2>"$tmp/w$lk.err"
done
ok cmp -s "$tmp/w0" "$tmp/w8"
ok grep -q "was full" "$tmp/w8.err"
# deterministic: the shifted run again gives the same 200, and so does a sampled one
run --ids $prompt -c 64 -n 200 >"$tmp/shift2" 2>/dev/null
ok cmp -s "$tmp/shift" "$tmp/shift2"
run --ids $prompt -c 64 -n 150 --temp 0.8 --seed 7 >"$tmp/s1" 2>/dev/null
run --ids $prompt -c 64 -n 150 --temp 0.8 --seed 7 >"$tmp/s2" 2>/dev/null
ok test "$(count "$tmp/s1")" -eq 150
ok cmp -s "$tmp/s1" "$tmp/s2"
# the shift is exact: at the first one the cache held BOS, the 3 prompt tokens and
# generated 1..60, with generated 61 next; BOS stays, the oldest half of the other 63
# (31: the prompt and generated 1..28) goes. A fresh run of what is left, BOS +
# generated 29..61, continues as the shifted run did until its second shift (62..92).
fresh=$(echo "1 $(ids "$tmp/shift" 29,61)" | tr ' ' ',')
run --ids "$fresh" -c 256 -n 31 >"$tmp/fresh" 2>/dev/null
ok test "$(ids "$tmp/fresh" 1,31)" = "$(ids "$tmp/shift" 62,92)"

# --no-shift: stops where the context is full, exit 0, says so; the ids so far are out
run --ids $prompt -c 64 -n 200 --no-shift >"$tmp/stop" 2>"$tmp/stop.err"
ok test $? -eq 0
ok test "$(count "$tmp/stop")" -eq 61
ok test "$(ids "$tmp/stop" 1,61)" = "$(ids "$tmp/noshift" 1,61)"
ok grep -q "context of 64 tokens full: stopped" "$tmp/stop.err"
"$bin" run -m "$gguf" --path source -t 2 -p "In the beginning" -c 32 -n 100 --no-context-shift \
  >"$tmp/stop.txt" 2>"$tmp/stop.err"
ok test $? -eq 0
ok test -s "$tmp/stop.txt"
ok grep -q "context of 32 tokens full: stopped" "$tmp/stop.err"

# -n -1 generates until end of generation: this model does not end this text, so the
# run goes on past the context of 32 for as long as anyone reads (head stops it)
timeout 300 "$bin" run -m "$gguf" --path source -t 2 --print-ids --ids $prompt -c 32 -n -1 \
  2>/dev/null | head -c 1200 >"$tmp/endless"
ok test "$(count "$tmp/endless")" -gt 200

# --keep: -1 keeps the whole prompt, N keeps BOS and N more (at most the prompt)
run --ids $prompt -c 64 -n 100 --keep -1 >"$tmp/k" 2>"$tmp/k.err"
ok test $? -eq 0
ok grep -q "kept the first 4," "$tmp/k.err"
ok test "$(ids "$tmp/k" 1,61)" = "$(ids "$tmp/noshift" 1,61)"
run --ids $prompt -c 64 -n 100 --keep 2 >/dev/null 2>"$tmp/k.err"
ok grep -q "kept the first 3," "$tmp/k.err"
# a --keep the context cannot hold and still drop a token is refused, naming the numbers
run --ids $prompt -c 64 -n 10 --keep 63 >/dev/null 2>"$tmp/k.err"
ok test $? -eq 1
ok grep -q -- "--keep 63 keeps 64 tokens (BOS is always kept), but the context holds 64" "$tmp/k.err"
run --ids $prompt -c 4 -n 10 --keep -1 >/dev/null 2>"$tmp/k.err"
ok test $? -eq 1
ok grep -q "which fills the context of 4" "$tmp/k.err"
run --ids $prompt -c 64 -n 10 --no-shift --context-shift >/dev/null 2>"$tmp/k.err"
ok test $? -eq 1
ok grep -q "contradict" "$tmp/k.err"

# a prompt longer than the context: a clear error with both numbers
run --ids 1,1046,261,2074,271,261 -c 4 -n 4 >/dev/null 2>"$tmp/p.err"
ok test $? -eq 1
ok grep -q "the prompt is 6 tokens, longer than the context of 4" "$tmp/p.err"

# -c beyond the model's 256 trained tokens: a warning naming both; absurdly far beyond
# still warns and ends cleanly (a run, or the allocation's error), never by a signal
run --ids $prompt -c 512 -n 4 >/dev/null 2>"$tmp/c.err"
ok test $? -eq 0
ok grep -q "context of 512 tokens is longer than the model was trained for (256)" "$tmp/c.err"
run --ids $prompt -c 100000 -n 4 >/dev/null 2>"$tmp/c.err"
rc=$?
ok test "$rc" -le 1
ok grep -q "context of 100000 tokens is longer than the model was trained for (256)" "$tmp/c.err"
# a context whose KV cache (64 GiB at -c 16777216, f16) exceeds the memory available:
# refused before anything is allocated, naming the sizes (not an OOM kill later)
mem_kb=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo 2>/dev/null)
if [ -n "$mem_kb" ] && [ "$mem_kb" -lt $((64 * 1024 * 1024)) ]; then
  run --ids $prompt -c 16777216 -n 4 >/dev/null 2>"$tmp/c.err"
  ok test $? -eq 1
  ok grep -q "a context of 16777216 tokens needs 64.* GiB (KV cache 64.00 GiB as f16" "$tmp/c.err"
  ok grep -q "GiB of memory is available: about [0-9]* tokens fit" "$tmp/c.err"
fi

# chat: turns that outgrow the context shift and go on; no answer is cut
msgs='And God said\nLet there be light\nAnd there was light\nAnd God saw the light\n'
printf "$msgs" | "$bin" chat -m "$gguf" --path source --chat-template chatml -c 64 -n 40 -t 2 \
  >"$tmp/chat" 2>"$tmp/chat.err"
ok test $? -eq 0
ok test "$(grep -c "cached tokens reused" "$tmp/chat.err")" -eq 4 # every message answered
ok test "$(grep -c "outgrew" "$tmp/chat.err")" -eq 0
ok grep -q "the context of 64 tokens was full: [0-9]* tokens dropped after the first" "$tmp/chat.err"
ok test "$(grep -c "answer was cut" "$tmp/chat.err")" -eq 0
printf "$msgs" | "$bin" chat -m "$gguf" --path source --chat-template chatml -c 64 -n 40 -t 2 \
  >"$tmp/chat2" 2>/dev/null
ok cmp -s "$tmp/chat" "$tmp/chat2"
# the system turn is kept: a shift keeps more than the bare first user header
nosys=$(sed -n 's/.*dropped after the first \([0-9]*\),.*/\1/p' "$tmp/chat.err" | head -1)
printf "$msgs" | "$bin" chat -m "$gguf" --path source --chat-template chatml -c 96 -n 40 -t 2 \
  --system "You are a scribe of the temple." >/dev/null 2>"$tmp/chat.err"
ok test $? -eq 0
sys=$(sed -n 's/.*dropped after the first \([0-9]*\),.*/\1/p' "$tmp/chat.err" | head -1)
ok test "${sys:-0}" -gt "$((${nosys:-0} + 5))"
# --no-shift: an answer is cut where the context is full
printf 'And God said\n' | "$bin" chat -m "$gguf" --path source --chat-template chatml -c 48 -n 40 \
  -t 2 --no-shift >/dev/null 2>"$tmp/chat.err"
ok test $? -eq 0
ok grep -q "the context of 48 tokens is full: the answer was cut" "$tmp/chat.err"
printf 'And God said\n' | "$bin" chat -m "$gguf" --path source --chat-template chatml -c 48 -n 4 \
  --keep 48 >/dev/null 2>"$tmp/chat.err"
ok test $? -eq 1
ok grep -q -- "--keep 48 keeps 48 tokens" "$tmp/chat.err"
echo "cli ctxshift: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
