#!/usr/bin/env bash
# bench/serve_prefix.sh — what prefix sharing saves: time to first token of a request whose
# long prompt start (a "system prompt") is new to the server, then of one that shares it
# (cached: only the rest is prefilled), R rounds, each round a start of its own; and the
# same with --no-prefix-cache. Streams a completion and times its first text event.
# Usage: bench/serve_prefix.sh [REPEATS=6 (the passage, about 250 tokens each)] [ROUNDS=5] [THREADS=2]
#   MODEL=path (default ../shared/models/kjv-7m/kjv-7m-f32.gguf, --path source),
#   NIBBLE=path/to/nibble (default build/release/nibble). Loopback only; stops its servers.
set -euo pipefail
repeats=${1:-6}
rounds=${2:-5}
threads=${3:-2}
model=${MODEL:-../shared/models/kjv-7m/kjv-7m-f32.gguf}
nibble=${NIBBLE:-build/release/nibble}
py=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
ctx=$(( repeats * 256 + 512 ))
for mode in shared unshared; do
  extra=""
  [ $mode = unshared ] && extra=--no-prefix-cache
  "$nibble" serve -m "$model" --path "${PATH_ARG:-source}" --port 0 -t "$threads" -c $ctx \
    --parallel 2 $extra 2>"$tmp/log" &
  pid=$!
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/log")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; exit 1; }
    sleep 0.1
  done
  echo "$mode: nibble serve -m $model -c $ctx -t $threads $extra"
  "$py" - "$port" "$repeats" "$rounds" <<'EOF'
import http.client, json, re, statistics, sys, time
port, repeats, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
passage = ("In the beginning God created the heaven and the earth. And the earth was without form, "
           "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the "
           "face of the waters. And God said, Let there be light: and there was light. And God saw the "
           "light, that it was good: and God divided the light from the darkness. And God called the "
           "light Day, and the darkness he called Night. And the evening and the morning were the first "
           "day. And God said, Let there be a firmament in the midst of the waters, and let it divide the "
           "waters from the waters. And God made the firmament, and divided the waters which were under "
           "the firmament from the waters which were above the firmament: and it was so. And God called "
           "the firmament Heaven. And the evening and the morning were the second day. ")
def ttft(prompt):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 8,
              "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    first, usage, buf = None, None, b""
    while True:
        d = r.read1(65536)
        if not d: break
        buf += d
        if first is None and re.search(rb'"text":"[^"]', buf): first = time.monotonic() - t0
    for line in buf.decode().split("\n"):
        if line.startswith("data: {") and '"usage":{' in line and '"choices":[]' in line:
            usage = json.loads(line[6:])["usage"]
    return first, usage
cold, warm = [], []
for k in range(rounds):
    start = "Chapter %d. " % (k + 7) + passage * repeats
    t1, u1 = ttft(start + "And the LORD said unto Moses")
    t2, u2 = ttft(start + "Then Jesus answered and said")
    cold.append(t1); warm.append(t2)
    print("  round %d: prompt %d tokens: new %.1f ms (cached %d); shared start %.1f ms (cached %d of %d)"
          % (k, u1["prompt_tokens"], 1e3 * t1, u1["prompt_tokens_details"]["cached_tokens"], 1e3 * t2,
             u2["prompt_tokens_details"]["cached_tokens"], u2["prompt_tokens"]))
print("  median time to first token: new start %.1f ms, shared start %.1f ms" %
      (1e3 * statistics.median(cold), 1e3 * statistics.median(warm)))
EOF
  kill -TERM "$pid"; wait "$pid" || true; pid=""
done
