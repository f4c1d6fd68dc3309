#!/usr/bin/env bash
# nibble serve under load with a real client, CI-sized: bench/serve_load64.sh's check
# (tests/npm/serve_load.js: autocannon plus measuring connections, 64 concurrent streams)
# for 20 s against kjv-7m — every response 200, each stream ends with [DONE] and holds the
# known greedy text, the slots empty afterwards, RssAnon flat after 8 s of warm-up (not
# judged under AddressSanitizer, whose quarantine grows by design), exit 0 on SIGTERM.
# Needs node and `npm ci` in tests/npm; without them the test is skipped, except under
# CI=true where that is a failure.
. "$(dirname "$0")/../helpers/serve_common.sh"
npm_dir="${NIBBLE_SOURCE_DIR:?}/tests/npm"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if ! command -v node >/dev/null || [ ! -d "$npm_dir/node_modules/autocannon" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node or tests/npm/node_modules/autocannon missing (npm ci in tests/npm)"; exit 1; fi
  echo "SKIP: node or tests/npm/node_modules/autocannon missing (run npm ci in tests/npm)"; exit 0
fi
if [ ! -f "$gguf" ]; then echo "SKIP: no $gguf"; exit 0; fi
slack=8192
if grep -aq __asan_init "$bin"; then slack=100000000; echo "(AddressSanitizer build: RssAnon reported, not judged)"; fi
start_server main --parallel 64 --queue 256
timeout 200 node "$npm_dir/serve_load.js" "$url" "$pid" --seconds 20 --load 56 \
  --measure 8 --max-tokens 32 --warmup 8 --rss-slack-kib $slack; nrc=$?
stop_server
if [ "$rc" != 0 ]; then echo "FAIL: the server exited $rc after SIGTERM"; tail -20 "$tmp/main.log"; exit 1; fi
exit $nrc
