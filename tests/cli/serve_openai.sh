#!/usr/bin/env bash
# nibble serve with a real client: tests/npm/serve_openai.js drives the `openai` npm package
# (pinned in tests/npm) against a server on kjv-7m. Needs node and `npm ci` in tests/npm;
# without them the test is skipped, except under CI=true where that is a failure.
. "$(dirname "$0")/../helpers/serve_common.sh"
npm_dir="${NIBBLE_SOURCE_DIR:?}/tests/npm"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if ! command -v node >/dev/null || [ ! -d "$npm_dir/node_modules/openai" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node or tests/npm/node_modules/openai missing (npm ci in tests/npm)"; exit 1; fi
  echo "SKIP: node or tests/npm/node_modules/openai missing (run npm ci in tests/npm)"; exit 0
fi
if [ ! -f "$gguf" ]; then echo "SKIP: no $gguf"; exit 0; fi
# a context of 1024: the tools' system block does not fit kjv-7m's 256
start_server main -c 1024
timeout 300 node "$npm_dir/serve_openai.js" "$url"; nrc=$?
stop_server
if [ "$rc" != 0 ]; then echo "FAIL: the server exited $rc after SIGTERM"; cat "$tmp/main.log"; exit 1; fi
exit $nrc
