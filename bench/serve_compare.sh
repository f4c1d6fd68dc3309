#!/usr/bin/env bash
# bench/serve_compare.sh — aggregate decode throughput of `nibble serve` against
# llama.cpp's `llama-server -np N -cb` on the same CPU, side by side in one run:
# both servers up at once (each idle while the other is measured), the same client
# (bench/serve_load.sh's: streaming /v1/completions, temperature 0.8, a seed per request)
# at each concurrency, in interleaved passes; prints best and range per server and
# concurrency, and each server's speed-up over its own single stream.
# Usage: bench/serve_compare.sh NIBBLE_MODEL LLAMA_GGUF [streams=1,4,16] [tokens=128]
#          [passes=2] [threads=2]
#   NIBBLE_MODEL: what `nibble serve -m` opens (a .nib build, or a GGUF with PATH_ARG=...);
#   LLAMA_GGUF: the llama.cpp file (e.g. the Q4_K_M of the same GGUF).
#   LLAMA_SERVER=path/to/llama-server, NIBBLE=path/to/nibble. Loopback only; stops both.
# Run on a quiet machine: a throughput figure is only a figure beside the other server's
# measured the same way in the same run.
set -euo pipefail
nmodel=${1:?usage: bench/serve_compare.sh NIBBLE_MODEL LLAMA_GGUF [streams] [tokens] [passes] [threads]}
lmodel=${2:?usage: bench/serve_compare.sh NIBBLE_MODEL LLAMA_GGUF [streams] [tokens] [passes] [threads]}
streams=${3:-1,4,16}
tokens=${4:-128}
passes=${5:-2}
threads=${6:-2}
nibble=${NIBBLE:-build/release/nibble}
llama=${LLAMA_SERVER:-llama-server}
here=$(cd "$(dirname "$0")" && pwd)
maxs=1
for s in ${streams//,/ }; do [ "$s" -gt "$maxs" ] && maxs=$s; done
ctx=$((tokens + 128)) # per slot: a short prompt and the answer
tmp=$(mktemp -d)
npid="" lpid=""
cleanup() {
  for p in $npid $lpid; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { # url pid log
  for _ in $(seq 1 1200); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { cat "$3"; return 1; }
    sleep 0.25
  done
  echo "server at $1 did not come up"; cat "$3"; return 1
}

np=$(free_port)
"$nibble" serve -m "$nmodel" ${PATH_ARG:+--path "$PATH_ARG"} --port "$np" -t "$threads" \
  --parallel "$maxs" -c "$ctx" --queue 1024 2>"$tmp/nibble.log" &
npid=$!
lp=$(free_port)
"$llama" -m "$lmodel" --host 127.0.0.1 --port "$lp" -t "$threads" -tb "$threads" -np "$maxs" -cb \
  -c $((ctx * maxs)) --no-webui 2>"$tmp/llama.log" >&2 &
lpid=$!
wait_up "http://127.0.0.1:$np" "$npid" "$tmp/nibble.log"
wait_up "http://127.0.0.1:$lp" "$lpid" "$tmp/llama.log"

: >"$tmp/rows"
for ((p = 1; p <= passes; p++)); do
  for s in ${streams//,/ }; do
    reqs=$((s >= 4 ? 2 : 4)) # requests per client: enough for a steady rate, bounded time
    for srv in nibble llama; do
      port=$np
      [ "$srv" = llama ] && port=$lp
      line=$(URL="http://127.0.0.1:$port" bash "$here/serve_load.sh" - "$s" "$reqs" "$tokens" |
        sed -n 1p)
      echo "pass $p  $srv  streams $s: $line" >&2
      rate=$(sed -n 's/.*: \([0-9.]*\) tok\/s aggregate.*/\1/p' <<<"$line")
      errs=$(sed -n 's/.*errors \([0-9]*\),.*/\1/p' <<<"$line")
      echo "$srv $s $rate $errs" >>"$tmp/rows"
    done
  done
done

python3 - "$tmp/rows" <<'PY'
import sys
rows = {}
for ln in open(sys.argv[1]):
    srv, s, rate, errs = ln.split()
    rows.setdefault((srv, int(s)), []).append((float(rate or 0), int(errs or 0)))
streams = sorted({s for _, s in rows})
print("| streams | nibble tok/s best (range) | llama-server tok/s best (range) | nibble / llama (best) |")
print("|---|---|---|---|")
best = {}
for s in streams:
    cells = []
    for srv in ("nibble", "llama"):
        v = rows.get((srv, s), [])
        r = [x for x, _ in v]
        e = sum(x for _, x in v)
        best[(srv, s)] = max(r) if r else 0
        cells.append(f"{max(r):.1f} ({min(r):.1f}-{max(r):.1f})" + (f", {e} errors" if e else ""))
    ratio = best[("nibble", s)] / best[("llama", s)] if best[("llama", s)] else float("nan")
    print(f"| {s} | {cells[0]} | {cells[1]} | {ratio:.2f}x |")
one = min(streams)
for srv in ("nibble", "llama"):
    if best.get((srv, one)):
        print(f"{srv}: " + ", ".join(f"{s} streams {best[(srv, s)] / best[(srv, one)]:.2f}x"
                                     for s in streams if s != one) + f" its {one}-stream best")
PY
