#!/usr/bin/env bash
# bench/agent_prompts.sh — the phone-agent-tiny fidelity inputs of docs/quantization.md and
# docs/agent.md, made reproducibly:
#   OUT/prompts95.txt  every 5th step of `nibble agent --dump-trajectories 100 --seed 2`
#                      (held-out variants), system + user rendered by the model's chat
#                      template with the generation prompt, as `ids:` lines (`nibble eval --prompts`)
#   OUT/calib.txt      the calibration text of bench/agent_builds.sh (40 trajectories of seed 3:
#                      neither trained on nor held out), for GPTQ and llama-imatrix
#
#   bench/agent_prompts.sh [OUT]     (default /tmp/agent-prompts)
# env: NIBBLE_BIN (build/release/nibble), MODEL (models/phone-agent-tiny/phone-agent-tiny-f32.gguf),
#      EVERY (5)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${NIBBLE_BIN:-build/release/nibble}"
model="${MODEL:-models/phone-agent-tiny/phone-agent-tiny-f32.gguf}"
out="${1:-/tmp/agent-prompts}"
every="${EVERY:-5}"
mkdir -p "$out"
"$bin" agent --dump-trajectories 100 --seed 2 --out "$out/held.jsonl" 2>/dev/null
"$bin" agent --dump-trajectories 40 --seed 3 --out "$out/calib.jsonl" 2>/dev/null
python3 - "$out/calib.jsonl" >"$out/calib.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)["messages"]
    print(m[1]["content"] + "\n" + m[2]["content"])
PY
: >"$out/prompts95.txt"
n=0
while IFS= read -r line; do
  if [ $((n % every)) -eq 0 ]; then
    python3 -c 'import json, sys; m = json.loads(sys.argv[1])["messages"]
print(json.dumps({"messages": m[:2], "add_generation_prompt": True}))' "$line" >"$out/ctx.json"
    "$bin" template -m "$model" -c "$out/ctx.json" >"$out/prompt.txt"
    ids=$("$bin" tokenize -m "$model" -f "$out/prompt.txt" --no-add-special | tr ' ' ',')
    echo "ids: $ids" >>"$out/prompts95.txt"
  fi
  n=$((n + 1))
done <"$out/held.jsonl"
rm -f "$out/ctx.json" "$out/prompt.txt"
echo "agent_prompts: $(wc -l <"$out/prompts95.txt") prompts, $(wc -c <"$out/calib.txt") bytes of calibration text in $out" >&2
