#!/usr/bin/env bash
# nibble agent: the scripted policies end every task of data/agent/tasks.json in their
# class (text table and -o json); the loop runs end to end against `nibble serve` on
# kjv-7m (forced JSON via response_format, and tool calls): the JSON output's shape, the
# outcome counts, one trace line per step with the outcome on the last, two builds
# interleaved with identical greedy outcomes; trajectories are chat-format lines that
# depend on the seed only; errors name what is wrong. kjv-7m solves no task: what is
# asserted is the loop, not the model.
. "$(dirname "$0")/../helpers/serve_common.sh"

src="${NIBBLE_SOURCE_DIR:?}"
tasks="$src/data/agent/tasks.json"
CLASSES='["done", "done_then_reversed", "wrong_app", "looping", "step_limit", "invalid_action", "incomplete"]'

# pycheck NAME FILE PYTHON: run a Python check over j (FILE's JSON); it prints "ok" or why not
pycheck() {
  local name="$1" file="$2" expr="$3" got
  got=$("$py" - "$file" <<PYEOF 2>&1
import json, sys
j = json.load(open(sys.argv[1]))
CLASSES = $CLASSES
$expr
PYEOF
)
  if [ "$got" = ok ]; then ok; else bad "$name: $got"; fi
}
# pylines NAME FILE PYTHON: the same over the JSON lines of FILE (as `lines`)
pylines() {
  local name="$1" file="$2" expr="$3" got
  got=$("$py" - "$file" <<PYEOF 2>&1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
$expr
PYEOF
)
  if [ "$got" = ok ]; then ok; else bad "$name: $got"; fi
}

# ---------------------------------------------------------------- scripted policies
for pc in scripted-correct:done scripted-reverse:done_then_reversed scripted-loop:looping \
          scripted-invalid-json:invalid_action scripted-wrong-app:wrong_app scripted-wander:step_limit; do
  p=${pc%%:*} c=${pc#*:}
  if "$bin" agent --tasks "$tasks" --policy "$p" --runs 3 -o json >"$tmp/$p.json" 2>"$tmp/err"; then
    pycheck "$p" "$tmp/$p.json" "
assert len(j) == 1 and j[0]['build'] == '$p', j
o = j[0]['outcomes']
assert sorted(o) == sorted(CLASSES), o
assert o['$c'] == 30 and sum(o.values()) == 30, o
assert j[0]['success_rate'] == (1.0 if '$c' == 'done' else 0.0), j[0]['success_rate']
assert len(j[0]['tasks']) == 10 and all(t == {'$c': 3} for t in j[0]['tasks'].values()), j[0]['tasks']
print('ok')"
  else bad "$p: exit $?: $(cat "$tmp/err")"; fi
done
"$bin" agent --tasks "$tasks" --policy scripted-reverse >"$tmp/table" 2>/dev/null
if grep -q '^scripted-reverse .* 0% *0 *10 ' "$tmp/table" &&
   grep -q '^  wifi_on  *scripted-reverse=done_then_reversed:1$' "$tmp/table"; then ok
else bad "text table: $(cat "$tmp/table")"; fi

# ---------------------------------------------------------------- trajectories
"$bin" agent --dump-trajectories 30 --seed 5 --out "$tmp/t5a.jsonl" 2>/dev/null
"$bin" agent --dump-trajectories 30 --seed 5 >"$tmp/t5b.jsonl" 2>/dev/null
"$bin" agent --dump-trajectories 30 --seed 6 --out "$tmp/t6.jsonl" 2>/dev/null
if cmp -s "$tmp/t5a.jsonl" "$tmp/t5b.jsonl" && ! cmp -s "$tmp/t5a.jsonl" "$tmp/t6.jsonl"; then ok
else bad "trajectories: not a function of the seed"; fi
pylines "trajectory lines" "$tmp/t5a.jsonl" '
assert len(lines) > 100, len(lines)
ends = 0
for l in lines:
    m = l["messages"]
    assert [x["role"] for x in m] == ["system", "user", "assistant"], m
    assert m[1]["content"].startswith("Task: ") and "\nScreen:\n[" in m[1]["content"], m[1]
    a = json.loads(m[2]["content"])
    assert a["action"] in ("tap", "type", "back", "home", "scroll", "task_complete"), a
    ends += a["action"] == "task_complete"
assert ends == 30, ends
assert len({l["task"] for l in lines}) == 30
print("ok")'

# generated variants as a task file (a held-out set): the scripted policies keep their classes
"$bin" agent --dump-tasks 20 --seed 3 --out "$tmp/gen.json" 2>/dev/null
"$bin" agent --tasks "$tmp/gen.json" --policy scripted-correct -o json >"$tmp/gen-c.json" 2>/dev/null
"$bin" agent --tasks "$tmp/gen.json" --policy scripted-reverse -o json >"$tmp/gen-r.json" 2>/dev/null
pycheck "generated tasks" "$tmp/gen-c.json" "
assert j[0]['episodes'] == 20 and j[0]['success_rate'] == 1.0, j[0]
print('ok')"
pycheck "generated tasks reversed" "$tmp/gen-r.json" "
assert j[0]['outcomes']['done_then_reversed'] == 20, j[0]['outcomes']
print('ok')"

# ---------------------------------------------------------------- errors
"$bin" agent --tasks "$tasks" --policy scripted-nothing 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "unknown 'scripted-nothing'" "$tmp/err"; then ok; else bad "unknown policy: $rc $(cat "$tmp/err")"; fi
echo '{"tasks":[{"id":"t","app":"settings","instructions":["x"],"success":[{"toggle":"wifi","is":true}],"colour":1}]}' >"$tmp/bad.json"
"$bin" agent --tasks "$tmp/bad.json" --policy scripted-correct 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "task 't': unknown key \"colour\"" "$tmp/err"; then ok; else bad "bad task file: $rc $(cat "$tmp/err")"; fi
"$bin" agent --tasks "$tasks" --server http://127.0.0.1:1 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "cannot connect" "$tmp/err"; then ok; else bad "no server: $rc $(cat "$tmp/err")"; fi
"$bin" agent --tasks "$tasks" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ]; then ok; else bad "no build: $rc"; fi

# ---------------------------------------------------------------- against nibble serve
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then
  echo "SKIP the server part (no $gguf)"
  echo "agent: $pass passed, $fail failed"
  [ $fail -eq 0 ]
  exit
fi
SERVE_ARGS=(-c 2048 --parallel 2)
start_server kjv
if "$bin" agent --tasks "$tasks" --server "$url" --runs 1 --max-tokens 24 -o json --trace "$tmp/trace.jsonl" \
     >"$tmp/srv.json" 2>"$tmp/err"; then
  pycheck "server json" "$tmp/srv.json" "
assert len(j) == 1, j
b = j[0]
assert b['build'] == 'kjv-7m-f32.gguf', b['build']
assert 0 <= b['success_rate'] <= 1 and b['episodes'] == 10, b
assert sorted(b['outcomes']) == sorted(CLASSES) and sum(b['outcomes'].values()) == 10, b['outcomes']
assert b['decode_tok_s'] > 0 and b['decode_tok_s_from'] == 'server timings', b
print('ok')"
  pylines "trace" "$tmp/trace.jsonl" '
ended = [l for l in lines if l["outcome"] is not None]
assert len(ended) == 10, len(ended)
assert len({l["task"] for l in lines}) == 10 and {l["task"] for l in ended} == {l["task"] for l in lines}
for l in lines:
    assert l["build"] == "kjv-7m-f32.gguf" and l["run"] == 0 and l["step"] >= 1, l
    assert l["prompt"].startswith("Task: ") and "\nScreen:\n[" in l["prompt"], l
    assert l["step"] > 1 or "\nScreen:\n[home > home]\n" in l["prompt"], l
    assert isinstance(l["reply"], str), l
    assert l["action"] is not None or (l["outcome"] == "invalid_action" and l["note"]), l
print("ok")'
else bad "server run: exit $?: $(cat "$tmp/err")"; fi
# two builds (the same server under two names), interleaved, two runs: the same greedy outcomes
if "$bin" agent --tasks "$tasks" --server "a=$url" --server "b=$url/v1" --runs 2 --max-tokens 24 -o json \
     >"$tmp/two.json" 2>"$tmp/err"; then
  pycheck "two builds" "$tmp/two.json" "
assert [b['build'] for b in j] == ['a', 'b'], [b['build'] for b in j]
assert all(b['episodes'] == 20 for b in j), j
assert j[0]['tasks'] == j[1]['tasks'] and j[0]['outcomes'] == j[1]['outcomes'], (j[0]['tasks'], j[1]['tasks'])
print('ok')"
else bad "two builds: exit $?: $(cat "$tmp/err")"; fi
# tool calls: every reply is one of the six functions, turned into an action object
# (64 tokens: kjv-7m spells a call about a byte a token, so scroll's required argument does
# not fit; closing takes the cheapest function and the call still completes)
if "$bin" agent --tasks "$tasks" --server "$url" --format tools --max-tokens 64 -o json --trace "$tmp/tools.jsonl" \
     >"$tmp/tools.json" 2>"$tmp/err"; then
  pycheck "tools" "$tmp/tools.json" "
assert sum(j[0]['outcomes'].values()) == 10, j[0]['outcomes']
print('ok')"
  pylines "tool replies" "$tmp/tools.jsonl" '
for l in lines:
    r = json.loads(l["reply"])
    assert r["action"] in ("tap", "type", "back", "home", "scroll", "task_complete"), r
print("ok")'
else bad "tools: exit $?: $(cat "$tmp/err")"; fi
stop_server
if [ "$rc" -eq 0 ]; then ok; else bad "server exit $rc"; fi
# -m: the command starts (and stops) a server of its own per build
size=$(stat -c %s "$gguf")
if "$bin" agent --tasks "$tasks" -m "kjv=$gguf@source" -t 1 -c 2048 --max-tokens 8 -o json >"$tmp/m.json" 2>"$tmp/err"; then
  pycheck "-m" "$tmp/m.json" "
assert [b['build'] for b in j] == ['kjv'] and j[0]['bytes'] == $size and j[0]['episodes'] == 10, j
assert j[0]['url'].startswith('http://127.0.0.1:'), j[0]['url']
print('ok')"
  if pgrep -f "serve -m $gguf --port 0 --parallel 1" >/dev/null; then bad "-m: its server still runs"; else ok; fi
else bad "-m: exit $?: $(cat "$tmp/err")"; fi
"$bin" agent --tasks "$tasks" -m "$tmp/none.gguf" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "none.gguf: no such model" "$tmp/err"; then ok; else bad "-m missing: $rc $(cat "$tmp/err")"; fi

echo "agent: $pass passed, $fail failed"
[ $fail -eq 0 ]
