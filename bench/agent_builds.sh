#!/usr/bin/env bash
# bench/agent_builds.sh — issue 18's table: does each build of phone-agent-tiny still finish
# the task? Builds: f32 (the GGUF as stored), nibble's w8a16, w4a16, w4a16 with GPTQ, w4a8
# (`nibble quantize`), the ladder's recipes with GPTQ (RECIPES, default "balanced q5 q6";
# balanced is the default build), and llama.cpp's LLAMA_TYPES (default "Q4_K_M Q4_0") of
# the same GGUF (llama-quantize,
# served by llama-server --jinja with the model's own chat template). Every build plays
# every task RUNS times, interleaved (`nibble agent`), and the study's table is printed;
# OUT keeps the builds, the table (table.txt) and the traces (traces.jsonl).
#
#   bench/agent_builds.sh [TASKS]    (default data/agent/tasks.json)
# env: NIBBLE_BIN (build/release/nibble), MODEL (models/phone-agent-tiny/phone-agent-tiny-f32.gguf),
#      RUNS (5), THREADS (2), OUT (/tmp/agent-builds), LLAMA_QUANTIZE, LLAMA_SERVER (the
#      llama.cpp binaries, built outside the repo; without them the llama.cpp rows are left out)
set -eu
cd "$(dirname "$0")/.."
bin="${NIBBLE_BIN:-build/release/nibble}"
model="${MODEL:-models/phone-agent-tiny/phone-agent-tiny-f32.gguf}"
tasks="${1:-data/agent/tasks.json}"
runs="${RUNS:-5}"
threads="${THREADS:-2}"
out="${OUT:-/tmp/agent-builds}"
lq="${LLAMA_QUANTIZE:-}"
ls_bin="${LLAMA_SERVER:-}"
mkdir -p "$out"
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done' EXIT

# calibration text for GPTQ: chat-format steps of variants neither trained on (seed 1) nor
# held out (seed 2)
"$bin" agent --dump-trajectories 40 --seed 3 --out "$out/calib.jsonl" 2>/dev/null
python3 - "$out/calib.jsonl" >"$out/calib.txt" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)["messages"]
    print(m[1]["content"] + "\n" + m[2]["content"])
EOF

builds=(-m "f32=$model@source")
for p in w8a16 w4a16 w4a8; do
  "$bin" quantize -m "$model" --path "$p" -q -t "$threads" -o "$out/$p.nib" >/dev/null
  builds+=(-m "$p=$out/$p.nib")
done
"$bin" quantize -m "$model" --path w4a16 --calib "$out/calib.txt" --gptq -q -t "$threads" \
  -o "$out/w4a16-gptq.nib" >/dev/null
builds+=(-m "w4a16-gptq=$out/w4a16-gptq.nib")
# the ladder's recipes as the default build makes them (w4a8, GPTQ act-order on the same
# calibration text; docs/quantization.md, "The ladder"): balanced is the default
for r in ${RECIPES-balanced q5 q6}; do
  "$bin" quantize -m "$model" --path w4a8 --recipe "$r" --calib "$out/calib.txt" --gptq \
    --act-order -q -t "$threads" -o "$out/$r.nib" >/dev/null
  builds+=(-m "$r=$out/$r.nib")
done

servers=()
if [ -n "$lq" ] && [ -n "$ls_bin" ]; then
  for q in ${LLAMA_TYPES-Q4_K_M Q4_0}; do
    "$lq" "$model" "$out/$q.gguf" "$q" "$threads" >"$out/$q.quantize.log" 2>&1
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$ls_bin" -m "$out/$q.gguf" --jinja -c 2048 -np 1 -t "$threads" --host 127.0.0.1 --port "$port" \
      >"$out/$q.server.log" 2>&1 &
    pids="$pids $!"
    for _ in $(seq 1 300); do
      curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
      sleep 0.2
    done
    servers+=(--server "llama-$q=http://127.0.0.1:$port")
  done
else
  echo "LLAMA_QUANTIZE / LLAMA_SERVER not set: no llama.cpp builds" >&2
fi

"$bin" agent --tasks "$tasks" "${builds[@]}" "${servers[@]}" -t "$threads" -c 2048 --runs "$runs" \
  --trace "$out/traces.jsonl" | tee "$out/table.txt"
ls -l "$out"/*.nib "$out"/*.gguf 2>/dev/null || true
