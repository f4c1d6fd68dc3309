#!/usr/bin/env bash
# nibble chat renders with the model's own Jinja template (tokenizer_config.json's
# chat_template, GGUF's tokenizer.chat_template) when nibble's interpreter runs it, as
# nibble serve does; --chat-template-file F renders with F's; a template that does not run
# falls back to the built-in family (the model's) or is refused (a file's).
set -u
bin="${NIBBLE_BIN:?}"
hf="${NIBBLE_MODELS_DIR:-}/kjv-7m/hf"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
if [ ! -f "$hf/model.safetensors" ] || [ ! -f "$gguf" ]; then
  echo "kjv-7m not found: skipped"
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
chatml="{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
plain="{{ bos_token }}{% for m in messages %}### {{ m.role | upper }}: {{ m.content }}
{% endfor %}{% if add_generation_prompt %}### ASSISTANT:{% endif %}"
# a copy of kjv-7m's HF directory whose tokenizer_config.json has chat_template T
model_with() { # DIR TEMPLATE
  mkdir -p "$1"
  cp "$hf/config.json" "$hf/tokenizer.model" "$1/"
  ln -s "$hf/model.safetensors" "$1/model.safetensors"
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["chat_template"]=sys.argv[2]; json.dump(c,open(sys.argv[3],"w"))' \
    "$hf/tokenizer_config.json" "$2" "$1/tokenizer_config.json"
}
chat() { # OUT ARGS...: two greedy turns
  local out=$1; shift
  printf 'And God said\nLet there be light\n' | "$bin" chat --path source --temp 0 -n 12 -t 2 "$@" \
    >"$tmp/$out.out" 2>"$tmp/$out.err"
}
model_with "$tmp/chatml" "$chatml"
model_with "$tmp/plain" "$plain"
model_with "$tmp/broken" "{% for m in messages %}<|im_start|>{{ m.role }"
printf '%s' "$chatml" >"$tmp/chatml.jinja"
printf '%s' "$plain" >"$tmp/plain.jinja"

# the built-in ChatML and the model's own ChatML template: the same prompt, the same answers
chat builtin -m "$tmp/chatml" --chat-template chatml
ok test $? -eq 0
ok grep -q "template chatml;" "$tmp/builtin.err"
chat own -m "$tmp/chatml"
ok test $? -eq 0
ok grep -q "template the model's own (Jinja);" "$tmp/own.err"
ok test "$(wc -l < "$tmp/own.out")" -eq 2
ok cmp -s "$tmp/builtin.out" "$tmp/own.out"
ok cmp -s <(grep '^\[' "$tmp/builtin.err") <(grep '^\[' "$tmp/own.err") # the same token counts
# --chat-template-file on a model without a template (the GGUF): the same again
chat file -m "$gguf" --chat-template-file "$tmp/chatml.jinja"
ok test $? -eq 0
ok grep -q "template $tmp/chatml.jinja;" "$tmp/file.err"
ok cmp -s "$tmp/builtin.out" "$tmp/file.out"

# a template no built-in family matches is rendered as written: the first turn's prompt is
# the template's text, token for token (nibble template + nibble tokenize)
chat plain -m "$tmp/plain"
ok test $? -eq 0
ok grep -q "template the model's own (Jinja);" "$tmp/plain.err"
printf '{"messages": [{"role": "user", "content": "And God said"}], "add_generation_prompt": true}' >"$tmp/ctx.json"
"$bin" template -m "$tmp/plain" --context "$tmp/ctx.json" >"$tmp/prompt.txt"
ok grep -q "### USER: And God said" "$tmp/prompt.txt"
n_want=$("$bin" tokenize -m "$tmp/plain" --no-add-special -- "$(cat "$tmp/prompt.txt")" | wc -w)
n_got=$(sed -n 's/^\[0 cached tokens reused, \([0-9]*\) new\]$/\1/p' "$tmp/plain.err" | head -1)
ok test "${n_got:-x}" = "$n_want"
# the same template from a file on the GGUF gives the same answers
chat plainfile -m "$gguf" --chat-template-file "$tmp/plain.jinja"
ok cmp -s "$tmp/plain.out" "$tmp/plainfile.out"
# and --chat-template NAME still picks a built-in family over the model's own
chat named -m "$tmp/plain" --chat-template chatml
ok cmp -s "$tmp/builtin.out" "$tmp/named.out"

# the model's template does not parse: said, and the family it is recognised as renders
chat broken -m "$tmp/broken"
ok test $? -eq 0
ok grep -q "the model's chat template does not run here" "$tmp/broken.err"
ok grep -q "template chatml;" "$tmp/broken.err"
ok cmp -s "$tmp/builtin.out" "$tmp/broken.out"
# a file that does not parse is refused, naming it; so are both options at once
printf '{%% if %%}' >"$tmp/bad.jinja"
chat bad -m "$gguf" --chat-template-file "$tmp/bad.jinja"
ok test $? -eq 1
ok grep -q -- "--chat-template-file $tmp/bad.jinja: " "$tmp/bad.err"
chat both -m "$gguf" --chat-template chatml --chat-template-file "$tmp/chatml.jinja"
ok test $? -eq 1
ok grep -q "not both" "$tmp/both.err"
echo "cli chat_template: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
