#!/usr/bin/env bash
# nibble serve's prefix sharing on kjv-7m (f32 weights): prompts that start with one long
# passage (a "system prompt" of about 256 tokens) reuse its KV instead of prefilling it
# again — a later request finds it in a finished request's slot, concurrent ones fork the
# slot that prefilled it — and the greedy texts stay nibble run's, token for token. The
# cached tokens show in usage.prompt_tokens_details.cached_tokens and in
# nibble_prompt_tokens_cached_total; four concurrent requests hold fewer KV blocks at their
# peak (nibble_kv_blocks_peak) than with --no-prefix-cache. And --kv-tokens below slots x
# context: requests that outgrow the pool end with "length", none fails.
. "$(dirname "$0")/../helpers/serve_common.sh"

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "SKIP (no $gguf)"; exit 0; fi
ctx=512
SERVE_ARGS=(-c "$ctx" --parallel 4)
metric() { curl -s --max-time 10 "$url/metrics" | sed -n "s/^$1 //p"; }

# the shared passage (Genesis 1, King James), then one question each
sys="In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the light from the darkness. And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day. And God said, Let there be a firmament in the midst of the waters, and let it divide the waters from the waters. And God made the firmament, and divided the waters which were under the firmament from the waters which were above the firmament: and it was so. And God called the firmament Heaven. And the evening and the morning were the second day. And God said, Let the waters under the heaven be gathered together unto one place, and let the dry land appear: and it was so. And God called the dry land Earth; and the gathering together of the waters called he Seas: and God saw that it was good."
qs=("And the LORD said unto Moses" "Then Jesus answered and said" "Blessed is the man that" "And it came to pass")
n_gen=16
for i in 0 1 2 3; do
  "$bin" run -m "$gguf" --path source -t 2 -c $ctx -p "$sys ${qs[$i]}" -n $n_gen 2>/dev/null >"$tmp/want$i.txt"
done
# complete I FILE: prompt i, greedy, n_gen tokens -> FILE (the JSON), its status in FILE.code
complete() {
  "$py" -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": int(sys.argv[2]), "temperature": 0}))' \
    "$sys ${qs[$1]}" $n_gen >"$2.req"
  curl -s --max-time 120 -o "$2" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
    --data-binary @"$2.req" >"$2.code"
}
# check I FILE: the text is run's; prints "prompt_tokens cached_tokens"
check() {
  "$py" - "$2" "$tmp/want$1.txt" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
want = open(sys.argv[2], encoding="utf-8").read()[:-1]
c = j["choices"][0]
u = j["usage"]
if c["text"] != want or u["completion_tokens"] != 16:
    print("server %r vs run %r" % (c["text"], want), file=sys.stderr)
    sys.exit(1)
print(u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"])
EOF
}

# ---------------------------------------------------------------- one after another
start_server seq
complete 0 "$tmp/a0"
r0=$(check 0 "$tmp/a0") && ok || bad "first request = run: $(cat "$tmp/a0.code") $(cat "$tmp/a0")"
read -r n0 c0 <<<"$r0"
[ "${n0:-0}" -ge 250 ] && [ "${c0:-x}" = 0 ] && ok || bad "first request: $n0 prompt tokens (>= 250 wanted), $c0 cached (0 wanted)"
complete 1 "$tmp/a1"
r1=$(check 1 "$tmp/a1") && ok || bad "second request (shared passage) = run: $(cat "$tmp/a1.code") $(cat "$tmp/a1")"
read -r n1 c1 <<<"$r1"
# the passage is cached: all of it but the tokens where the two prompts part
[ "${c1:-0}" -ge 240 ] && [ "$c1" -lt "$n1" ] && ok || bad "second request: $c1 of $n1 prompt tokens cached (>= 240 wanted)"
complete 1 "$tmp/a2"
r2=$(check 1 "$tmp/a2") && ok || bad "the second prompt again = run: $(cat "$tmp/a2")"
read -r n2 c2 <<<"$r2"
# the same prompt again (its slot holds it whole): all but its last token, which is run
# for the first token's logits
[ "${c2:-0}" = $((n1 - 1)) ] && ok || bad "the same prompt again: $c2 cached, $((n1 - 1)) wanted"
echo "  one after another: $n0 prompt tokens, $c0 cached; another prompt with the same start: $c1 of $n1 cached; it again: $c2 cached"
m=$(metric nibble_prompt_tokens_cached_total)
[ "$m" = $((c1 + c2)) ] && ok || bad "nibble_prompt_tokens_cached_total $m, $((c1 + c2)) wanted"
# a stream reports the cached tokens in its usage chunk too
"$py" -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 16, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}))' \
  "$sys ${qs[1]}" >"$tmp/s.req"
curl -sN --max-time 120 "$url/v1/completions" -H 'Content-Type: application/json' --data-binary @"$tmp/s.req" >"$tmp/s.out"
"$py" - "$tmp/s.out" "$tmp/want1.txt" "$((n1 - 1))" <<'EOF' && ok || bad "stream with cached tokens: $(head -c 600 "$tmp/s.out")"
import json, sys
events = [l[6:] for l in open(sys.argv[1], encoding="utf-8").read().split("\n") if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-1]
chunks = [json.loads(e) for e in events[:-1]]
text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
usage = [c["usage"] for c in chunks if c.get("usage")]
want = open(sys.argv[2], encoding="utf-8").read()[:-1]
assert text == want, (text, want)
assert usage and usage[0]["prompt_tokens_details"]["cached_tokens"] == int(sys.argv[3]), usage
EOF
stop_server
[ "$rc" = 0 ] && ok || bad "seq: SIGTERM exit $rc"

# ---------------------------------------------------------------- four at once
# Four requests sent together (threads behind a barrier), each long enough (150 tokens)
# that all four run at once: their texts are run's, and the peak of KV blocks in use. Each
# sequence ends 24 tokens past its 13th block's start (259 + 149 = 408 = 12 x 32 + 24), so
# the four hold their last blocks together even though their prefills are spread over
# three steps (1036 prompt tokens, 512 a step).
n_long=150
for i in 0 1 2 3; do
  "$bin" run -m "$gguf" --path source -t 2 -c $ctx -p "$sys ${qs[$i]}" -n $n_long 2>/dev/null >"$tmp/long$i.txt"
done
concurrent() {
  timeout 300 "$py" - "$port" "$sys" "$n_long" "$tmp/long" "${qs[@]}" <<'EOF'
import http.client, json, sys, threading
port, sys_text, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
want_prefix, qs = sys.argv[4], sys.argv[5:]
barrier = threading.Barrier(len(qs))
out = [None] * len(qs)
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=240)
    body = json.dumps({"prompt": sys_text + " " + qs[i], "max_tokens": n, "temperature": 0})
    barrier.wait()
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out[i] = (r.status, json.loads(r.read()))
ts = [threading.Thread(target=one, args=(i,)) for i in range(len(qs))]
for t in ts: t.start()
for t in ts: t.join()
bad = 0
for i, (st, j) in enumerate(out):
    want = open("%s%d.txt" % (want_prefix, i), encoding="utf-8").read()[:-1]
    if st != 200 or j["choices"][0]["text"] != want:
        print("request %d: %s %r vs run %r" % (i, st, j.get("choices", [{}])[0].get("text"), want))
        bad += 1
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/metrics")
m = dict(l.split(" ", 1) for l in c.getresponse().read().decode().splitlines() if l and l[0] != "#")
print("peak=%s cached=%s" % (m["nibble_kv_blocks_peak"], m["nibble_prompt_tokens_cached_total"]))
sys.exit(1 if bad else 0)
EOF
}
start_server shared
out=$(concurrent) && ok || bad "four at once (shared): $out"
eval "$(echo "$out" | tail -1 | sed -n 's/^peak=\([0-9]*\) cached=\([0-9]*\)$/peak_shared=\1 cached_shared=\2/p')"
stop_server
[ "$rc" = 0 ] && ok || bad "shared: SIGTERM exit $rc"
start_server unshared --no-prefix-cache
out=$(concurrent) && ok || bad "four at once (unshared): $out"
eval "$(echo "$out" | tail -1 | sed -n 's/^peak=\([0-9]*\) cached=\([0-9]*\)$/peak_unshared=\1 cached_unshared=\2/p')"
stop_server
[ "$rc" = 0 ] && ok || bad "unshared: SIGTERM exit $rc"
echo "  four concurrent requests starting with one ${n0}-token passage: KV blocks at peak ${peak_shared:-?} shared, ${peak_unshared:-?} unshared; prompt tokens cached ${cached_shared:-?}, ${cached_unshared:-?}"
# three of the four fork the first one's passage: each holds its 7 whole blocks once (the
# block where the prompts part is copied on write), so at least 3 x 6 blocks fewer
[ "${peak_shared:-0}" -gt 0 ] && [ $((${peak_unshared:-0} - peak_shared)) -ge 18 ] && ok || bad "KV blocks at peak: ${peak_shared:-?} shared vs ${peak_unshared:-?} unshared"
[ "${cached_shared:-0}" -ge 720 ] && [ "${cached_unshared:-x}" = 0 ] && ok || bad "cached tokens: ${cached_shared:-?} shared (>= 3 x 240 wanted), ${cached_unshared:-?} unshared"

# ---------------------------------------------------------------- a KV pool of one context
# --kv-tokens 256 with four slots of 256: four requests of 100 tokens need about twice the
# pool. None fails: the oldest runs to its 100 tokens, run's text; the youngest are ended
# ("length") when no block is left for their next token, their text a prefix of run's.
kq=("In the beginning" "And God said" "The LORD is my shepherd" "Blessed are the")
for i in 0 1 2 3; do
  "$bin" run -m "$gguf" --path source -t 2 -c 256 -p "${kq[$i]}" -n 100 2>/dev/null >"$tmp/kv$i.txt"
done
ctx=256
SERVE_ARGS=(-c "$ctx" --parallel 4)
start_server short --kv-tokens 256
timeout 300 "$py" - "$port" "$tmp/kv" "${kq[@]}" >"$tmp/short.out" 2>&1 <<'EOF'
import http.client, json, sys, threading, time
port, want_prefix, qs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
out = [None] * len(qs)
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=240)
    body = json.dumps({"prompt": qs[i], "max_tokens": 100, "temperature": 0})
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    out[i] = (r.status, json.loads(r.read()))
ts = []
for i in range(len(qs)):  # in order, so the first is the oldest
    ts.append(threading.Thread(target=one, args=(i,)))
    ts[-1].start()
    time.sleep(0.02)
for t in ts: t.join()
bad, full, cut = 0, 0, 0
for i, (st, j) in enumerate(out):
    want = open("%s%d.txt" % (want_prefix, i), encoding="utf-8").read()[:-1]
    c = j["choices"][0] if st == 200 else {}
    n = j["usage"]["completion_tokens"] if st == 200 else -1
    print("request %d: status %s, %d tokens, %s" % (i, st, n, c.get("finish_reason")))
    if st != 200 or c["finish_reason"] != "length" or not want.startswith(c["text"]):
        print("  bad: %r vs run %r" % (c.get("text"), want)); bad += 1
    elif n == 100 and c["text"] == want: full += 1
    elif n < 100: cut += 1
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/metrics")
m = dict(l.split(" ", 1) for l in c.getresponse().read().decode().splitlines() if l and l[0] != "#")
print("full %d, cut %d, peak blocks %s of %s" % (full, cut, m["nibble_kv_blocks_peak"], m["nibble_kv_blocks_total"]))
ok = not bad and full >= 1 and cut >= 1 and int(m["nibble_kv_blocks_peak"]) <= 8 and int(m["nibble_kv_blocks_total"]) == 8
# the pool is whole again: a request alone runs to its end
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
c.request("POST", "/v1/completions", body=json.dumps({"prompt": qs[3], "max_tokens": 100, "temperature": 0}),
          headers={"Content-Type": "application/json"})
j = json.loads(c.getresponse().read())
ok = ok and j["choices"][0]["text"] == open(want_prefix + "3.txt", encoding="utf-8").read()[:-1]
print("alone afterwards:", j["usage"]["completion_tokens"], "tokens")
sys.exit(0 if ok else 1)
EOF
rc=$?
sed 's/^/  /' "$tmp/short.out"
[ "$rc" = 0 ] && ok || bad "--kv-tokens 256 (python exit $rc)"
stop_server
[ "$rc" = 0 ] && ok || bad "short: SIGTERM exit $rc"
"$bin" serve -m "$gguf" --path source --port 0 -c 256 --kv-tokens 100 2>"$tmp/err"; rc=$?
[ "$rc" = 1 ] && grep -q "cannot hold one full context" "$tmp/err" && ok || bad "--kv-tokens below a context: rc $rc: $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
