#!/usr/bin/env bash
# nibble serve and a thinking template: the answer's <think>...</think> goes to
# message.reasoning_content (delta.reasoning_content in a stream), as vLLM's and
# llama-server's reasoning parsers do; --reasoning-format none keeps it in the content.
# kjv-7m with a ChatML template whose generation prompt opens <think> (as DeepSeek-R1's
# and Qwen3's with thinking forced do): the whole answer is reasoning until </think>.
. "$(dirname "$0")/../helpers/serve_common.sh"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "SKIP: no $gguf"; [ "${CI:-}" = true ] && exit 1; exit 0; fi
printf '%s' "{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}" >"$tmp/think.jinja"
# a template that knows <think> (in a comment) but does not open it: answers without the
# tag are content
printf '%s' "{#- answers may start with <think> -#}{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}" >"$tmp/maythink.jinja"
check() { # NAME URL-A [URL-B], the python check on stdin
  if "$py" - "$@" >"$tmp/check.out" 2>&1; then ok; else bad "$1: $(cat "$tmp/check.out")"; fi
}
start_server split --chat-template-file "$tmp/think.jinja"; url_a=$url; pid_a=$pid
start_server inline --chat-template-file "$tmp/think.jinja" --reasoning-format none; url_b=$url; pid_b=$pid
start_server may --chat-template-file "$tmp/maythink.jinja"; url_c=$url; pid_c=$pid
cat >"$tmp/lib.py" <<'PY'
import json, sys, urllib.request
def post(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60)
def chat(url, **kw):
    body = {"messages": [{"role": "user", "content": "Who made the heaven?"}], "max_tokens": 24,
            "temperature": 0}
    body.update(kw)
    return json.load(post(url, body))
def stream(url, **kw):
    r, c, n = "", "", 0
    for line in post(url, {"messages": [{"role": "user", "content": "Who made the heaven?"}],
                           "max_tokens": 24, "temperature": 0, "stream": True, **kw}):
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]": continue
        for ch in json.loads(line[6:])["choices"]:
            d = ch["delta"]
            r += d.get("reasoning_content") or ""
            c += d.get("content") or ""
            n += 1
    return r, c, n
PY
export PYTHONPATH="$tmp"
check "split: the answer is reasoning" "$url_a" "$url_b" <<'PY'
import sys; from lib import chat
a = chat(sys.argv[2])["choices"][0]; b = chat(sys.argv[3])["choices"][0]
m, mb = a["message"], b["message"]
assert m["reasoning_content"] and m["content"] == "", a
assert "reasoning_content" not in mb and mb["content"] == m["reasoning_content"], (a, b)
assert a["finish_reason"] == b["finish_reason"] == "length", (a, b)
PY
check "split: a stream's deltas add up" "$url_a" <<'PY'
import sys; from lib import chat, stream
m = chat(sys.argv[2])["choices"][0]["message"]
r, c, n = stream(sys.argv[2])
assert (r, c) == (m["reasoning_content"], m["content"]) and n > 3, (r, c, m)
PY
check "inline: the stream is content" "$url_b" <<'PY'
import sys; from lib import chat, stream
m = chat(sys.argv[2])["choices"][0]["message"]
r, c, n = stream(sys.argv[2])
assert r == "" and c == m["content"], (r, c, m)
PY
check "no tag: content" "$url_c" "$url_b" <<'PY'
import sys; from lib import chat
m = chat(sys.argv[2])["choices"][0]["message"]
assert "reasoning_content" not in m and m["content"], m
PY
for p in $pid_a $pid_b $pid_c; do pid=$p; stop_server; [ "$rc" = 0 ] && ok || bad "server exit $rc"; done
echo "cli serve_reasoning: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
