#!/usr/bin/env bash
# nibble run: the CLI contract (ids in, ids out, errors and exit codes).
set -u
bin="${NIBBLE_BIN:?}"
models="${NIBBLE_MODELS_DIR:-}"
fail=0; pass=0
check() { # name, expected exit code, command...
  local name="$1" want="$2"; shift 2
  out=$("$@" 2>/tmp/nibble-cli-err.$$); rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; cat /tmp/nibble-cli-err.$$; fail=$((fail+1))
  else pass=$((pass+1)); fi
}
expect_err() { # name, substring expected in stderr
  if ! grep -q -- "$2" /tmp/nibble-cli-err.$$; then
    echo "FAIL $1: stderr lacks '$2':"; cat /tmp/nibble-cli-err.$$; fail=$((fail+1))
  else pass=$((pass+1)); fi
}

check "unknown option" 1 "$bin" run --bogus
expect_err "unknown option" "unknown option '--bogus'"
check "unknown command" 2 "$bin" frobnicate
check "bad -n" 1 "$bin" run -n abc --ids 1
expect_err "bad -n" "'abc' is not a whole number"
check "bad ids" 1 "$bin" run -m /nonexistent.gguf --ids 1,x
expect_err "bad ids" "not a list of token ids"
check "missing file" 1 "$bin" run -m /nonexistent.gguf --ids 1,2
expect_err "missing file" "/nonexistent.gguf"
check "missing value" 1 "$bin" run --ids
expect_err "missing value" "needs a value"
check "help" 0 "$bin" run --help

gguf="$models/kjv-7m/kjv-7m-f32.gguf"
if [ -f "$gguf" ]; then
  # greedy ids of "In the beginning" (reference.json case 0, first 12 ids)
  check "greedy ids" 0 "$bin" run -m "$gguf" --path source --ids 1,1046,261,2074 -n 12 --print-ids -t 2
  want="271 261 614 634 839 4039 270 271 261 614 4039 270"
  if [ "$out" != "$want" ]; then echo "FAIL greedy ids: got '$out' want '$want'"; fail=$((fail+1)); else pass=$((pass+1)); fi
  expect_err "speed line" "tok/s"
  # --logit-bias: the first greedy id (271) banned changes the answer; +100 forces a token
  check "logit bias ban" 0 "$bin" run -m "$gguf" --path source --ids 1,1046,261,2074 -n 6 --print-ids -t 2 -l 271-inf
  case " $out " in *" 271 "*) echo "FAIL logit bias ban: 271 in '$out'"; fail=$((fail+1));; *) pass=$((pass+1));; esac
  check "logit bias force" 0 "$bin" run -m "$gguf" --path source --ids 1,1046,261,2074 -n 4 --print-ids -t 2 --logit-bias 614+100
  [ "$out" = "614 614 614 614" ] && pass=$((pass+1)) || { echo "FAIL logit bias force: '$out'"; fail=$((fail+1)); }
  check "logit bias outside" 1 "$bin" run -m "$gguf" --path source --ids 1,2 -n 2 -l 5000+1
  expect_err "logit bias outside" "outside the vocabulary of 4096"
  check "logit bias malformed" 1 "$bin" run -m "$gguf" --ids 1 -l 12x3
  expect_err "logit bias malformed" "TOKEN_ID+BIAS"
  check "token out of range" 1 "$bin" run -m "$gguf" --path source --ids 1,5000 -n 2
  expect_err "token out of range" "not in the vocabulary"
  # a full context shifts and generation goes on; --no-shift stops there, not an error
  # (tests/cli/ctxshift.sh checks both closely)
  check "context shift" 0 "$bin" run -m "$gguf" --path source --ids 1,1046,261,2074 -n 20 --ctx 8 --print-ids
  if [ "$(echo $out | wc -w)" != 20 ]; then echo "FAIL context shift: '$out' is not 20 ids"; fail=$((fail+1)); else pass=$((pass+1)); fi
  check "context full" 0 "$bin" run -m "$gguf" --path source --ids 1,1046,261,2074 -n 20 --ctx 8 --no-shift
  expect_err "context full" "context of 8 tokens full: stopped"
  # the same seed gives the same sampled ids
  a=$("$bin" run -m "$gguf" --path source --ids 1,1046 -n 16 --temp 0.9 --seed 5 --print-ids 2>/dev/null)
  b=$("$bin" run -m "$gguf" --path source --ids 1,1046 -n 16 --temp 0.9 --seed 5 --print-ids 2>/dev/null)
  if [ -z "$a" ] || [ "$a" != "$b" ]; then echo "FAIL seeded sampling not repeatable: '$a' vs '$b'"; fail=$((fail+1)); else pass=$((pass+1)); fi
  # llama.cpp's spellings: --opt=value, -s/--seed, -c/--ctx-size, -b/--batch-size,
  # -f FILE and -p - (standard input) give the same ids as the plain forms
  c=$("$bin" run -m "$gguf" --path=source --ids 1,1046 --n-predict=16 --temp=0.9 -s 5 \
      --ctx-size 64 --batch-size=7 --print-ids 2>/dev/null)
  if [ "$a" != "$c" ]; then echo "FAIL --opt=value / aliases: '$c' vs '$a'"; fail=$((fail+1)); else pass=$((pass+1)); fi
  ptmp=$(mktemp)
  printf 'In the beginning' >"$ptmp"
  p1=$("$bin" run -m "$gguf" --path source -p "In the beginning" -n 8 --print-ids 2>/dev/null)
  p2=$("$bin" run -m "$gguf" --path source -f "$ptmp" -n 8 --print-ids 2>/dev/null)
  p3=$("$bin" run -m "$gguf" --path source -p - -n 8 --print-ids <"$ptmp" 2>/dev/null)
  if [ -z "$p1" ] || [ "$p1" != "$p2" ] || [ "$p1" != "$p3" ]; then
    echo "FAIL -f / -p -: '$p1' '$p2' '$p3'"; fail=$((fail+1)); else pass=$((pass+1)); fi
  rm -f "$ptmp"
  # llama.cpp's parser also takes '_' for '-' in long names and --predict for -n; like
  # it, a short option and its number are two words (no -n16)
  d=$("$bin" run -m "$gguf" --path source --ids 1,1046 --predict 16 --temp 0.9 --seed=5 \
      --ctx_size 64 --print_ids 2>/dev/null)
  if [ "$a" != "$d" ]; then echo "FAIL --ctx_size / --predict: '$d' vs '$a'"; fail=$((fail+1)); else pass=$((pass+1)); fi
  check "joined short option" 1 "$bin" run -m "$gguf" --path source --ids 1 -n16
  expect_err "joined short option" "unknown option '-n16'"
  check "bad priority" 1 "$bin" run -m "$gguf" --priority fastest --ids 1
  expect_err "bad priority" "priority 'fastest' is not one of balanced, speed, fidelity, memory"
  check "flag with a value" 1 "$bin" run -m "$gguf" --print-ids=yes --ids 1
  expect_err "flag with a value" "takes no value"
  check "missing -f file" 1 "$bin" run -m "$gguf" -f /nonexistent/prompt.txt
  expect_err "missing -f file" "/nonexistent/prompt.txt"
  # the default --path auto quantizes a float GGUF into the cache and runs it
  export XDG_CACHE_HOME=$(mktemp -d)
  check "auto path" 0 "$bin" run -m "$gguf" --ids 1,1046,261,2074 -n 4 --print-ids -t 2
  expect_err "auto path" "cache miss"
  expect_err "auto path" "no --priority given"
  rm -rf "$XDG_CACHE_HOME"
else
  echo "kjv-7m not found under '$models': model checks skipped"
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI must have the test models"; fail=$((fail+1)); }
fi
rm -f /tmp/nibble-cli-err.$$
echo "cli run: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
