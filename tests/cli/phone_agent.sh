#!/usr/bin/env bash
# phone-agent-tiny (models/phone-agent-tiny, trained by tools/train_phone_agent.py) acts on
# the simulated phone: `nibble agent` with the f32 GGUF (weights as stored, @source) solves
# at least 90% of data/agent/tasks.json's episodes over 3 runs (forced JSON actions), and
# so does its Hugging Face folder (1 run); with tool calls (--format tools, the Hermes
# <tool_call> form the model was also trained on) every reply is a valid action. A model
# that lost its weights, its tokenizer or its chat template fails these.
. "$(dirname "$0")/../helpers/serve_common.sh"

src="${NIBBLE_SOURCE_DIR:?}"
tasks="$src/data/agent/tasks.json"
dir="$src/models/phone-agent-tiny"
gguf="$dir/phone-agent-tiny-f32.gguf"
if [ ! -f "$gguf" ] || [ ! -f "$dir/hf/model.safetensors" ]; then
  echo "phone-agent-tiny not found: skipped"
  exit 0
fi

# check NAME FILE RUNS MIN: the -o json of one build: RUNS x 10 episodes, success >= MIN
check() {
  local got
  got=$("$py" - "$2" "$3" "$4" <<'PYEOF' 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
runs, least = int(sys.argv[2]), float(sys.argv[3])
assert len(j) == 1, j
b = j[0]
assert b["episodes"] == 10 * runs and sum(b["outcomes"].values()) == 10 * runs, b
assert b["success_rate"] >= least, (b["success_rate"], b["outcomes"], b["tasks"])
assert b["outcomes"]["done"] == round(b["success_rate"] * 10 * runs), b
print("ok")
PYEOF
)
  if [ "$got" = ok ]; then ok; else bad "$1: $got"; fi
}

if "$bin" agent --tasks "$tasks" -m "f32=$gguf@source" -t 2 -c 2048 --runs 3 -o json \
     --trace "$tmp/f32.jsonl" >"$tmp/f32.json" 2>"$tmp/err"; then
  check "f32 gguf" "$tmp/f32.json" 3 0.9
  # the trace: every step's reply parsed as an action
  got=$("$py" - "$tmp/f32.jsonl" <<'PYEOF' 2>&1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) >= 30 * 3, len(lines)
bad = [l for l in lines if l["action"] is None]
assert len(bad) <= 3, bad[:3]
print("ok")
PYEOF
)
  if [ "$got" = ok ]; then ok; else bad "f32 trace: $got"; fi
else bad "f32 gguf: exit $?: $(cat "$tmp/err")"; fi

if "$bin" agent --tasks "$tasks" -m "hf=$dir/hf@source" -t 2 -c 2048 --runs 1 -o json \
     >"$tmp/hf.json" 2>"$tmp/err"; then
  check "hf folder" "$tmp/hf.json" 1 0.9
else bad "hf folder: exit $?: $(cat "$tmp/err")"; fi

if "$bin" agent --tasks "$tasks" -m "tools=$gguf@source" -t 2 -c 2048 --runs 1 --format tools \
     --max-tokens 96 -o json --trace "$tmp/tools.jsonl" >"$tmp/tools.json" 2>"$tmp/err"; then
  check "tool calls" "$tmp/tools.json" 1 "${PHONE_AGENT_TOOLS_MIN:-0.9}"
else bad "tool calls: exit $?: $(cat "$tmp/err")"; fi

echo "phone_agent: $pass passed, $fail failed"
[ $fail -eq 0 ]
