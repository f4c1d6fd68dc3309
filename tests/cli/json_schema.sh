#!/usr/bin/env bash
# nibble run --json-schema: the output is one JSON object that keeps to the schema, checked
# by an independent validator (ajv, pinned in tests/npm: tests/npm/validate_json.js).
#  - kjv-7m (a Bible model that never writes JSON on its own): five schemas (required keys,
#    enums, arrays with bounds, nesting, anyOf by type, a local $ref), greedy and sampled at
#    temperature 1 (4 seeds), with room (-n 96) and a tight budget (-n 32; 6 for {}): every
#    output validates and ends at its end-of-generation token;
#  - phone-agent-tiny (writes JSON actions): on 24 held-out steps the constrained greedy
#    output validates, and equals the free output wherever the free output already keeps
#    to the schema (the constraint changes nothing the model did right);
#  - nibble chat -j: three answers of one conversation, each valid;
#  - a budget too small for the schema's shortest object: the output is cut, and said to be;
#  - errors: a schema that is not JSON, one outside the subset, a root that is no object,
#    a missing file, --ignore-eos.
# Needs node and `npm ci` in tests/npm; without them skipped, except under CI=true.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:?}"
src="${NIBBLE_SOURCE_DIR:?}"
npm_dir="$src/tests/npm"
if ! command -v node >/dev/null || [ ! -d "$npm_dir/node_modules/ajv" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node or tests/npm/node_modules/ajv missing (npm ci in tests/npm)"; exit 1; fi
  echo "SKIP: node or tests/npm/node_modules/ajv missing (run npm ci in tests/npm)"; exit 0
fi
kjv="$models/kjv-7m/kjv-7m-f32.gguf"
agent="$src/models/phone-agent-tiny/phone-agent-tiny-f32.gguf"
[ -f "$kjv" ] || { echo "SKIP: no $kjv"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

cat >"$tmp/s1.json" <<'J'
{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
 "required": ["name", "age"]}
J
cat >"$tmp/s2.json" <<'J'
{"type": "object", "properties": {"book": {"enum": ["Genesis", "Exodus", "Psalms"]},
 "chapter": {"type": "integer"}, "verses": {"type": "array", "items": {"type": "string"},
 "minItems": 1, "maxItems": 3}}, "required": ["book", "verses"],
 "additionalProperties": false}
J
cat >"$tmp/s3.json" <<'J'
{"type": "object", "properties": {"who": {"type": "object", "properties":
 {"first": {"type": "string"}, "tribe": {"type": ["string", "null"]}}, "required": ["first"]},
 "ok": {"type": "boolean"}, "n": {"anyOf": [{"type": "number"}, {"type": "string"}]}},
 "required": ["who", "ok", "n"]}
J
cat >"$tmp/s4.json" <<'J'
{"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
 "next": {"$ref": "#/$defs/node"}}, "required": ["v"]}}, "$ref": "#/$defs/node"}
J
echo '{}' >"$tmp/s5.json"

# kjv-7m: every output validates and stops at its end of generation
outs=()
for s in 1 2 3 4 5; do
  tight=32; [ "$s" = 5 ] && tight=6
  for args in "-n 96 --temp 0" "-n 96 --temp 1 -s 1" "-n 96 --temp 1 -s 2" "-n 96 --temp 1 -s 3" \
              "-n 96 --temp 1 -s 4" "-n $tight --temp 0" "-n $tight --temp 1 -s 5"; do
    o="$tmp/kjv-s$s-$(printf '%s' "$args" | tr -c 'a-z0-9' _).out"
    # shellcheck disable=SC2086
    if ! "$bin" run -m "$kjv" --path source -p "And God said" $args -t 2 \
         --json-schema "$tmp/s$s.json" >"$o" 2>"$o.err"; then
      bad "kjv s$s $args: exit status"; cat "$o.err"; continue
    fi
    grep -q "it is cut" "$o.err" && { bad "kjv s$s $args: cut"; tail -2 "$o.err"; } || ok
    outs+=("$o")
  done
  # shellcheck disable=SC2046
  if node "$npm_dir/validate_json.js" "$tmp/s$s.json" $(ls "$tmp"/kjv-s$s-*.out) >"$tmp/v$s.txt"; then ok
  else bad "kjv s$s: ajv"; grep invalid "$tmp/v$s.txt"; fi
done
echo "# kjv-7m: ${#outs[@]} outputs over 5 schemas"
# a budget too small: cut, and stderr says so
"$bin" run -m "$kjv" --path source -p "And God said" -n 8 -t 2 -j "$tmp/s2.json" >/dev/null 2>"$tmp/cut.err"
grep -q "it is cut" "$tmp/cut.err" && ok || { bad "-n 8: no word of the cut output"; cat "$tmp/cut.err"; }
# the schema given as text, not a file: the same output
"$bin" run -m "$kjv" --path source -p "And God said" -n 96 -t 2 -j "$(cat "$tmp/s1.json")" \
  >"$tmp/inline.out" 2>/dev/null
cmp -s "$tmp/inline.out" "$tmp/kjv-s1-_n_96___temp_0.out" && ok || bad "inline schema: output differs from the file's"

# phone-agent-tiny: greedy with the schema equals greedy without wherever that validates
if [ -f "$agent" ]; then
  cat >"$tmp/action.json" <<'J'
{"type": "object", "properties": {
  "action": {"enum": ["tap", "type", "back", "home", "scroll", "task_complete"]},
  "id": {"type": "string"}, "text": {"type": "string"}, "direction": {"enum": ["up", "down"]}},
 "required": ["action"], "additionalProperties": false}
J
  "$bin" agent --dump-trajectories 8 --seed 7 --out "$tmp/traj.jsonl" 2>/dev/null
  same=0; free_ok=0; n=0
  while IFS= read -r line; do
    n=$((n+1))
    printf '%s' "$line" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"messages": d["messages"][:-1]}))' >"$tmp/ctx.json"
    "$bin" template -m "$agent" -c "$tmp/ctx.json" >"$tmp/prompt.txt" 2>/dev/null || { bad "template step $n"; continue; }
    "$bin" run -m "$agent" --path source -f "$tmp/prompt.txt" -n 48 -t 2 >"$tmp/free$n.out" 2>/dev/null
    "$bin" run -m "$agent" --path source -f "$tmp/prompt.txt" -n 48 -t 2 -j "$tmp/action.json" \
      >"$tmp/cons$n.out" 2>/dev/null || bad "agent step $n: exit status"
    if node "$npm_dir/validate_json.js" "$tmp/action.json" "$tmp/free$n.out" >/dev/null; then
      free_ok=$((free_ok+1))
      cmp -s "$tmp/free$n.out" "$tmp/cons$n.out" && same=$((same+1)) || {
        echo "  step $n: free  $(cat "$tmp/free$n.out")"; echo "  step $n: cons  $(cat "$tmp/cons$n.out")"; }
    fi
  done <"$tmp/traj.jsonl"
  echo "# phone-agent-tiny: $n steps, free output valid on $free_ok, constrained equal to it on $same"
  [ "$n" -ge 20 ] && [ "$free_ok" -ge 10 ] && ok || bad "agent: too few steps ($n) or valid free outputs ($free_ok)"
  [ "$same" = "$free_ok" ] && ok || bad "agent: the constraint changed $((free_ok - same)) valid outputs"
  # shellcheck disable=SC2046
  node "$npm_dir/validate_json.js" "$tmp/action.json" $(ls "$tmp"/cons*.out) >"$tmp/va.txt" && ok || {
    bad "agent: constrained outputs fail ajv"; grep invalid "$tmp/va.txt"; }
fi

# nibble chat -j: every answer of a conversation keeps to the schema (the grammar starts
# again each turn)
if [ -f "$agent" ]; then
  printf 'Turn Wi-Fi off\nNow turn Bluetooth on\nGo home\n' | "$bin" chat -m "$agent" --path source \
    -t 2 -n 48 -j "$tmp/action.json" >"$tmp/chat.out" 2>"$tmp/chat.err" || bad "chat -j: exit status"
  python3 - "$tmp/chat.out" "$tmp" <<'PY' && ok || bad "chat -j: not three JSON answers"
import json, sys
text, dec, i, n = open(sys.argv[1]).read(), json.JSONDecoder(), 0, 0
while True:
    while i < len(text) and text[i].isspace(): i += 1
    if i == len(text): break
    v, i = dec.raw_decode(text, i)
    n += 1
    open(f"{sys.argv[2]}/chat{n}.json", "w").write(json.dumps(v))
sys.exit(0 if n == 3 else 1)
PY
  node "$npm_dir/validate_json.js" "$tmp/action.json" "$tmp"/chat[0-9].json >"$tmp/vc.txt" && ok || {
    bad "chat -j: ajv"; cat "$tmp/vc.txt" "$tmp/chat.out"; }
fi

# errors: named, exit 1, no crash
err() { # name, substring, args...
  local name="$1" want="$2"; shift 2
  "$bin" run -m "$kjv" --path source -p "And" -n 8 "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ "$rc" != 1 ] || ! grep -q -- "$want" "$tmp/err"; then
    bad "$name: exit $rc, stderr:"; cat "$tmp/err"
  else ok; fi
}
err "not json" "not valid JSON" -j '{"type": '
err "outside the subset" "pattern" -j '{"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}'
err "root no object" "must be an object" -j '{"type": "array"}'
err "missing file" "no/such/schema.json" -j no/such/schema.json
err "ignore-eos" "drop --ignore-eos" -j '{}' --ignore-eos
echo "json_schema: $pass passed, $fail failed"
[ "$fail" = 0 ]
