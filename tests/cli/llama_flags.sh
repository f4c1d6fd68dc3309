#!/usr/bin/env bash
# The CLI speaks llama.cpp (issue 36): `nibble run` with each of llama.cpp's flags does
# what it should (the GPU and loading ones accepted, one note; -r stops where --stop does;
# -sys renders a chat turn; -cnv hands off to chat), typos get "did you mean", every
# command has --help and `nibble help CMD`, -q/--log-disable leave stderr empty, -v and
# --log-format json, and a cache hit prints no selector explanation.
set -u
bin="${NIBBLE_BIN:?}"
model="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
export NIBBLE_CALIB= # first use without GPTQ: seconds, not a minute
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }
has() { grep -q -- "$2" "$1" || { echo "  $1 lacks '$2':"; cat "$1"; return 1; }; }
lacks() { ! grep -q -- "$2" "$1" || { echo "  $1 has '$2':"; cat "$1"; return 1; }; }
count() { [ "$(grep -c -- "$2" "$1")" = "$3" ] || { echo "  $1: '$2' not $3 times:"; cat "$1"; return 1; }; }

# typos: the nearest command or option
"$bin" rn >"$tmp/o" 2>"$tmp/e"; ok [ $? = 2 ]; ok has "$tmp/e" "did you mean 'run'"
"$bin" cach list >"$tmp/o" 2>"$tmp/e"; ok has "$tmp/e" "did you mean 'cache'"
"$bin" run --temperatur 0.5 >"$tmp/o" 2>"$tmp/e"; ok [ $? = 1 ]
ok has "$tmp/e" "did you mean '--temperature'"
"$bin" run -nlg 99 >"$tmp/o" 2>"$tmp/e"; ok has "$tmp/e" "did you mean '-ngl'"
"$bin" run --reverse-promt x >"$tmp/o" 2>"$tmp/e"; ok has "$tmp/e" "did you mean '--reverse-prompt'"
"$bin" run --bogus-thing >"$tmp/o" 2>"$tmp/e"; ok lacks "$tmp/e" "did you mean"
"$bin" chat --sytem x >"$tmp/o" 2>"$tmp/e"; ok has "$tmp/e" "did you mean '--system'"

# --help on every command `nibble --help` lists, and nibble help CMD
cmds=$("$bin" --help | awk '/^  [a-z-]+  /{print $1}')
ok [ "$(echo "$cmds" | wc -w)" -ge 15 ]
for c in $cmds; do
  "$bin" "$c" --help >"$tmp/h" 2>&1 && grep -qi usage "$tmp/h" && pass=$((pass+1)) \
    || { echo "FAIL: nibble $c --help"; cat "$tmp/h"; fail=$((fail+1)); }
  "$bin" help "$c" >"$tmp/h2" 2>&1 && cmp -s "$tmp/h" "$tmp/h2" && pass=$((pass+1)) \
    || { echo "FAIL: nibble help $c differs from nibble $c --help"; fail=$((fail+1)); }
done
for a in list clear dir; do
  "$bin" cache "$a" --help >"$tmp/h" 2>&1 && grep -qi usage "$tmp/h" && pass=$((pass+1)) \
    || { echo "FAIL: nibble cache $a --help"; cat "$tmp/h"; fail=$((fail+1)); }
done
"$bin" help frobnicate >"$tmp/o" 2>"$tmp/e"; ok [ $? = 2 ]

if [ ! -f "$model" ]; then
  echo "skip the model checks: no $model"
  echo "cli llama_flags: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit
fi
base=(run -m "$model" --path source -p "In the beginning" -n 24 -t 2)
"$bin" "${base[@]}" >"$tmp/ref" 2>"$tmp/ref.err"; ok [ $? = 0 ]
ok [ -s "$tmp/ref" ]
same() { # name, options...: exit 0 and the reference's text
  local name=$1; shift
  if "$bin" "${base[@]}" "$@" >"$tmp/$name" 2>"$tmp/$name.err" && cmp -s "$tmp/ref" "$tmp/$name"; then
    pass=$((pass+1)); else echo "FAIL $name: $*"; cat "$tmp/$name" "$tmp/$name.err"; fail=$((fail+1)); fi
}
# GPU and loading options: the same greedy text, one note for all GPU ones
same ngl -ngl 99 -ngld 99 --n-gpu-layers 99 -mg 0 -sm none -dev none -nkvo
ok count "$tmp/ngl.err" "nibble runs on the CPU" 1
same gpulayers --gpu-layers=99
same fa -fa
ok has "$tmp/fa.err" "-fa: ignored"
same fa_on -fa on
same fa_auto --flash-attn auto
same nommap --no-mmap --mlock
ok count "$tmp/nommap.err" "no-mmap: ignored" 1
same ctv -ctk f16 -ctv f16
same ctv_alone --cache-type-v f32
same temperature --temperature 0
same nocnv -no-cnv
same penalties --presence-penalty 0 --frequency-penalty 0
"$bin" "${base[@]}" -ctv q4_0 >"$tmp/o" 2>"$tmp/e"; ok [ $? = 1 ]; ok has "$tmp/e" "not one of"

# -r / --reverse-prompt: a stop string, as --stop
stop=$(tr -s ' \n' '\n\n' <"$tmp/ref" | sed -n 4p)
[ -n "$stop" ] || stop=Lord
"$bin" "${base[@]}" --stop "$stop" >"$tmp/stop" 2>/dev/null
"$bin" "${base[@]}" -r "$stop" >"$tmp/r" 2>"$tmp/r.err"; ok [ $? = 0 ]
"$bin" "${base[@]}" --reverse-prompt "$stop" >"$tmp/rp" 2>/dev/null
ok cmp -s "$tmp/stop" "$tmp/r"; ok cmp -s "$tmp/stop" "$tmp/rp"
ok has "$tmp/r.err" "stopped at a stop string"
ok [ "$(wc -c <"$tmp/r")" -lt "$(wc -c <"$tmp/ref")" ]

# -sys: the prompt as a user turn after a system message, through the chat template
"$bin" "${base[@]}" -sys "You are terse." --chat-template chatml >"$tmp/sys" 2>"$tmp/sys.err"
ok [ $? = 0 ]
ok has "$tmp/sys.err" "prompt [1-9][0-9] tokens" # the template's turns, not 4 tokens
"$bin" "${base[@]}" --system-prompt "You are terse." --chat-template chatml >"$tmp/sys2" 2>/dev/null
ok cmp -s "$tmp/sys" "$tmp/sys2"
# kjv-7m has no template of its own: chat's and serve's rule, ChatML, said once
"$bin" "${base[@]}" -sys "You are terse." >"$tmp/o" 2>"$tmp/e"; ok [ $? = 0 ]
ok has "$tmp/e" "no chat template in the model: using ChatML"
ok cmp -s "$tmp/sys" "$tmp/o"
"$bin" run -m "$model" -sys x --ids 1,2 >"$tmp/o" 2>"$tmp/e"; ok [ $? = 1 ]

# -cnv / -i: a conversation is nibble chat (messages from standard input)
for f in -cnv -i --conversation; do
  echo "And God said" | "$bin" run -m "$model" --path source --chat-template chatml -n 4 -t 2 \
    "$f" -sys "Be brief." >"$tmp/cnv" 2>"$tmp/cnv.err"
  ok [ $? = 0 ]; ok has "$tmp/cnv.err" "nibble chat"
done

# grammar and JSON Schema on run
"$bin" "${base[@]}" --grammar 'root ::= "amen"' >"$tmp/g" 2>/dev/null; ok [ $? = 0 ]
ok [ "$(cat "$tmp/g")" = amen ]
"$bin" "${base[@]}" -n 64 -j '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}' \
  >"$tmp/j" 2>/dev/null; ok [ $? = 0 ]
ok python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d["a"], int)' "$tmp/j"

# -q, --log-disable: nothing on stderr for a successful run; -v and errors still speak
for q in -q --quiet --log-disable; do
  "$bin" "${base[@]}" "$q" -ngl 99 >"$tmp/q" 2>"$tmp/q.err"; ok [ $? = 0 ]
  ok [ ! -s "$tmp/q.err" ]; ok cmp -s "$tmp/ref" "$tmp/q"
done
"$bin" -q "${base[@]}" >"$tmp/q" 2>"$tmp/q.err"; ok [ ! -s "$tmp/q.err" ]
"$bin" -q run -m /nonexistent.gguf -p x >"$tmp/o" 2>"$tmp/e"; ok [ $? = 1 ]; ok [ -s "$tmp/e" ]

# --log-format json: every stderr line is one JSON object with level and msg
"$bin" "${base[@]}" --log-format json -ngl 1 >"$tmp/js" 2>"$tmp/js.err"; ok [ $? = 0 ]
ok cmp -s "$tmp/ref" "$tmp/js"
ok python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) >= 3, lines
for l in lines:
    d = json.loads(l)
    assert d["level"] in ("info", "warn", "error") and isinstance(d["msg"], str), d
assert any(d.get("cmd") == "run" for d in map(json.loads, lines))' "$tmp/js.err"
"$bin" --log-format json run --bogus >"$tmp/o" 2>"$tmp/e"
ok python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/e"
"$bin" run --log-format xml >"$tmp/o" 2>"$tmp/e"; ok [ $? = 1 ]

# the selector's explanation: when --path auto quantizes (a cache miss), not on a hit
auto=(run -m "$model" -p "In the beginning" -n 4 -t 2)
"$bin" "${auto[@]}" >"$tmp/miss" 2>"$tmp/miss.err"; ok [ $? = 0 ]
ok has "$tmp/miss.err" "cache miss"; ok has "$tmp/miss.err" "path auto:"
ok has "$tmp/miss.err" "no --priority given"
"$bin" "${auto[@]}" >"$tmp/hit" 2>"$tmp/hit.err"; ok [ $? = 0 ]
ok has "$tmp/hit.err" "cache hit"; ok lacks "$tmp/hit.err" "path auto:"
ok lacks "$tmp/hit.err" "no --priority"
"$bin" "${auto[@]}" -v >"$tmp/v" 2>"$tmp/v.err"; ok [ $? = 0 ]
ok has "$tmp/v.err" "path auto:"; ok has "$tmp/v.err" "no --priority given"
# not a terminal: the quantization's progress as lines (one at the start, then every 5 s)
ok has "$tmp/miss.err" "quantizing .* (first use"
if grep -Eq "quantized in ([6-9]|[1-9][0-9]+)\." "$tmp/miss.err"; then
  ok grep -Eq "quantizing: [0-9]+% \([0-9]+ of [0-9]+\), .* left" "$tmp/miss.err"
fi

echo "cli llama_flags: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
