#!/usr/bin/env bash
# nibble serve --lookup N: prompt-lookup speculative decoding inside the batched server
# gives the same tokens as without it (greedy and seeded sampling, one request alone and
# four at once, streamed or not), and /metrics counts the drafts it verified and those
# it confirmed. kjv-7m (f32, and its w4a8 build: both bit-identical per row by design).
. "$(dirname "$0")/../helpers/serve_common.sh"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "SKIP: no $gguf"; [ "${CI:-}" = true ] && exit 1; exit 0; fi
check() { # NAME URL-A URL-B, the python check on stdin
  if "$py" - "$@" >"$tmp/check.out" 2>&1; then ok; cat "$tmp/check.out"; else bad "$1: $(cat "$tmp/check.out")"; fi
}
cat >"$tmp/lib.py" <<'PY'
import json, sys, threading, urllib.request
# repetitive text: the answer copies its prompt, so drafts are found and confirmed
PROMPT = ("And God said, Let there be light: and there was light. And God saw the light, "
          "that it was good: and God divided the light from the darkness. And God said, Let "
          "there be light: and there was light. And God saw the light,")
def post(url, path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=120)
def complete(url, **kw):
    body = {"prompt": PROMPT, "max_tokens": 64, "temperature": 0}
    body.update(kw)
    return json.load(post(url, "/v1/completions", body))["choices"][0]
def stream(url, **kw):
    body = {"prompt": PROMPT, "max_tokens": 64, "temperature": 0, "stream": True}
    body.update(kw)
    text = ""
    for line in post(url, "/v1/completions", body):
        line = line.decode().strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            text += json.loads(line[6:])["choices"][0]["text"]
    return text
def metric(url, name):
    for line in urllib.request.urlopen(url + "/metrics", timeout=30).read().decode().splitlines():
        if line.startswith(name + " "): return float(line.split()[1])
    raise AssertionError("no " + name)
def together(url, bodies):
    out = [None] * len(bodies)
    def one(i):
        out[i] = complete(url, **bodies[i])
    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in ts: t.start()
    for t in ts: t.join()
    return out
PY
export PYTHONPATH="$tmp"
for path in source w4a8; do
  start_server plain-$path --path "$path" --parallel 4; url_a=$url; pid_a=$pid
  start_server lookup-$path --path "$path" --parallel 4 --lookup 8; url_b=$url; pid_b=$pid
  check "$path: the same tokens" "$url_a" "$url_b" <<'PY'
import json, sys; from lib import complete, stream, metric, together
a, b = sys.argv[2], sys.argv[3]
for kw in ({}, {"temperature": 0.8, "seed": 7}, {"max_tokens": 5}, {"stop": ["darkness"]},
           {"logprobs": 2}, {"response_format": {"type": "json_object"}, "max_tokens": 48}):
    x, y = complete(a, **kw), complete(b, **kw)
    assert (x["text"], x["finish_reason"], x["logprobs"]) == \
           (y["text"], y["finish_reason"], y["logprobs"]), (kw, x, y)
    if "response_format" in kw: json.loads(x["text"])
    if "logprobs" in kw: assert x["logprobs"], x
assert stream(b) == complete(a)["text"]
bodies = [{"temperature": 0.8, "seed": s, "max_tokens": 40 + 8 * s} for s in range(4)]
assert [c["text"] for c in together(a, bodies)] == [c["text"] for c in together(b, bodies)]
d, acc = metric(b, "nibble_lookup_drafted_total"), metric(b, "nibble_lookup_accepted_total")
assert metric(a, "nibble_lookup_drafted_total") == 0
assert d > 0 and 0 < acc <= d, (d, acc)
print(f"# lookup: {int(acc)} of {int(d)} drafts confirmed")
PY
  for p in $pid_a $pid_b; do pid=$p; stop_server; [ "$rc" = 0 ] && ok || bad "server exit $rc"; done
done
# the option's range
if "$bin" serve -m "$gguf" --lookup 17 2>"$tmp/err"; then bad "--lookup 17 accepted"
elif grep -q -- "--lookup" "$tmp/err"; then ok; else bad "--lookup 17: $(cat "$tmp/err")"; fi
echo "cli serve_lookup: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
