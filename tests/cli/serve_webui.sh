#!/usr/bin/env bash
# nibble serve's chat page (GET /, src/server/webui/index.html): its headers and the API key
# rule by curl, then the page itself in headless Chromium (tests/npm/webui_test.js: Debian's
# chromium driven by puppeteer-core, pinned in tests/npm) against a server on kjv-7m with
# --api-key. Its screenshots are kept as test artifacts: $NIBBLE_ARTIFACTS/serve_webui.png
# and serve_webui_markdown.png (the build folder's Testing/artifacts/ under ctest). Node, tests/npm's packages (npm ci)
# and chromium are needed: without them the test fails, saying which is missing.
. "$(dirname "$0")/../helpers/serve_common.sh"
npm_dir="${NIBBLE_SOURCE_DIR:?}/tests/npm"
page_src="$NIBBLE_SOURCE_DIR/src/server/webui/index.html"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
chromium="${CHROMIUM:-/usr/bin/chromium}"
artifacts="${NIBBLE_ARTIFACTS:-$PWD/Testing/artifacts}"
if [ ! -f "$gguf" ]; then echo "SKIP: no $gguf"; exit 0; fi
command -v node >/dev/null || { echo "FAIL: node is missing (apt-get install nodejs npm)"; exit 1; }
if [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
  echo "FAIL: tests/npm/node_modules/puppeteer-core is missing (run npm ci in tests/npm)"; exit 1
fi
if [ ! -x "$chromium" ]; then
  echo "FAIL: no Chromium at $chromium (Debian's chromium package: tools/install-deps.sh)"; exit 1
fi

# the page's source: one writer of HTML (markdown()'s output), small
n=$(grep -c 'innerHTML *=' "$page_src")
[ "$n" = 1 ] && grep -q 'innerHTML = markdown(' "$page_src" || bad "innerHTML written $n times"
grep -qE 'outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function' "$page_src" && bad "another HTML or code writer"
size=$(wc -c <"$page_src")
[ "$size" -lt 30000 ] || bad "the page is $size bytes (aim: under 30 KB)"

key="webui-test-$RANDOM$RANDOM"
# a context of 4096: the answer that Stop ends runs for seconds (max_tokens 4000)
start_server main -c 4096 --api-key "$key"
curl -s -D "$tmp/h" -o "$tmp/page" "$url/"
grep -qi '^HTTP/1.1 200' "$tmp/h" || bad "GET / without the key: $(head -1 "$tmp/h")"
cmp -s "$tmp/page" "$page_src" || bad "GET / is not src/server/webui/index.html"
grep -qi '^content-type: text/html; charset=utf-8' "$tmp/h" || bad "GET /: no text/html type"
grep -qi "^content-security-policy: default-src 'none'; script-src 'sha256-" "$tmp/h" || bad "GET /: no CSP"
grep -qi '^x-content-type-options: nosniff' "$tmp/h" || bad "GET /: no nosniff"
curl -s -o "$tmp/page2" "$url/index.html"
cmp -s "$tmp/page2" "$page_src" || bad "GET /index.html is not the page"
code=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -I "$url/")
[ "$code" = "200 0" ] || bad "HEAD /: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/")
[ "$code" = 405 ] || bad "POST /: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/models")
[ "$code" = 401 ] || bad "GET /v1/models without the key: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/v1/index.html")
[ "$code" = 404 ] || bad "GET /v1/index.html: $code"

mkdir -p "$artifacts"
shot="$artifacts/serve_webui.png"
rm -f "$shot" "$artifacts/serve_webui_markdown.png"
timeout 300 node "$npm_dir/webui_test.js" "$url" "$key" "$shot" || bad "webui_test.js"
stop_server
if [ "$rc" != 0 ]; then bad "the server exited $rc after SIGTERM"; fi
# the answer Stop ended: its connection closed before the end, the generation cut short
grep -qE 'POST /v1/chat/completions 200 .* generated [0-9]+ cut \(' "$tmp/main.log" ||
  bad "no generation cut by the page's Stop in the server's log"
[ "$fail" = 0 ] || { cat "$tmp/main.log"; exit 1; }
echo "screenshots: $shot $artifacts/serve_webui_markdown.png"
echo "ok"
