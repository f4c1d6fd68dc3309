#!/usr/bin/env bash
# bench/serve_load64.sh — the load test of issue 16: 64 concurrent streaming clients for 60 s
# against nibble serve on kjv-7m, with a real client (autocannon, pinned in tests/npm) and
# tests/npm/serve_load.js's own measuring connections (time to first token). Checks every
# streamed response (status, [DONE], the known greedy text), samples the server's RssAnon
# every 2 s, and prints and writes (JSON) the report. Loopback only; stops its own server;
# bounded (the load runs SECONDS, the script has a watchdog).
# Usage: bench/serve_load64.sh [SECONDS=60] [LOAD=56] [MEASURE=8] [SLOTS=64] [THREADS=2]
#   MODEL=path (default ../shared/models/kjv-7m/kjv-7m-f32.gguf, --path source),
#   NIBBLE=path/to/nibble (default build/release/nibble), OUT=report.json,
#   TOKENS=32 (per request), WARMUP=10 (seconds before the RSS baseline).
# Needs node and `npm ci` in tests/npm.
set -euo pipefail
seconds=${1:-60}
load=${2:-56}
measure=${3:-8}
slots=${4:-64}
threads=${5:-2}
model=${MODEL:-../shared/models/kjv-7m/kjv-7m-f32.gguf}
nibble=${NIBBLE:-build/release/nibble}
here=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$here/tests/npm/node_modules/autocannon" ] || { echo "npm ci in tests/npm first"; exit 1; }
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
"$nibble" serve -m "$model" --path "${PATH_ARG:-source}" --port 0 -t "$threads" \
  --parallel "$slots" --queue 256 2>"$tmp/log" &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/log")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start"; cat "$tmp/log"; exit 1; }
echo "nibble serve -m $model --parallel $slots -t $threads (pid $pid, port $port)"
rc=0
node "$here/tests/npm/serve_load.js" "http://127.0.0.1:$port" "$pid" --seconds "$seconds" \
  --load "$load" --measure "$measure" --max-tokens "${TOKENS:-32}" --warmup "${WARMUP:-10}" \
  --json "${OUT:-$tmp/report.json}" || rc=$?
kill -TERM "$pid"
for _ in $(seq 1 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "the server did not stop on SIGTERM"; rc=1; else
  wait "$pid" || { echo "the server exited $? after SIGTERM"; rc=1; }; fi
pid=""
exit $rc
