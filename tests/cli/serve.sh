#!/usr/bin/env bash
# nibble serve: the HTTP contract with curl on kjv-7m — health, models, greedy completions
# identical to nibble run's (alone and four at once: batching changes no result), streams
# that add up to the plain answer, every error with its status and OpenAI error object,
# the API key, a full queue, a client that hangs up, and SIGTERM (exit 0).
# Every curl has --max-time; the servers are killed on every way out (trap).
. "$(dirname "$0")/../helpers/serve_common.sh"

# ---------------------------------------------------------------- options (no model needed)
"$bin" serve --bogus 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "unknown option '--bogus'" "$tmp/err" && ok || bad "unknown option: rc $rc: $(cat "$tmp/err")"
"$bin" serve -m x --port 70000 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "is not a whole number in 0..65535" "$tmp/err" && ok || bad "bad port: rc $rc"
"$bin" serve -m x --parallel 0 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && ok || bad "bad --parallel: rc $rc"
"$bin" serve -m x --chat-template jinja2 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "unknown" "$tmp/err" && ok || bad "bad --chat-template: rc $rc: $(cat "$tmp/err")"
"$bin" serve --help >"$tmp/out" 2>&1; rc=$?
[ "$rc" = 0 ] && grep -q -- "--api-key" "$tmp/out" && ok || bad "help: rc $rc"

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then
  echo "SKIP (no $gguf): $pass passed"
  [ $fail = 0 ]; exit
fi
run() { "$bin" run -m "$gguf" --path source -t 2 "$@" 2>/dev/null; }

# call METHOD PATH [JSON] [curl args...]: $code and $tmp/body
call() {
  local m="$1" p="$2" d="${3:-}"; shift 3 2>/dev/null || shift $#
  if [ -n "$d" ]; then
    code=$(curl -s --max-time 60 -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$m" \
           -H 'Content-Type: application/json' --data-binary "$d" "$@" "$url$p")
  else
    code=$(curl -s --max-time 60 -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' -X "$m" "$@" "$url$p")
  fi
}
# jq-like: the Python expression $1 over the JSON j of the body (prints its value)
field() { "$py" -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$tmp/body" 2>/dev/null; }
# expect_error NAME STATUS PARAM_OR_NONE: the body is an OpenAI error object
expect_error() {
  local name="$1" status="$2" param="$3"
  if [ "$code" != "$status" ]; then bad "$name: status $code, expected $status: $(head -c 300 "$tmp/body")"; return; fi
  local got
  got=$(field "'%s|%s|%s' % (type(j['error']['message']).__name__, j['error']['type'], j['error']['param'])")
  local type=invalid_request_error
  [ "$status" -ge 500 ] && type=server_error
  if [ "$got" = "str|$type|$param" ]; then ok; else bad "$name: error object '$got' (want str|$type|$param): $(head -c 300 "$tmp/body")"; fi
}

start_server main --parallel 4

# ---------------------------------------------------------------- health, models
call GET /health
[ "$code" = 200 ] && [ "$(field "j['status']")" = ok ] && ok || bad "health: $code $(cat "$tmp/body")"
call GET /v1/models
[ "$code" = 200 ] && [ "$(field "j['data'][0]['id']")" = kjv-7m-f32.gguf ] && ok || bad "models: $code $(cat "$tmp/body")"
# "created": when the server started (unix seconds), not 0
[ "$(field "abs(j['data'][0]['created'] - __import__('time').time()) < 3600")" = True ] && ok || bad "models created: $(cat "$tmp/body")"
call GET /v1/models/kjv-7m-f32.gguf
[ "$code" = 200 ] && [ "$(field "j['id'] + ' ' + j['object']")" = "kjv-7m-f32.gguf model" ] && ok || bad "model: $code $(cat "$tmp/body")"
call GET /v1/models/gpt-4; expect_error "unknown model" 404 None
[ "$(field "j['error']['code']")" = model_not_found ] && ok || bad "unknown model: code"

# ---------------------------------------------------------------- greedy = nibble run
prompts=("In the beginning" "And God said" "The LORD is my shepherd" "Blessed are the")
for i in 0 1 2 3; do
  run -p "${prompts[$i]}" -n 24 >"$tmp/run$i.txt"
done
# one_completion I: prompt i alone, 24 tokens, greedy -> $tmp/srv$i.json
one_completion() {
  curl -s --max-time 60 -o "$tmp/srv$1.json" -w '%{http_code}' "$url/v1/completions" \
    -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\": \"${prompts[$1]}\", \"max_tokens\": 24, \"temperature\": 0}" >"$tmp/code$1"
}
# same_text I WHAT: the server's text equals run's (run prints one newline after it)
same_text() {
  "$py" - "$tmp/srv$1.json" "$tmp/run$1.txt" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
want = open(sys.argv[2], encoding="utf-8").read()
assert want.endswith("\n"), "run's output"
want = want[:-1]
c = j["choices"][0]
ok = c["text"] == want and c["finish_reason"] == "length" and j["usage"]["completion_tokens"] == 24 \
     and j["object"] == "text_completion" and j["usage"]["total_tokens"] == j["usage"]["prompt_tokens"] + 24
if not ok:
    print("server %r (%s, usage %s) vs run %r" % (c["text"], c["finish_reason"], j["usage"], want))
    sys.exit(1)
EOF
}
one_completion 0
[ "$(cat "$tmp/code0")" = 200 ] && same_text 0 && ok || bad "greedy completion = run: $(cat "$tmp/code0") $(cat "$tmp/srv0.json")"
cp "$tmp/srv0.json" "$tmp/body"
[ "$(field "j['usage']['prompt_tokens']")" = 4 ] && ok || bad "prompt_tokens of 'In the beginning' (BOS + 3): $(field "j['usage']")"
# four at once: the same texts as each alone
cpids=""
for i in 0 1 2 3; do one_completion "$i" & cpids="$cpids $!"; done
for p in $cpids; do wait "$p"; done
for i in 0 1 2 3; do
  [ "$(cat "$tmp/code$i")" = 200 ] && same_text "$i" && ok || bad "concurrent completion $i = run: $(cat "$tmp/code$i")"
done
# prompt as token ids (no BOS added): run --ids gives the same
run --ids 1,1046,261,2074 -n 12 >"$tmp/run_ids.txt"
call POST /v1/completions '{"prompt": [1, 1046, 261, 2074], "max_tokens": 12}'
"$py" -c "import json,sys; j=json.load(open(sys.argv[1])); w=open(sys.argv[2]).read()[:-1]; sys.exit(j['choices'][0]['text']!=w)" "$tmp/body" "$tmp/run_ids.txt" \
  && ok || bad "prompt ids = run --ids: $(cat "$tmp/body")"
# a stop string: the text ends before it, finish_reason stop
w=$(field "j['choices'][0]['text']")
call POST /v1/completions '{"prompt": [1, 1046, 261, 2074], "max_tokens": 12, "stop": ["Jesus"]}'
st=$("$py" -c "import json,sys; j=json.load(open(sys.argv[1])); c=j['choices'][0]; print(c['finish_reason'], repr(c['text']))" "$tmp/body")
"$py" -c "import sys; full=sys.argv[1]; i=full.find('Jesus'); sys.exit(not (i > 0 and sys.argv[2] == 'stop ' + repr(full[:i])))" "$w" "$st" \
  && ok || bad "stop string: '$st' from '$w'"

# ---------------------------------------------------------------- streaming
# sse FILE: the deltas joined, the finish reason, the usage, and [DONE] last
sse() {
  "$py" - "$1" <<'EOF'
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-3:]
text, finish, usage, role = "", None, None, None
for e in events[:-1]:
    j = json.loads(e)
    if j.get("usage"):
        usage = j["usage"]["completion_tokens"]
        assert j["choices"] == []
        continue
    c = j["choices"][0]
    if "delta" in c:
        role = role or c["delta"].get("role")
        text += c["delta"].get("content") or ""
    else:
        text += c["text"]
    finish = c["finish_reason"] or finish
print(json.dumps([text, finish, usage, role]))
EOF
}
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 24, "stream": true, "stream_options": {"include_usage": true}}' >"$tmp/stream"
"$py" -c "import json,sys; s=json.loads(sys.argv[1]); w=open(sys.argv[2]).read()[:-1]; sys.exit(not (s[0]==w and s[1]=='length' and s[2]==24))" \
  "$(sse "$tmp/stream")" "$tmp/run0.txt" && ok || bad "stream = run: $(sse "$tmp/stream") $(head -c 400 "$tmp/stream")"
grep -q '^data: ' "$tmp/stream" && [ "$(grep -c '^data: ' "$tmp/stream")" -gt 3 ] && ok || bad "stream: not in chunks"
# chat: non-stream and stream agree; the stream opens with the role
chat='{"messages": [{"role": "system", "content": "Speak as the King James Bible."}, {"role": "user", "content": "Who made the heaven?"}], "max_tokens": 16'
call POST /v1/chat/completions "$chat}"
ctext=$(field "j['choices'][0]['message']['content']")
[ "$code" = 200 ] && [ "$(field "j['object'] + ' ' + j['choices'][0]['message']['role']")" = "chat.completion assistant" ] \
  && [ "$(field "j['usage']['completion_tokens']")" -ge 1 ] && ok || bad "chat: $code $(cat "$tmp/body")"
curl -s -N --max-time 60 "$url/v1/chat/completions" -H 'Content-Type: application/json' --data-binary "$chat, \"stream\": true}" >"$tmp/cstream"
"$py" -c "import json,sys; s=json.loads(sys.argv[1]); sys.exit(not (s[0]==sys.argv[2] and s[3]=='assistant' and s[2] is None))" \
  "$(sse "$tmp/cstream")" "$ctext" && ok || bad "chat stream = chat: $(sse "$tmp/cstream") vs '$ctext'"
grep -q '"object":"chat.completion.chunk"' "$tmp/cstream" && ok || bad "chat stream: chunk object"
# special-token text in a message is text: "</s>" (kjv-7m's EOS) stays 4 characters' tokens
call POST /v1/chat/completions '{"messages": [{"role": "user", "content": "</s>"}], "max_tokens": 1}'
n_chat=$(field "j['usage']['prompt_tokens']")
n_text=$("$bin" tokenize -m "$gguf" --no-special --no-add-special -- $'<|im_start|>user\n</s><|im_end|>\n<|im_start|>assistant\n' 2>/dev/null | wc -w)
n_spec=$("$bin" tokenize -m "$gguf" --no-add-special -- $'<|im_start|>user\n</s><|im_end|>\n<|im_start|>assistant\n' 2>/dev/null | wc -w)
[ "$n_chat" = "$n_text" ] && [ "$n_text" != "$n_spec" ] && ok || bad "special text in a message: $n_chat tokens (as text $n_text, as control $n_spec)"

# ---------------------------------------------------------------- logprobs
# greedy: each token is the most likely one, its logprob the first of the alternatives;
# the tokens spell the text
call POST /v1/completions '{"prompt": "In the beginning", "max_tokens": 12, "temperature": 0, "logprobs": 3}'
"$py" - "$tmp/body" <<'EOF2' && ok || bad "completion logprobs: $(head -c 600 "$tmp/body")"
import json, sys
j = json.load(open(sys.argv[1]))
c = j["choices"][0]; l = c["logprobs"]
assert len(l["tokens"]) == j["usage"]["completion_tokens"] == 12, l
assert "".join(l["tokens"]) == c["text"], (l["tokens"], c["text"])
for lp, top in zip(l["token_logprobs"], l["top_logprobs"]):
    # (alternatives that print alike share a key: at most 3)
    assert lp <= 0 and 1 <= len(top) <= 3 and abs(max(top.values()) - lp) < 1e-6, (lp, top)
assert l["text_offset"][0] == 0 and l["text_offset"][1] == len(l["tokens"][0])
EOF2
curl -s -N --max-time 60 "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  --data-binary '{"messages": [{"role": "user", "content": "Who made the heaven?"}], "max_tokens": 8, "temperature": 0, "logprobs": true, "top_logprobs": 2, "stream": true}' >"$tmp/lpstream"
"$py" - "$tmp/lpstream" <<'EOF2' && ok || bad "chat stream logprobs: $(head -c 600 "$tmp/lpstream")"
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n\n") if l.startswith("data: ")]
text, toks = "", []
for e in events[:-1]:
    c = json.loads(e)["choices"][0]
    text += c["delta"].get("content") or ""
    if c["logprobs"]:
        for t in c["logprobs"]["content"]:
            assert len(t["top_logprobs"]) == 2 and t["top_logprobs"][0]["logprob"] == t["logprob"], t
            assert bytes(t["bytes"]).decode() == t["token"]
            toks.append(t["token"])
assert len(toks) >= 1 and "".join(toks).startswith(text[:1]), (toks, text)
EOF2

# ---------------------------------------------------------------- errors
call GET /nope; expect_error "unknown path" 404 None
call GET /v1/completions; expect_error "wrong method" 405 None
grep -qi '^Allow: POST' "$tmp/headers" && ok || bad "405 without Allow: $(cat "$tmp/headers")"
call POST /v1/completions '{"prompt": "x", "max_tokens": '; expect_error "malformed JSON" 400 None
call POST /v1/completions '[1, 2]'; expect_error "not an object" 400 None
call POST /v1/completions '{"prompt": "x", "max_tokens": "ten"}'; expect_error "max_tokens type" 400 max_tokens
call POST /v1/completions '{"prompt": "x", "temperature": 5}'; expect_error "temperature range" 400 temperature
call POST /v1/completions '{"prompt": 12}'; expect_error "prompt type" 400 prompt
call POST /v1/completions '{"max_tokens": 3}'; expect_error "no prompt" 400 prompt
call POST /v1/completions '{"prompt": [1, 99999]}'; expect_error "token out of range" 400 prompt
call POST /v1/completions '{"prompt": "x", "n": 9}'; expect_error "n = 9" 400 n
call POST /v1/completions '{"prompt": "x", "stop": [1]}'; expect_error "stop type" 400 stop
call POST /v1/completions '{"prompt": "x", "stream": "yes"}'; expect_error "stream type" 400 stream
call POST /v1/chat/completions '{"messages": "hi"}'; expect_error "messages type" 400 messages
call POST /v1/chat/completions '{"messages": [{"role": "wizard", "content": "hi"}]}'; expect_error "bad role" 400 "messages[0].role"
call POST /v1/chat/completions '{"messages": [{"role": "user", "content": 5}]}'; expect_error "content type" 400 "messages[0].content"
call POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}], "functions": [{"name": "f"}]}'
expect_error "functions (legacy: use tools)" 400 functions
printf '{"prompt": "\xff\xfe"}' >"$tmp/bad_utf8"
code=$(curl -s --max-time 30 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/bad_utf8" "$url/v1/completions")
expect_error "invalid UTF-8" 400 None
[ "$(field "j['error']['code']")" = invalid_encoding ] && ok || bad "invalid UTF-8: code"
long=$("$py" -c "print(' '.join(['And the LORD spake unto Moses, saying'] * 60))")
call POST /v1/completions "{\"prompt\": \"$long\"}"; expect_error "prompt longer than the context" 400 prompt
[ "$(field "j['error']['code']")" = context_length_exceeded ] && ok || bad "long prompt: code"
# huge max_tokens: clamped to the context, finish_reason length
call POST /v1/completions '{"prompt": "In the beginning", "max_tokens": 1000000000, "temperature": 0}'
[ "$code" = 200 ] && [ "$(field "j['usage']['total_tokens'] <= 256")" = True ] && ok || bad "huge max_tokens: $code $(head -c 300 "$tmp/body")"
# bodies over the limit (1 MiB): by Content-Length, and chunked
head -c 2000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
code=$(curl -s --max-time 30 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/big" "$url/v1/completions")
expect_error "body too large" 413 None
code=$(curl -s --max-time 30 -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/big" "$url/v1/completions")
expect_error "chunked body too large" 413 None
# framing (issue 35 item 9): Content-Length headers that disagree are refused and the
# connection closed, whichever comes first (else which one frames the body is ambiguous);
# %00 in a path does not cut it short ("/health%00x" is no route), other escapes decode
"$py" - "$url" <<'EOF2' && ok || bad "framing"
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
def send(raw):
    s = socket.create_connection((u.hostname, u.port), timeout=120)
    s.sendall(raw)
    out = b""
    while True:
        d = s.recv(65536)
        if not d: break
        out += d
    s.close()
    return out
body = b'{"prompt": "In the", "max_tokens": 1}'
for a, b in ((5, len(body)), (len(body), 5)):
    r = send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
             b"Content-Length: %d\r\n\r\n" % (a, b) + body)
    assert r.startswith(b"HTTP/1.1 400 ") and r.count(b"HTTP/1.1 ") == 1, r[:300]
    assert b"Content-Length headers that disagree" in r, r[-300:]
r = send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (len(body), len(body)) + body)
assert r.startswith(b"HTTP/1.1 200 "), r[:300]  # the same value twice is one length
r = send(b"GET /health%00x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
assert r.startswith(b"HTTP/1.1 404 ") and b"/health%00x" in r, r[:400]
r = send(b"GET /v1/%6dodels HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
assert r.startswith(b"HTTP/1.1 200 "), r[:300]
EOF2
# still serving after all that
call GET /health
[ "$code" = 200 ] && ok || bad "health after the errors: $code"

# ---------------------------------------------------------------- metrics
call GET /metrics
grep -q '^nibble_requests_total{status="400"} [1-9]' "$tmp/body" && grep -q '^nibble_requests_total{status="200"} [1-9]' "$tmp/body" \
  && grep -q '^nibble_generated_tokens_total [1-9]' "$tmp/body" && grep -q '^nibble_slots_total 4$' "$tmp/body" \
  && grep -q '^nibble_time_to_first_token_seconds_count [1-9]' "$tmp/body" && grep -q '^nibble_kv_blocks_total [1-9]' "$tmp/body" \
  && ok || bad "metrics: $(head -c 1500 "$tmp/body")"

# ---------------------------------------------------------------- the request log
# one line per request on stderr, as llama-server and vLLM log them
grep -Eq '^nibble serve: POST /v1/completions 200 [0-9.]+ s 127\.0\.0\.1 prompt [0-9]+ generated [0-9]+ (stop|length)$' "$tmp/main.log" \
  && grep -Eq '^nibble serve: GET /health 200 [0-9.]+ s 127\.0\.0\.1$' "$tmp/main.log" \
  && grep -Eq '^nibble serve: POST /v1/completions 400 ' "$tmp/main.log" \
  && ok || bad "request log: $(grep -c '^nibble serve: ' "$tmp/main.log") lines: $(grep '^nibble serve: ' "$tmp/main.log" | head -5)"

# ---------------------------------------------------------------- SIGTERM: exit 0
stop_server
[ "$rc" = 0 ] && grep -q "stopped" "$tmp/main.log" && ok || bad "SIGTERM: exit $rc: $(tail -3 "$tmp/main.log")"

# ---------------------------------------------------------------- aborted requests
# issue 35 item 7: clients that submit and go away at once hold no place: with the one slot
# busy and a queue of 1, a client that stays after six that left is queued, not refused
start_server abort --parallel 1 --queue 1 --log-disable
"$py" - "$url" <<'EOF2' && ok || bad "aborted requests kept their places"
import socket, sys, json, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
def open_req(body):
    s = socket.create_connection((u.hostname, u.port), timeout=120)
    b = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(b) + b)
    return s
def read_all(s, out=b""):
    while True:
        d = s.recv(65536)
        if not d: break
        out += d
    s.close()
    return out
# one request runs (the only slot): streamed, so its first event says it is running
a = open_req({"prompt": "In the beginning", "max_tokens": 150, "temperature": 0, "stream": True})
first = a.recv(65536)
while b"data:" not in first:
    first += a.recv(65536)
# clients that submit and go away at once, then one that stays: queued, not refused
for i in range(6):
    open_req({"prompt": "And God said", "max_tokens": 50}).close()
# the server finds a closed client by writing to it from its 100 ms watch (a half-closed one
# may still read): give that watch time to see all six, or the last may still hold a place
time.sleep(0.5)
b = read_all(open_req({"prompt": "And God said", "max_tokens": 2}))
ra = read_all(a, first)
print(b.split(b"\r\n")[0].decode(), ra.split(b"\r\n")[0].decode())
sys.exit(0 if b.startswith(b"HTTP/1.1 200") and ra.startswith(b"HTTP/1.1 200") and b"[DONE]" in ra else 1)
EOF2
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM (abort server): exit $rc"
grep -q '^nibble serve: POST ' "$tmp/abort.log" && bad "--log-disable: $(grep -m1 POST "$tmp/abort.log")" || ok

# ---------------------------------------------------------------- API key
# an empty key is refused by name (it would serve everyone)
"$bin" serve -m x --api-key '' >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q -- "--api-key is empty" "$tmp/out" && ok || bad "empty key: rc $rc: $(cat "$tmp/out")"
export NIBBLE_API_KEY=sesame
start_server key --parallel 1
unset NIBBLE_API_KEY
call GET /health; [ "$code" = 200 ] && ok || bad "health needs no key: $code"
call GET /v1/models; expect_error "no key" 401 None
call GET /v1/models '' -H 'Authorization: Bearer sesamf'; expect_error "wrong key" 401 None
call GET /v1/models '' -H 'Authorization: Bearer sesame'; [ "$code" = 200 ] && ok || bad "right key: $code"
call POST /v1/completions '{"prompt": "x", "max_tokens": 1}' -H 'Authorization: Bearer sesame2'; expect_error "longer key" 401 None
# the scheme's name in any case, one or more spaces after it (RFC 9110)
call GET /v1/models '' -H 'Authorization: bearer sesame'; [ "$code" = 200 ] && ok || bad "lower-case bearer: $code"
call GET /v1/models '' -H 'Authorization: BEARER  sesame'; [ "$code" = 200 ] && ok || bad "two spaces: $code"
call GET /v1/models '' -H 'Authorization: Basic sesame'; expect_error "another scheme" 401 None
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM (key server): exit $rc"

# ---------------------------------------------------------------- full queue, hang-up, drain
# one slot, no queue, a context long enough for a generation of seconds
start_server busy --parallel 1 --queue 0 -c 4096 --drain 1
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 4000, "stream": true}' >"$tmp/long" &
long_pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/long" ] && break; sleep 0.05; done
call POST /v1/completions '{"prompt": "x", "max_tokens": 1}'
expect_error "queue full" 503 None
grep -qi '^Retry-After: 1' "$tmp/headers" && ok || bad "503 without Retry-After: $(cat "$tmp/headers")"
kill "$long_pid" 2>/dev/null; wait "$long_pid" 2>/dev/null
running=1
for _ in $(seq 1 100); do
  call GET /metrics
  running=$(sed -n 's/^nibble_slots_running //p' "$tmp/body")
  [ "$running" = 0 ] && break
  sleep 0.05
done
gen=$(sed -n 's/^nibble_generated_tokens_total //p' "$tmp/body")
[ "$running" = 0 ] && [ "$gen" -lt 4000 ] && ok || bad "hang-up frees the slot: running $running, generated $gen"
# SIGTERM during a stream: the stream is cut after --drain 1 s, ends with [DONE], exit 0
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 4000, "stream": true}' >"$tmp/drain" &
drain_pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/drain" ] && break; sleep 0.05; done
# during the drain a new request is answered at once: 503, and /health says so
kill -TERM "$pid"
sleep 0.2
t0=$(date +%s%N)
call POST /v1/completions '{"prompt": "x", "max_tokens": 1}'
t1=$(date +%s%N)
expect_error "a request during the drain" 503 None
[ $(( (t1 - t0) / 1000000 )) -lt 900 ] && ok || bad "the drain's 503 took $(( (t1 - t0) / 1000000 )) ms"
call GET /health; [ "$code" = 503 ] && grep -q "shutting down" "$tmp/body" && ok || bad "health during the drain: $code"
stop_server
wait "$drain_pid"
[ "$rc" = 0 ] && ok || bad "SIGTERM while streaming: exit $rc: $(tail -3 "$tmp/busy.log")"
tail -c 200 "$tmp/drain" | grep -q 'data: \[DONE\]' && ok || bad "drained stream did not end with [DONE]: $(tail -c 300 "$tmp/drain")"

# a client hanging up does not disturb the stream beside it
start_server pair --parallel 2 -c 4096
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 4000, "stream": true}' >"$tmp/a" &
a_pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/a" ] && break; sleep 0.05; done
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "And God said", "max_tokens": 64, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}' >"$tmp/b" &
b_pid=$!
kill "$a_pid" 2>/dev/null; wait "$a_pid" 2>/dev/null
wait "$b_pid"; rc=$?
run -p "And God said" -n 64 >"$tmp/run_b.txt"
"$py" -c "import json,sys; s=json.loads(sys.argv[1]); w=open(sys.argv[2]).read()[:-1]; sys.exit(not (s[0]==w and s[2]==64))" \
  "$(sse "$tmp/b")" "$tmp/run_b.txt" && [ "$rc" = 0 ] && ok || bad "the stream beside a hang-up: rc $rc $(sse "$tmp/b")"
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM (pair server): exit $rc"

# --timeout: a request that runs longer ends there, finish_reason length
start_server timeout --parallel 1 -c 4096 --timeout 0.5
call POST /v1/completions '{"prompt": "In the beginning", "max_tokens": 4000}'
[ "$code" = 200 ] && [ "$(field "j['choices'][0]['finish_reason']")" = length ] \
  && [ "$(field "0 < j['usage']['completion_tokens'] < 4000")" = True ] && ok || bad "--timeout: $code $(head -c 300 "$tmp/body")"
grep -q "timed out after" "$tmp/timeout.log" && ok || bad "--timeout: not logged: $(cat "$tmp/timeout.log")"
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM (timeout server): exit $rc"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
