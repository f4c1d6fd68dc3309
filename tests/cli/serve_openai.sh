#!/usr/bin/env bash
# nibble serve with a real client: tests/npm/serve_openai.js drives the `openai` npm package
# (pinned in tests/npm) against a server on kjv-7m. Needs node and `npm ci` in tests/npm;
# without them the test is skipped, except under CI=true where that is a failure.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
npm_dir="${NIBBLE_SOURCE_DIR:?}/tests/npm"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if ! command -v node >/dev/null || [ ! -d "$npm_dir/node_modules/openai" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node or tests/npm/node_modules/openai missing (npm ci in tests/npm)"; exit 1; fi
  echo "SKIP: node or tests/npm/node_modules/openai missing (run npm ci in tests/npm)"; exit 0
fi
if [ ! -f "$gguf" ]; then echo "SKIP: no $gguf"; exit 0; fi
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# a context of 1024: the tools' system block does not fit kjv-7m's 256
"$bin" serve -m "$gguf" --path source --port 0 -t 2 -c 1024 2>"$tmp/log" &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/log")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then echo "FAIL: the server did not start:"; cat "$tmp/log"; exit 1; fi
timeout 120 node "$npm_dir/serve_openai.js" "http://127.0.0.1:$port"; rc=$?
kill -TERM "$pid"
for _ in $(seq 1 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; wait "$pid" 2>/dev/null; src=124; else wait "$pid"; src=$?; fi
pid=""
if [ "$src" != 0 ]; then echo "FAIL: the server exited $src after SIGTERM"; cat "$tmp/log"; exit 1; fi
exit $rc
