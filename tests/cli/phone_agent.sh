#!/usr/bin/env bash
# phone-agent-tiny (models/phone-agent-tiny, trained by tools/train_phone_agent.py) on the
# simulated phone through `nibble agent -m`: its f32 GGUF and its Hugging Face folder give
# the same reply at every step (the two exports, tokenizer and chat template agree end to
# end), and it acts: at least PHONE_AGENT_MIN (0.6) of tasks.json's episodes end done, and
# at least PHONE_AGENT_HELD_MIN (0.88) of 200 held-out variants (`--dump-tasks 200 --seed 2`,
# never trained on; issue 18 asks for >= 90%). The committed weights solve 90.5% of those
# held-out variants here (90.4% over 5 runs) and 75% of tasks.json in 2 runs: every toggle,
# setting and switching off an alarm, messaging; not yet (un)favouriting a contact (see
# models/phone-agent-tiny/README.md); the bars are a little below what they pass here so
# that another CPU's float rounding does not fail them. With tools offered and tool_choice
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

# check NAME FILE EPISODES MIN: the -o json of one build: EPISODES episodes, success >= MIN
check() {
  local got
  got=$("$py" - "$2" "$3" "$4" <<'PYEOF' 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
episodes, least = int(sys.argv[2]), float(sys.argv[3])
assert len(j) == 1, j
b = j[0]
assert b["episodes"] == episodes and sum(b["outcomes"].values()) == episodes, b
assert b["success_rate"] >= least, (b["success_rate"], b["outcomes"])
assert b["outcomes"]["done"] == round(b["success_rate"] * episodes), b
print("ok")
print(f"# success {b['success_rate']:.3f} {b['outcomes']}")
PYEOF
)
  case "$got" in ok*) ok; echo "$got" | sed -n "2s/^# /# $1: /p" ;; *) bad "$1: $got" ;; esac
}

PHONE_AGENT_MIN=${PHONE_AGENT_MIN:-0.6}
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
PHONE_AGENT_HELD_MIN=${PHONE_AGENT_HELD_MIN:-0.88}
if "$bin" agent --dump-tasks 200 --seed 2 --out "$tmp/held.json" 2>"$tmp/err" &&
   "$bin" agent --tasks "$tmp/held.json" -m "f32=$gguf@source" -t 2 -c 2048 --runs 1 -o json \
     >"$tmp/held-out.json" 2>"$tmp/err"; then
  check "held-out (seed 2, 200 variants)" "$tmp/held-out.json" 200 "$PHONE_AGENT_HELD_MIN"
else bad "held-out: exit $?: $(cat "$tmp/err")"; fi
# the same 200 variants as tool calls through the server, tool_choice required and auto, at
# the agent's default max tokens: at least PHONE_AGENT_TOOLS_MIN (0.85), and within 2
# points of the JSON form above (issue 34: every call came out `back` before, the budget's
# closing rule forcing the cheapest tool from the first token)
PHONE_AGENT_TOOLS_MIN=${PHONE_AGENT_TOOLS_MIN:-0.85}
for form in tools tools-auto; do
  if "$bin" agent --tasks "$tmp/held.json" -m "$form=$gguf@source" -t 2 -c 2048 --runs 1 \
       --format "$form" -o json >"$tmp/held-$form.json" 2>"$tmp/err"; then
    check "held-out, --format $form" "$tmp/held-$form.json" 200 "$PHONE_AGENT_TOOLS_MIN"
    got=$("$py" -c "
import json, sys
a = json.load(open('$tmp/held-out.json'))[0]['success_rate']
b = json.load(open('$tmp/held-$form.json'))[0]['success_rate']
assert abs(a - b) <= 0.02 + 1e-9, (a, b)
print('ok')" 2>&1)
    case "$got" in ok*) ok ;; *) bad "$form against json_object: $got" ;; esac
  else bad "held-out $form: exit $?: $(cat "$tmp/err")"; fi
done
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
