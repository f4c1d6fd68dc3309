#!/usr/bin/env bash
# bench/agent_lookup.sh — prompt-lookup speculation on agent traces: one `nibble serve` plain
# and one with `--lookup N` (same model, same path, one slot each, both up at once), the
# same `nibble agent` episodes against both, interleaved (run, task, build) by the agent
# itself; prints each build's decode tok/s (the servers' timings: the tokens after the
# first over the decode steps that made them) and checks that every reply is the same.
# Usage: bench/agent_lookup.sh MODEL [runs=5] [lookup=8] [path=source] [tasks=data/agent/tasks.json]
#   NIBBLE=path/to/nibble (default build/release/nibble); THREADS (2); CTX (2048).
# Exit status 1 when a reply differs. Loopback only; stops both servers.
set -euo pipefail
model=${1:?usage: bench/agent_lookup.sh MODEL [runs] [lookup] [path] [tasks]}
runs=${2:-5}
lookup=${3:-8}
path=${4:-source}
tasks=${5:-data/agent/tasks.json}
nibble=${NIBBLE:-build/release/nibble}
threads=${THREADS:-2}
ctx=${CTX:-2048}
tmp=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
start() { # NAME ARGS...: a server up, its URL in $url
  local name=$1 port=""
  shift
  "$nibble" serve -m "$model" --path "$path" --port 0 -t "$threads" -c "$ctx" --parallel 1 "$@" \
    >/dev/null 2>"$tmp/$name.log" &
  pids="$pids $!"
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9][0-9]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "agent_lookup: $name did not start:" >&2; cat "$tmp/$name.log" >&2; exit 1; }
  url="http://127.0.0.1:$port"
}
start plain
plain=$url
start lookup --lookup "$lookup"
spec=$url
"$nibble" agent --tasks "$tasks" --runs "$runs" --server "plain=$plain" \
  --server "lookup$lookup=$spec" --trace "$tmp/trace.jsonl" -o json >"$tmp/out.json"
python3 - "$tmp/out.json" "$tmp/trace.jsonl" "$lookup" <<'PY'
import json, sys
builds = json.load(open(sys.argv[1]))
steps = {}
for line in open(sys.argv[2]):
    l = json.loads(line)
    steps.setdefault((l["run"], l["task"], l["step"]), {})[l["build"]] = l["reply"]
names = [b["build"] for b in builds]
differ = [k for k, v in steps.items() if len(set(v.values())) != 1 or len(v) != len(names)]
for b in builds:
    print(f"{b['build']:>10}: decode {b['decode_tok_s']:.1f} tok/s ({b['decode_tok_s_from']}), "
          f"success {b['success_rate']:.2f}, {b['episodes']} episodes")
p, s = builds[0]["decode_tok_s"], builds[1]["decode_tok_s"]
print(f"replies: {len(steps) - len(differ)} of {len(steps)} steps the same; "
      f"lookup {sys.argv[3]}: {s / p:.2f}x the plain decode tok/s")
for k in differ[:5]:
    print("differs:", k, steps[k])
sys.exit(1 if differ else 0)
PY
