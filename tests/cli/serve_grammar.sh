#!/usr/bin/env bash
# nibble serve's "grammar" field (GBNF, llama-server's; docs/grammar.md): chat and
# completions answers, plain and streamed, keep to the grammar (checked by an independent
# recogniser, tests/helpers/grammar_check.py), also four at once and within a tight
# max_tokens; the greedy completion equals nibble run --grammar-file's (max_tokens 14 is
# -n 13: the server keeps one of its tokens for the end of generation, run does not count it); a bad grammar is a
# 400 naming its line, and "grammar" with a JSON response_format or a non-string a 400.
. "$(dirname "$0")/../helpers/serve_common.sh"
src="${NIBBLE_SOURCE_DIR:?}"
data="$src/tests/data/grammar"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
[ -f "$gguf" ] || { echo "SKIP: no $gguf"; exit 0; }
check() { "$py" "$src/tests/helpers/grammar_check.py" "$1" "$2"; }
# body KIND GRAMMAR EXTRA: a request body with the grammar file's text as "grammar"
body() {
  "$py" - "$1" "$data/$2.gbnf" "$3" <<'PY'
import json, sys
kind, path, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
b = {"grammar": open(path, encoding="utf-8").read()}
if kind == "chat":
    b["messages"] = [{"role": "user", "content": "And God said"}]
else:
    b["prompt"] = "In the beginning"
b.update(extra)
print(json.dumps(b))
PY
}
# post PATH BODY OUT: the answer's text (content or text; a stream's deltas joined) in OUT
post() {
  curl -s --max-time 60 -H 'Content-Type: application/json' --data-binary "$2" "$url$1" \
    | "$py" -c '
import json, sys
raw = sys.stdin.read()
if raw.startswith("data:"):
    parts = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            c = json.loads(line[6:])["choices"][0]
            parts.append(c.get("text") or (c.get("delta") or {}).get("content") or "")
    print("".join(parts))
else:
    c = json.loads(raw)["choices"][0]
    print(c["text"] if "text" in c else c["message"]["content"])' >"$3" 2>/dev/null
}

start_server main --parallel 4 --chat-template chatml
for g in sentence list json; do
  for seed in 1 2 3; do
    post /v1/chat/completions "$(body chat $g "{\"temperature\": 1, \"seed\": $seed, \"max_tokens\": 64}")" "$tmp/a"
    check $g "$tmp/a" && ok || bad "chat $g seed $seed: $(cat "$tmp/a")"
    post /v1/chat/completions "$(body chat $g "{\"temperature\": 1, \"seed\": $seed, \"max_tokens\": 64, \"stream\": true}")" "$tmp/b"
    cmp -s "$tmp/a" "$tmp/b" && ok || bad "chat $g seed $seed: the stream differs: $(cat "$tmp/b")"
  done
  post /v1/completions "$(body text $g '{"temperature": 0, "max_tokens": 14}')" "$tmp/c"
  check $g "$tmp/c" && ok || bad "completion $g -n 14: $(cat "$tmp/c")"
  "$bin" run -m "$gguf" --path source -t 2 -p "In the beginning" --grammar-file "$data/$g.gbnf" \
    -n 13 --temp 0 >"$tmp/r" 2>/dev/null
  cmp -s "$tmp/c" "$tmp/r" && ok || bad "completion $g: not run's: $(cat "$tmp/c") / $(cat "$tmp/r")"
done
# four at once: each its own grammar state
for k in 1 2 3 4; do
  post /v1/chat/completions "$(body chat sentence "{\"temperature\": 1, \"seed\": $((k + 10)), \"max_tokens\": 48}")" "$tmp/p$k" &
done
wait_pids=$(jobs -p | grep -v "^$pid$" || true)
for p in $wait_pids; do wait "$p"; done
for k in 1 2 3 4; do check sentence "$tmp/p$k" && ok || bad "parallel $k: $(cat "$tmp/p$k")"; done

# errors
code=$(curl -s --max-time 30 -o "$tmp/e" -w '%{http_code}' --data-binary '{"prompt": "x", "grammar": "root ::= (\"a\""}' "$url/v1/completions")
[ "$code" = 400 ] && grep -q "line 1, column 14: expected ')'" "$tmp/e" && grep -q '"param":"grammar"' "$tmp/e" && ok || bad "bad grammar: $code $(cat "$tmp/e")"
code=$(curl -s --max-time 30 -o "$tmp/e" -w '%{http_code}' --data-binary '{"prompt": "x", "grammar": 3}' "$url/v1/completions")
[ "$code" = 400 ] && grep -q "must be a string" "$tmp/e" && ok || bad "grammar 3: $code $(cat "$tmp/e")"
code=$(curl -s --max-time 30 -o "$tmp/e" -w '%{http_code}' --data-binary "$(body chat sentence '{"response_format": {"type": "json_object"}}')" "$url/v1/chat/completions")
[ "$code" = 400 ] && grep -q "cannot be combined" "$tmp/e" && ok || bad "grammar + json: $code $(cat "$tmp/e")"
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM: exit $rc"
echo "serve_grammar: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
