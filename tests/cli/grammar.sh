#!/usr/bin/env bash
# nibble run/chat --grammar and --grammar-file (GBNF, docs/grammar.md): every output keeps
# to the grammar, checked by an independent recogniser (Python's re on an equivalent
# regular expression; json.loads for the JSON grammar).
#  - kjv-7m: four grammars (word lists and classes, a bounded repetition, UTF-8 classes,
#    JSON), greedy and at temperature 1 (3 seeds), with room (-n 64) and a tight budget
#    (-n 14): every output matches and ends at its end-of-generation token;
#  - greedy ids the same with and without --lookup 4;
#  - nibble chat --grammar: two answers of one conversation, each matching;
#  - a budget too small for the shortest output: the output is cut, and said to be;
#  - errors: a syntax error named by line and column, an undefined rule, left recursion,
#    a missing file, two constraints at once, --ignore-eos.
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:?}"
src="${NIBBLE_SOURCE_DIR:?}"
data="$src/tests/data/grammar"
kjv="$models/kjv-7m/kjv-7m-f32.gguf"
[ -f "$kjv" ] || { echo "SKIP: no $kjv"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }

# check KIND FILE: the text (the last newline is run's) matches the grammar's equivalent.
check() { python3 "$src/tests/helpers/grammar_check.py" "$1" "$2"; }

for g in sentence list greek json; do
  for args in "--temp 0" "--temp 1 -s 1" "--temp 1 -s 2" "--temp 1 -s 3"; do
    for n in 64 14; do
      # shellcheck disable=SC2086
      "$bin" run -m "$kjv" -p "In the beginning" --grammar-file "$data/$g.gbnf" -n $n $args \
        -t 2 >"$tmp/out" 2>"$tmp/err"
      rc=$?
      if [ $rc -ne 0 ]; then bad "$g $args -n $n: exit $rc: $(tail -2 "$tmp/err")"; continue; fi
      if grep -q "it is cut" "$tmp/err"; then bad "$g $args -n $n: cut"; continue; fi
      if check "$g" "$tmp/out"; then ok; else bad "$g $args -n $n: $(cat "$tmp/out")"; fi
    done
  done
done
echo "grammars: $pass outputs matched"

# the grammar as text; greedy ids equal with prompt-lookup drafts
"$bin" run -m "$kjv" -p "And God said unto Moses, Moses" -n 64 --temp 0 -t 2 --print-ids \
  --grammar "$(cat "$data/sentence.gbnf")" >"$tmp/a" 2>/dev/null || bad "--grammar text"
"$bin" run -m "$kjv" -p "And God said unto Moses, Moses" -n 64 --temp 0 -t 2 --print-ids \
  --grammar-file "$data/sentence.gbnf" --lookup 4 >"$tmp/b" 2>/dev/null || bad "--lookup 4"
if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"; then ok; else bad "ids differ with --lookup 4"; fi

# chat: each answer keeps to the grammar
printf 'And God said\nLet there be light\n' | "$bin" chat -m "$kjv" --chat-template chatml \
  -n 48 -t 2 --grammar-file "$data/sentence.gbnf" >"$tmp/chat" 2>"$tmp/chat.err" \
  || bad "chat: exit $?: $(tail -2 "$tmp/chat.err")"
answers=0
while IFS= read -r line; do
  line="${line#> }"
  [ -n "$line" ] || continue
  printf '%s\n' "$line" >"$tmp/one"
  if check sentence "$tmp/one"; then answers=$((answers+1)); else bad "chat answer: $line"; fi
done <"$tmp/chat"
if [ "$answers" = 2 ]; then ok; else bad "chat: $answers answers matched, not 2"; fi

# a budget below the shortest output: cut, and said
"$bin" run -m "$kjv" -p "In the beginning" --grammar-file "$data/sentence.gbnf" -n 3 -t 2 \
  >"$tmp/out" 2>"$tmp/err"
if grep -q "before it completed the grammar (-n is too small for it): it is cut" "$tmp/err"; then
  ok; else bad "-n 3: not said to be cut: $(tail -1 "$tmp/err")"; fi

# errors: named, exit status 1
err() { # WANT ARGS...: exit 1 and stderr contains WANT
  local want="$1"; shift
  "$bin" run -m "$kjv" -p "In" -n 4 "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 1 ] && grep -qF -- "$want" "$tmp/err"; then ok; else
    bad "error '$want': exit $rc: $(cat "$tmp/err" | tail -2)"; fi
}
err "line 2, column 3: expected '::='" --grammar $'root ::= x\nx = "a"'
err "rule 'y' is used (line 1) but never defined" --grammar 'root ::= "a" y'
err "rule 'e' is left-recursive" --grammar $'root ::= e\ne ::= e "+" "1" | "1"'
err "none.gbnf: No such file" --grammar-file "$tmp/none.gbnf"
err "give one of --json-schema, --grammar and --grammar-file" --grammar 'root ::= "a"' -j '{}'
err "--grammar ends the output at its end-of-generation token" --grammar 'root ::= "a"' --ignore-eos

echo "grammar: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
