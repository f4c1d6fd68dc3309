#!/usr/bin/env bash
# bench/serve_load.sh — N concurrent streaming clients against nibble serve: aggregate
# generated tok/s, time to first token p50/p99, inter-token p50/p99, errors. Bounded
# (R requests per client), loopback only, stops its own server.
# Usage: bench/serve_load.sh [MODEL] [clients=4] [requests per client=4] [tokens=64] [threads=2]
#   MODEL: default ../shared/models/kjv-7m/kjv-7m-f32.gguf (run as stored, --path source;
#   PATH_ARG=w4a8 etc. to choose). The server gets --parallel = clients (SLOTS= to change).
#   URL=http://127.0.0.1:PORT uses a server already running instead of starting one.
#   NIBBLE=path/to/nibble (default build/release/nibble).
# A throughput figure is only a figure beside another measured the same way in the same
# run: compare clients=1 with clients=N here, and llama-server with the same client.
set -euo pipefail
model=${1:-../shared/models/kjv-7m/kjv-7m-f32.gguf}
clients=${2:-4}
reqs=${3:-4}
tokens=${4:-64}
threads=${5:-2}
nibble=${NIBBLE:-build/release/nibble}
py=${PYTHON:-python3}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
url=${URL:-}
if [ -z "$url" ]; then
  "$nibble" serve -m "$model" --path "${PATH_ARG:-source}" --port 0 -t "$threads" \
    --parallel "${SLOTS:-$clients}" --queue 1024 2>"$tmp/log" &
  pid=$!
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/log")
    [ -n "${port:-}" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; exit 1; }
    sleep 0.1
  done
  [ -n "${port:-}" ] || { echo "the server did not start"; cat "$tmp/log"; exit 1; }
  url="http://127.0.0.1:$port"
fi
"$py" - "$url" "$clients" "$reqs" "$tokens" <<'EOF'
import http.client, json, sys, threading, time, urllib.parse
url, clients, reqs, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlparse(url)
prompts = ["In the beginning", "And God said", "The LORD is my shepherd", "Blessed are the",
           "And it came to pass", "Now the serpent was", "Hear, O Israel", "In my Father's house"]
ttft, itl, gen, errors = [], [], [0], [0]
lock = threading.Lock()

def one(i):
    body = json.dumps({"prompt": prompts[i % len(prompts)], "max_tokens": tokens, "temperature": 0.8,
                       "seed": i, "stream": True, "stream_options": {"include_usage": True}})
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        with lock:
            errors[0] += 1
        return
    first, prev, n, times, chunks = None, None, 0, [], 0
    while True:
        line = r.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        j = json.loads(data)
        if "choices" not in j: # an error object in the stream: count what came before it
            sys.stderr.write(f"request {i}: {data[:300].decode(errors='replace')}\n")
            with lock:
                errors[0] += 1
            break
        if j.get("usage"):
            n = j["usage"]["completion_tokens"]
        if j["choices"] and j["choices"][0].get("text"):
            chunks += 1
            t = time.monotonic()
            if first is None:
                first = t - t0
            elif prev is not None:
                times.append(t - prev)
            prev = t
    c.close()
    if n == 0: # no usage chunk (a stream cut by an error): a text chunk is one token
        n = chunks
    with lock:
        if first is not None:
            ttft.append(first)
        itl.extend(times)
        gen[0] += n

def client(k):
    for r in range(reqs):
        one(k * reqs + r)

t0 = time.monotonic()
ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
for t in ts: t.start()
for t in ts: t.join()
wall = time.monotonic() - t0

def pct(v, p):
    if not v: return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]

print(f"clients {clients}, requests {clients * reqs}, errors {errors[0]}, generated {gen[0]} tokens in {wall:.2f} s: "
      f"{gen[0] / wall:.1f} tok/s aggregate")
print(f"time to first token p50 {pct(ttft, 50) * 1e3:.1f} ms, p99 {pct(ttft, 99) * 1e3:.1f} ms; "
      f"inter-token p50 {pct(itl, 50) * 1e3:.2f} ms, p99 {pct(itl, 99) * 1e3:.2f} ms")
EOF
if [ -n "$pid" ]; then kill -TERM "$pid"; wait "$pid"; pid=""; fi
