#!/usr/bin/env bash
# nibble serve's "n" on kjv-7m: a request of n choices is n jobs submitted together.
# Greedy n=3 gives three choices equal to nibble run's text; seeded choices at temperature
# 1 are those of separate requests with the seeds seed, seed+1, ... (completions and chat,
# with logprobs, a tool_choice that forces a call, response_format json_object); streams
# carry each choice's chunks with its index and add up to the plain answer, one finish
# chunk a choice, one [DONE]; usage counts the prompt once and sums the completions; the
# prompt's KV is prefilled once and shared (cached_tokens, nibble_prompt_tokens_cached_
# total); n more than the free places is a 503 (all or nothing), more than the server's
# slots and queue a 400 naming n; a client that goes away cancels every choice.
. "$(dirname "$0")/../helpers/serve_common.sh"

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "SKIP (no $gguf)"; exit 0; fi
ctx=1024
SERVE_ARGS=(-c "$ctx")
prompt="In the beginning"
"$bin" run -m "$gguf" --path source -t 2 -c $ctx -p "$prompt" -n 16 2>/dev/null >"$tmp/run.txt"

# ---------------------------------------------------------------- choices, streams, usage
start_server main --parallel 4
"$py" - "$url" "$tmp/run.txt" "$prompt" <<'EOF' >"$tmp/main.out" 2>&1
import json, sys, urllib.error, urllib.request
url, want, prompt = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()[:-1], sys.argv[3]
fails = 0
def check(name, cond, why=""):
    global fails
    print(("ok " if cond else "FAIL ") + name + ("" if cond else ": " + str(why)[:600]))
    fails += not cond
def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
def plain(path, body):
    code, text = post(path, body)
    assert code == 200, (code, text)
    return json.loads(text)
def stream(path, body):
    code, text = post(path, dict(body, stream=True, stream_options={"include_usage": True}))
    assert code == 200, (code, text)
    ev = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
    return ev
def metric(name):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for l in r.read().decode().split("\n"):
            if l.startswith(name + " "):
                return float(l.split()[1])
def text_of(kind, c):
    if kind == "chat":
        m = c["message"]
        calls = [(t["function"]["name"], t["function"]["arguments"]) for t in m.get("tool_calls") or []]
        return (m["content"], calls)
    return c["text"]
def lp_tokens(lp):
    if not lp: return lp
    return [t["token"] for t in lp["content"]] if "content" in lp else lp["tokens"]
def lp_values(lp):
    if not lp: return []
    return [t["logprob"] for t in lp["content"]] if "content" in lp else lp["token_logprobs"]
def close(a, b):
    return len(a) == len(b) and all(abs(x - y) < 1e-3 for x, y in zip(a, b))
MSGS = [{"role": "user", "content": "Who made the heaven and the earth?"}]
TOOLS = [{"type": "function", "function": {"name": "find_verse", "description": "Find a verse",
          "parameters": {"type": "object", "properties": {"book": {"type": "string"}, "chapter": {"type": "integer"}}}}}]
ENDPOINT = {"cmpl": "/v1/completions", "chat": "/v1/chat/completions"}
def base(kind):
    return {"prompt": prompt} if kind == "cmpl" else {"messages": MSGS}

# greedy n=3: three choices, each nibble run's text; the prompt counted once
j = plain("/v1/completions", {"prompt": prompt, "max_tokens": 16, "temperature": 0, "n": 3})
cs = j["choices"]
check("greedy n=3: 3 choices, indexes 0..2", [c["index"] for c in cs] == [0, 1, 2], j)
check("greedy n=3: each is nibble run's", all(c["text"] == want for c in cs), (want, cs))
u = j["usage"]
check("greedy n=3: usage", u["completion_tokens"] == 48 and u["total_tokens"] == u["prompt_tokens"] + 48 and
      0 < u["prompt_tokens"] < 16, u)

# seeded choices = separate requests with seed + i; streams = the plain answer
cases = [("cmpl", {}), ("chat", {}), ("cmpl", {"logprobs": 2}), ("chat", {"logprobs": True, "top_logprobs": 2}),
         ("chat", {"tools": TOOLS, "tool_choice": "required", "max_tokens": 64}),
         ("chat", {"response_format": {"type": "json_object"}, "max_tokens": 48})]
for kind, extra in cases:
    name = "%s %s" % (kind, json.dumps(extra)[:60])
    body = dict(base(kind), **dict({"max_tokens": 12, "temperature": 1.0, "seed": 41}, **extra))
    j = plain(ENDPOINT[kind], dict(body, n=3))
    cs = j["choices"]
    check(name + ": indexes", [c["index"] for c in cs] == [0, 1, 2], j)
    alone = [plain(ENDPOINT[kind], dict(body, seed=41 + i)) for i in range(3)]
    check(name + ": choice i = a request with seed 41+i",
          [text_of(kind, c) for c in cs] == [text_of(kind, a["choices"][0]) for a in alone],
          ([text_of(kind, c) for c in cs], [text_of(kind, a["choices"][0]) for a in alone]))
    check(name + ": finish reasons", [c["finish_reason"] for c in cs] == [a["choices"][0]["finish_reason"] for a in alone])
    # the same tokens; their log-probabilities as close as batches of other sizes make them
    check(name + ": logprobs", [lp_tokens(c["logprobs"]) for c in cs] == [lp_tokens(a["choices"][0]["logprobs"]) for a in alone]
          and all(close(lp_values(c["logprobs"]), lp_values(a["choices"][0]["logprobs"])) for c, a in zip(cs, alone)),
          ([c["logprobs"] for c in cs], [a["choices"][0]["logprobs"] for a in alone]))
    check(name + ": usage sums", j["usage"]["completion_tokens"] == sum(a["usage"]["completion_tokens"] for a in alone)
          and j["usage"]["prompt_tokens"] == alone[0]["usage"]["prompt_tokens"], (j["usage"], [a["usage"] for a in alone]))
    if "tools" in extra:
        ids = [t["id"] for c in cs for t in c["message"].get("tool_calls") or []]
        check(name + ": call ids differ", len(ids) == len(set(ids)), ids)
    if extra.get("response_format"):
        check(name + ": json objects", all(c["finish_reason"] != "stop" or isinstance(json.loads(c["message"]["content"]), dict) for c in cs), cs)
    ev = stream(ENDPOINT[kind], dict(body, n=3))
    check(name + ": one [DONE], last", ev[-1] == "[DONE]" and ev.count("[DONE]") == 1, ev[-3:])
    chunks = [json.loads(e) for e in ev[:-1]]
    texts, fins, calls = ["", "", ""], [[], [], []], [[], [], []]
    for ch in chunks:
        check(name + ": chunk id", ch["id"] == chunks[0]["id"], ch)
        for c in ch["choices"]:
            i = c["index"]
            if kind == "chat":
                texts[i] += c["delta"].get("content") or ""
                for t in c["delta"].get("tool_calls") or []:
                    if "id" in t:
                        calls[i].append([t["function"]["name"], ""])
                    calls[i][-1][1] += t["function"]["arguments"]
            else:
                texts[i] += c["text"]
            if c["finish_reason"]:
                fins[i].append(c["finish_reason"])
    if kind == "chat":
        got = [((texts[i] or None) if "tools" in extra else texts[i], [tuple(x) for x in calls[i]]) for i in range(3)]
    else:
        got = texts
    check(name + ": stream = plain", got == [text_of(kind, c) for c in cs], (got, [text_of(kind, c) for c in cs]))
    check(name + ": a finish chunk a choice", fins == [[c["finish_reason"]] for c in cs], fins)
    us = [ch["usage"] for ch in chunks if ch.get("usage")]
    check(name + ": stream usage", len(us) == 1 and us[0]["completion_tokens"] == j["usage"]["completion_tokens"], us)

# the prompt's KV prefilled once: n=4 on a prompt of 200+ tokens
long = " ".join(["And God saw the light, that it was good: and God divided the light from the darkness."] * 12)
before = metric("nibble_prompt_tokens_cached_total")
j = plain("/v1/completions", {"prompt": long, "max_tokens": 4, "temperature": 0, "n": 4})
u, t = j["usage"], j["timings"]
cached = metric("nibble_prompt_tokens_cached_total") - before
check("n=4 shares the prompt: cached_tokens", u["prompt_tokens"] >= 200 and u["prompt_tokens_details"]["cached_tokens"] >= 64, u)
check("n=4 shares the prompt: prefilled once", t["prompt_n"] < 2 * u["prompt_tokens"], (t, u))
check("n=4 shares the prompt: the metric", cached >= 3 * 64, cached)
print("# n=4 on %d prompt tokens: %d prefilled in all, %d cached" % (u["prompt_tokens"], t["prompt_n"], cached))
sys.exit(1 if fails else 0)
EOF
rc=$?
grep -v '^ok ' "$tmp/main.out"
pass=$((pass + $(grep -c '^ok ' "$tmp/main.out")))
[ $rc = 0 ] && ok || bad "n: see above"
stop_server

# ---------------------------------------------------------------- all or nothing, cancel
start_server busy --parallel 2 --queue 1
# more than slots and queue: never
code=$(curl -s --max-time 30 -o "$tmp/b" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "x", "n": 4, "max_tokens": 1}')
[ "$code" = 400 ] && grep -q '"param":"n"' "$tmp/b" && ok || bad "n above slots + queue: $code $(cat "$tmp/b")"
# a request holding a slot: n=3 finds 2 places and gets the 503; n=2 is answered
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 1000, "stream": true}' >"$tmp/long" &
long_pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/long" ] && break; sleep 0.05; done
code=$(curl -s --max-time 30 -o "$tmp/b" -D "$tmp/h" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "x", "n": 3, "max_tokens": 1}')
[ "$code" = 503 ] && grep -qi '^Retry-After: 1' "$tmp/h" && ok || bad "n=3 with 2 places: $code $(cat "$tmp/b")"
code=$(curl -s --max-time 30 -o "$tmp/b" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "x", "n": 2, "max_tokens": 1}')
[ "$code" = 200 ] && ok || bad "n=2 with 2 places: $code $(cat "$tmp/b")"
kill "$long_pid" 2>/dev/null; wait "$long_pid" 2>/dev/null
# a client that goes away: every choice is cancelled (both slots free long before 3 x 1000 tokens)
for_slots_free() {
  running=1
  for _ in $(seq 1 100); do
    running=$(curl -s --max-time 10 "$url/metrics" | sed -n 's/^nibble_slots_running //p')
    [ "$running" = 0 ] && break
    sleep 0.05
  done
}
for_slots_free
g0=$(curl -s --max-time 10 "$url/metrics" | sed -n 's/^nibble_generated_tokens_total //p')
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 1000, "n": 3, "stream": true, "temperature": 1}' >"$tmp/cut" &
cut_pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/cut" ] && break; sleep 0.05; done
kill "$cut_pid" 2>/dev/null; wait "$cut_pid" 2>/dev/null
for_slots_free
g1=$(curl -s --max-time 10 "$url/metrics" | sed -n 's/^nibble_generated_tokens_total //p')
queued=$(curl -s --max-time 10 "$url/metrics" | sed -n 's/^nibble_queue_depth //p')
[ "$running" = 0 ] && [ "${queued:-x}" = 0 ] && [ $((g1 - g0)) -lt 2000 ] && ok || bad "a hang-up cancels every choice: running $running, queued $queued, generated $((g1 - g0))"
stop_server
[ "$rc" = 0 ] && ok || bad "SIGTERM: exit $rc"

# ---------------------------------------------------------------- the request log for machines
# --log-format json: each request's line carries its fields apart
start_server jsonlog --log-format json
curl -s --max-time 30 -o /dev/null "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "n": 2, "max_tokens": 5, "temperature": 0}'
curl -s --max-time 30 -o /dev/null "$url/nowhere"
curl -s -N --max-time 60 "$url/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt": "In the beginning", "max_tokens": 1000, "stream": true}' >"$tmp/cut2" &
cut_pid=$!
for _ in $(seq 1 200); do [ -s "$tmp/cut2" ] && break; sleep 0.05; done
kill "$cut_pid" 2>/dev/null; wait "$cut_pid" 2>/dev/null
sleep 0.5
stop_server
"$py" - "$tmp/jsonlog.log" <<'EOF2' && ok || bad "JSON request log: $(grep request "$tmp/jsonlog.log")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
req = [l for l in lines if l.get("event") == "request"]
assert len(req) == 3, req
a, b, c = req
assert a["method"] == "POST" and a["path"] == "/v1/completions" and a["status"] == 200, a
assert a["client"] == "127.0.0.1" and a["id"].startswith("cmpl-") and a["n"] == 2, a
assert a["prompt_tokens"] > 0 and a["completion_tokens"] == 10 and a["finish"] == "length,length", a
assert a["termination"] is None and 0 <= a["seconds"] < 30 and a["msg"].startswith("POST /v1/completions 200"), a
assert b["status"] == 404 and b["path"] == "/nowhere" and b["id"] is None and "prompt_tokens" not in b, b
assert c["status"] == 200 and c["finish"] == "cut" and c["termination"] in ("client closed", "not completed"), c
assert c["completion_tokens"] < 1000, c
EOF2

echo "$pass passed, $fail failed"
[ $fail = 0 ]
