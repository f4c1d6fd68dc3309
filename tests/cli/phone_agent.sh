#!/usr/bin/env bash
# phone-agent-tiny (models/phone-agent-tiny, trained by tools/train_phone_agent.py) on the
# simulated phone through `nibble agent -m`: its f32 GGUF and its Hugging Face folder give
# the same reply at every step (the two exports, tokenizer and chat template agree end to
# end), and it acts: at least PHONE_AGENT_MIN (0.4) of its episodes end done. The committed
# weights solve 72% of held-out variants and 56% of data/agent/tasks.json (issue 18 asks
# for 90%: see models/phone-agent-tiny/README.md): every toggle task, not yet the ones that
# copy a time or a name from the instruction; the bar is below what they pass here (0.55)
# so that another CPU's float rounding does not fail it. With tools offered and tool_choice
# auto the model writes the Hermes wrapper on its own and the server returns the call as
# tool_calls (printed).
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

PHONE_AGENT_MIN=${PHONE_AGENT_MIN:-0.4}
if "$bin" agent --tasks "$tasks" -m "f32=$gguf@source" -m "hf=$dir/hf@source" -t 2 -c 2048 \
     --runs 2 -o json --trace "$tmp/both.jsonl" >"$tmp/both.json" 2>"$tmp/err"; then
  got=$("$py" - "$tmp/both.json" "$tmp/both.jsonl" "$PHONE_AGENT_MIN" <<'PYEOF' 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
assert [b["build"] for b in j] == ["f32", "hf"], j
for b in j:
    assert b["episodes"] == 20 and sum(b["outcomes"].values()) == 20, b
    assert b["success_rate"] >= float(sys.argv[3]), (b["build"], b["success_rate"], b["outcomes"])
steps = {}
for line in open(sys.argv[2]):
    l = json.loads(line)
    steps.setdefault((l["run"], l["task"], l["step"]), {})[l["build"]] = l["reply"]
differ = [(k, v) for k, v in steps.items() if len(v) != 2 or v["f32"] != v["hf"]]
assert not differ, differ[:3]
assert j[0]["outcomes"] == j[1]["outcomes"], (j[0]["outcomes"], j[1]["outcomes"])
print("ok")
print(f"# f32 and hf: {len(steps)} steps the same, success {j[0]['success_rate']:.2f} {j[0]['outcomes']}")
PYEOF
)
  case "$got" in ok*) ok; echo "$got" | sed -n 2p ;; *) bad "f32 vs hf: $got" ;; esac
else bad "f32 vs hf: exit $?: $(cat "$tmp/err")"; fi
if "$bin" agent --tasks "$tasks" -m "auto=$gguf@source" -t 2 -c 2048 --runs 1 --format tools-auto \
     --max-tokens 96 -o json --trace "$tmp/auto.jsonl" >"$tmp/auto.json" 2>"$tmp/err"; then
  got=$("$py" - "$tmp/auto.json" "$tmp/auto.jsonl" <<'PYEOF' 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
assert j[0]["episodes"] == 10 and sum(j[0]["outcomes"].values()) == 10, j
lines = [json.loads(l) for l in open(sys.argv[2])]
calls = sum(1 for l in lines if l["action"] is not None)
print("ok")
print(f"# tools, tool_choice auto: {calls} of {len(lines)} replies were actions, outcomes {j[0]['outcomes']}")
PYEOF
)
  case "$got" in ok*) ok; echo "$got" | sed -n 2p ;; *) bad "tools auto: $got" ;; esac
else bad "tools auto: exit $?: $(cat "$tmp/err")"; fi

echo "phone_agent: $pass passed, $fail failed"
[ $fail -eq 0 ]
