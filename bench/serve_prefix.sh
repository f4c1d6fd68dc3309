#!/usr/bin/env bash
# bench/serve_prefix.sh — what prefix sharing saves: time to first token of a request whose
# long prompt start (a "system prompt") is new to the server, then of one that shares it
# (cached: only the rest is prefilled). Two servers side by side, one with prefix sharing
# and one with --no-prefix-cache, the same requests to each in turn (interleaved), ROUNDS
# rounds, each round a start of its own. Streams a completion and times its first text.
# Usage: bench/serve_prefix.sh [REPEATS=6 (the passage, ~215 tokens each)] [ROUNDS=5] [THREADS=2]
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
pids=""
cleanup() { for p in $pids; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
ctx=$(( repeats * 256 + 512 ))
ports=""
for mode in shared unshared; do
  extra=""
  [ $mode = unshared ] && extra=--no-prefix-cache
  "$nibble" serve -m "$model" --path "${PATH_ARG:-source}" --port 0 -t "$threads" -c $ctx \
    --parallel 2 $extra 2>"$tmp/$mode.log" &
  pids="$pids $!"
  port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/$mode.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$tmp/$mode.log"; exit 1; }
  ports="$ports $port"
done
echo "nibble serve -m $model -c $ctx -t $threads --parallel 2, and the same with --no-prefix-cache"
"$py" - "$repeats" "$rounds" $ports <<'EOF'
import http.client, json, re, statistics, sys, time
repeats, rounds, ports = int(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3:5]]
passage = ("In the beginning God created the heaven and the earth. And the earth was without form, "
           "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the "
           "face of the waters. And God said, Let there be light: and there was light. And God saw the "
           "light, that it was good: and God divided the light from the darkness. And God called the "
           "light Day, and the darkness he called Night. And the evening and the morning were the first "
           "day. And God said, Let there be a firmament in the midst of the waters, and let it divide the "
           "waters from the waters. And God made the firmament, and divided the waters which were under "
           "the firmament from the waters which were above the firmament: and it was so. And God called "
           "the firmament Heaven. And the evening and the morning were the second day. ")
def ttft(port, prompt):
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
        if line.startswith("data: {") and '"choices":[]' in line:
            usage = json.loads(line[6:])["usage"]
    return first, usage
res = {m: ([], []) for m in ("shared", "unshared")}
for k in range(rounds):
    start = "Chapter %d. " % (k + 7) + passage * repeats
    for mode, port in zip(("shared", "unshared"), ports):
        t1, u1 = ttft(port, start + "And the LORD said unto Moses")
        t2, u2 = ttft(port, start + "Then Jesus answered and said")
        res[mode][0].append(t1); res[mode][1].append(t2)
        print("  round %d %-8s: new start %.1f ms (%d of %d tokens cached); shared start %.1f ms (%d of %d cached)"
              % (k, mode, 1e3 * t1, u1["prompt_tokens_details"]["cached_tokens"], u1["prompt_tokens"],
                 1e3 * t2, u2["prompt_tokens_details"]["cached_tokens"], u2["prompt_tokens"]))
for mode in res:
    print("median time to first token, %s: new start %.1f ms, shared start %.1f ms" %
          (mode, 1e3 * statistics.median(res[mode][0]), 1e3 * statistics.median(res[mode][1])))
EOF
for p in $pids; do kill -TERM "$p"; done
wait
pids=""
