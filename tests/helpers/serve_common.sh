# tests/helpers/serve_common.sh — sourced by the `nibble serve` CLI tests (tests/cli/serve*.sh):
# pass/fail counters, a temporary folder and a trap that kills every server started on any
# way out, and start_server / stop_server. A script sets $gguf (the model) and, if its
# servers share options, SERVE_ARGS=(...) before calling start_server.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
py="${NIBBLE_PYTHON:-python3}"
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
tmp=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
SERVE_ARGS=()

# start_server NAME ARGS...: a server of $gguf on a free port (its log $tmp/NAME.log); its
# port in $port, its URL in $url, its pid in $pid
start_server() {
  local name="$1"; shift
  "$bin" serve -m "$gguf" --path source --port 0 -t 2 "${SERVE_ARGS[@]}" "$@" 2>"$tmp/$name.log" &
  pid=$!
  pids="$pids $pid"
  port=""
  for _ in $(seq 1 300); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$port" ]; then echo "FAIL $name: the server did not start:"; cat "$tmp/$name.log"; exit 1; fi
  url="http://127.0.0.1:$port"
}
# stop_server: SIGTERM, then its exit status in $rc (at most 40 s: then SIGKILL, rc 124)
stop_server() {
  kill -TERM "$pid"
  for _ in $(seq 1 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; wait "$pid" 2>/dev/null; rc=124; else wait "$pid"; rc=$?; fi
}
