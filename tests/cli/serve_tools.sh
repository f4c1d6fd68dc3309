#!/usr/bin/env bash
# nibble serve: tools and JSON output with curl on kjv-7m — tool_choice required / named
# gives a call that parses (a listed name, JSON object arguments) at any temperature;
# response_format json_object gives content that parses as a JSON object; their streams
# add up to the plain answers; auto / none leave text; tool and assistant-call messages
# are taken; bad tools get 400 with the param. Both tool formats (ChatML/Hermes, Llama 3).
# kjv-7m knows nothing of tools: every call it makes is the constraint's doing.
. "$(dirname "$0")/../helpers/serve_common.sh"

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "SKIP (no $gguf)"; exit 0; fi

SERVE_ARGS=(-c 1024 --parallel 2)
# post JSON [OUT]: POST /v1/chat/completions; $code, the body in OUT (default $tmp/body)
post() {
  local out="${2:-$tmp/body}"
  code=$(curl -s --max-time 120 -o "$out" -w '%{http_code}' -H 'Content-Type: application/json' \
         --data-binary "$1" "$url/v1/chat/completions")
}
# check NAME PYTHON [FILE]: run a Python check over j (the body's JSON); it prints "ok" or why not
check() {
  local name="$1" expr="$2" file="${3:-$tmp/body}" got
  got=$("$py" - "$file" <<EOF 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
$expr
EOF
)
  if [ "$got" = ok ]; then ok; else bad "$name: $got: $(head -c 400 "$file")"; fi
}
# sse FILE: the chunks of a stream as a JSON array in FILE.json
sse() {
  "$py" - "$1" <<'EOF'
import json, sys
ev = [l[6:] for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ")]
assert ev[-1] == "[DONE]", "no [DONE]"
json.dump([json.loads(e) for e in ev[:-1]], open(sys.argv[1] + ".json", "w"))
EOF
}

TOOLS='[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "find_verse", "description": "Find a verse of the Bible", "parameters": {"type": "object", "properties": {"book": {"type": "string"}, "chapter": {"type": "integer"}}}}}]'
MSGS='[{"role": "user", "content": "Where is the verse about the light, and what is the weather in Jerusalem?"}]'
CALL_OK='
c = j["choices"][0]; m = c["message"]; calls = m.get("tool_calls") or []
assert c["finish_reason"] == "tool_calls", "finish_reason %r" % c["finish_reason"]
assert m["content"] is None, "content %r" % m["content"]
assert len(calls) == 1, "%d calls" % len(calls)
t = calls[0]
assert t["type"] == "function" and t["id"].startswith("call_") and len(t["id"]) == 29, t
assert t["function"]["name"] in NAMES, t["function"]["name"]
assert isinstance(json.loads(t["function"]["arguments"]), dict), t["function"]["arguments"]
print("ok")'

run_format() {
  local fmt="$1"; shift
  start_server "$fmt" "$@"
  # ------------------------------------------------------------ tool_choice required: N of N
  local n_ok=0 n=8
  for i in $(seq 1 $n); do
    post "{\"messages\": $MSGS, \"tools\": $TOOLS, \"tool_choice\": \"required\", \"temperature\": 1.0, \"seed\": $i, \"max_tokens\": 96}"
    if [ "$code" = 200 ] && check "$fmt required seed $i" "NAMES = ['get_weather', 'find_verse']$CALL_OK"; then
      n_ok=$((n_ok+1))
    fi
  done
  echo "# $fmt: tool_choice required: $n_ok of $n answers parsed into a call"
  # named: that function
  post "{\"messages\": $MSGS, \"tools\": $TOOLS, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"find_verse\"}}, \"temperature\": 0.8, \"seed\": 3, \"max_tokens\": 96}"
  [ "$code" = 200 ] || bad "$fmt named: $code"
  check "$fmt named" "NAMES = ['find_verse']$CALL_OK"
  # greedy, and its stream: the deltas add up to the same call
  local req="{\"messages\": $MSGS, \"tools\": $TOOLS, \"tool_choice\": \"required\", \"temperature\": 0, \"max_tokens\": 96"
  post "$req}" "$tmp/plain"
  check "$fmt greedy" "NAMES = ['get_weather', 'find_verse']$CALL_OK" "$tmp/plain"
  post "$req, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" "$tmp/stream"
  sse "$tmp/stream"
  check "$fmt stream" "
plain = json.load(open('$tmp/plain'))
calls, content, finish, usage = {}, '', None, None
for c in j:
    if c.get('usage'): usage = c['usage']
    if not c['choices']: continue
    ch = c['choices'][0]; d = ch['delta']
    content += d.get('content') or ''
    finish = ch['finish_reason'] or finish
    for t in d.get('tool_calls') or []:
        e = calls.setdefault(t['index'], {'id': '', 'name': '', 'arguments': ''})
        e['id'] += t.get('id', ''); f = t.get('function', {})
        e['name'] += f.get('name', ''); e['arguments'] += f.get('arguments', '')
want = plain['choices'][0]['message']['tool_calls'][0]['function']
assert content == '', 'content %r' % content
assert list(calls) == [0], calls
assert calls[0]['name'] == want['name'] and calls[0]['arguments'] == want['arguments'], (calls, want)
assert calls[0]['id'].startswith('call_'), calls
assert finish == 'tool_calls', finish
assert usage['completion_tokens'] == plain['usage']['completion_tokens'], usage
print('ok')" "$tmp/stream.json"
  stop_server
  [ "$rc" = 0 ] || bad "$fmt: exit $rc after SIGTERM"
}

run_format chatml
run_format llama3 --chat-template llama3

start_server main
# ---------------------------------------------------------------- response_format json_object: N of N
n_ok=0; n=8
for i in $(seq 1 $n); do
  post "{\"messages\": [{\"role\": \"user\", \"content\": \"Answer in JSON: who made the heaven?\"}], \"response_format\": {\"type\": \"json_object\"}, \"temperature\": 1.0, \"seed\": $i, \"max_tokens\": $((20 + 10 * i))}"
  if [ "$code" = 200 ] && check "json_object seed $i" '
c = j["choices"][0]
assert c["finish_reason"] == "stop", c["finish_reason"]
assert isinstance(json.loads(c["message"]["content"]), dict)
print("ok")'; then n_ok=$((n_ok+1)); fi
done
echo "# json_object: $n_ok of $n answers parsed as a JSON object"
# json_schema (not strict): constrained to an object too; the completions endpoint as well
post '{"messages": [{"role": "user", "content": "JSON please"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}, "max_tokens": 40, "temperature": 0}'
check json_schema 'assert isinstance(json.loads(j["choices"][0]["message"]["content"]), dict); print("ok")'
# json_schema, strict: the answer keeps to the schema (required keys in order, an enum, an
# integer, an array's bounds) at temperature 1 over several seeds and budgets; the schema
# is checked here by hand (tests/npm/serve_openai.js checks with ajv)
SCHEMA='{"type": "object", "properties": {"book": {"enum": ["Genesis", "Exodus"]}, "chapter": {"type": "integer"}, "words": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}, "note": {"type": ["string", "null"]}}, "required": ["book", "chapter", "words"], "additionalProperties": false}'
for seed in 1 2 3 4 5 6; do
  post "{\"messages\": [{\"role\": \"user\", \"content\": \"Which verse?\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"v\", \"strict\": true, \"schema\": $SCHEMA}}, \"max_tokens\": $((30 + 20 * seed)), \"temperature\": 1, \"seed\": $seed}"
  check "json_schema strict (seed $seed)" '
c = j["choices"][0]; o = json.loads(c["message"]["content"])
assert c["finish_reason"] == "stop", c
assert list(o)[:3] == ["book", "chapter", "words"] and set(o) <= {"book", "chapter", "words", "note"}, o
assert o["book"] in ("Genesis", "Exodus") and type(o["chapter"]) is int, o
assert 1 <= len(o["words"]) <= 2 and all(type(w) is str for w in o["words"]), o
assert o.get("note", None) is None or type(o["note"]) is str, o
print("ok")'
done
# a budget too short for any object that keeps to the schema (its shortest is 42 bytes):
# finish_reason "length", said, not a wrong object
post "{\"messages\": [{\"role\": \"user\", \"content\": \"Which verse?\"}], \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"v\", \"strict\": true, \"schema\": $SCHEMA}}, \"max_tokens\": 12, \"temperature\": 1, \"seed\": 1}"
check "json_schema strict, too short a budget" '
c = j["choices"][0]
assert c["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 12, c
assert c["message"]["content"].startswith("{\"book\":"), c
print("ok")'
code=$(curl -s --max-time 60 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
       --data-binary '{"prompt": "In the beginning", "response_format": {"type": "json_object"}, "max_tokens": 40, "temperature": 0.7, "seed": 5}' "$url/v1/completions")
check "completions json_object" 'assert isinstance(json.loads(j["choices"][0]["text"]), dict); print("ok")'
# the stream of a json_object answer adds up to it
req='{"messages": [{"role": "user", "content": "JSON"}], "response_format": {"type": "json_object"}, "temperature": 0.9, "seed": 11, "max_tokens": 50'
post "$req}" "$tmp/plain"
post "$req, \"stream\": true}" "$tmp/stream"
sse "$tmp/stream"
check "json_object stream" "
plain = json.load(open('$tmp/plain'))['choices'][0]['message']['content']
text = ''.join((c['choices'][0]['delta'].get('content') or '') for c in j if c['choices'])
assert text == plain, (text, plain)
json.loads(text)
print('ok')" "$tmp/stream.json"

# ---------------------------------------------------------------- auto and none: text
post "{\"messages\": $MSGS, \"tools\": $TOOLS, \"temperature\": 0, \"max_tokens\": 24}"
check "auto" '
c = j["choices"][0]; m = c["message"]
assert isinstance(m["content"], str) and m["content"], m
assert "tool_calls" not in m and c["finish_reason"] in ("stop", "length"), c
print("ok")'
post "{\"messages\": $MSGS, \"tools\": $TOOLS, \"tool_choice\": \"none\", \"temperature\": 0, \"max_tokens\": 24}"
check "none" 'm = j["choices"][0]["message"]; assert isinstance(m["content"], str) and "tool_calls" not in m, m; print("ok")'
# "none" renders no tools: the prompt is the one without them
post "{\"messages\": $MSGS, \"max_tokens\": 1}" "$tmp/a"
post "{\"messages\": $MSGS, \"tools\": $TOOLS, \"tool_choice\": \"none\", \"max_tokens\": 1}" "$tmp/b"
post "{\"messages\": $MSGS, \"tools\": $TOOLS, \"max_tokens\": 1}" "$tmp/c"
check "none renders no tools" "
a, b, c = (json.load(open('$tmp/' + k))['usage']['prompt_tokens'] for k in 'abc')
assert a == b and c > a + 50, (a, b, c)
print('ok')" "$tmp/a"

# ---------------------------------------------------------------- a conversation with a call and its result
post "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Jerusalem\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"hot\"}], \"tools\": $TOOLS, \"temperature\": 0, \"max_tokens\": 8}"
[ "$code" = 200 ] && ok || bad "tool result conversation: $code $(head -c 300 "$tmp/body")"

# ---------------------------------------------------------------- errors
err() { # NAME JSON STATUS PARAM
  post "$2"
  if [ "$code" != "$3" ]; then bad "$1: status $code, expected $3: $(head -c 300 "$tmp/body")"; return; fi
  check "$1" "e = j['error']; assert e['param'] == '$4' and e['type'] == 'invalid_request_error', e; print('ok')"
}
err "bad tool name" "{\"messages\": $MSGS, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"no spaces\"}}]}" 400 "tools[0].function.name"
err "tool_choice without tools" "{\"messages\": $MSGS, \"tool_choice\": \"required\"}" 400 "tool_choice"
err "unknown named function" "{\"messages\": $MSGS, \"tools\": $TOOLS, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"rm\"}}}" 400 "tool_choice.function.name"
err "strict json_schema outside the subset" '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}}}}}' 400 "response_format.json_schema.schema"
check "strict json_schema names the keyword" "assert \"'maxLength' is not supported\" in j['error']['message'], j; print('ok')"
err "strict tool parameters outside the subset" "{\"messages\": $MSGS, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"strict\": true, \"parameters\": {\"type\": \"object\", \"patternProperties\": {}}}}]}" 400 "tools[0].function.parameters"
err "response_format type" '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}}' 400 "response_format.type"
stop_server
[ "$rc" = 0 ] || bad "main: exit $rc after SIGTERM"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
