#!/usr/bin/env bash
# nibble chat at a terminal, typed into through tmux as a person would (issue 36): Ctrl-C
# mid-reply returns to the prompt, the process alive, and the next turn still sees the
# history (the partial answer included: /save shows it); Up recalls the last line; a """
# block of three lines is one turn; /help and an unknown /foo are answered, never sent;
# /bye exits 0, so do two Ctrl-C in a row at the prompt; the history file is written.
# kjv-7m with ChatML never ends a turn, so with -n -1 every reply runs until Ctrl-C.
set -u
bin="${NIBBLE_BIN:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
if ! command -v tmux >/dev/null; then
  echo "FAIL: tmux is not installed (tools/debian-packages.txt lists it)"
  exit 1
fi
if [ ! -f "$gguf" ]; then
  echo "kjv-7m not found: skipped"
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
tmp=$(mktemp -d)
sock="$tmp/tmux.sock" # a tmux server of our own: no other session is touched
t() { tmux -S "$sock" "$@"; }
trap 't kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { if "$@"; then pass=$((pass+1)); else echo "FAIL: $*"; fail=$((fail+1)); fi; }

pane() { t capture-pane -p -t chat -S -500 2>/dev/null; }
last_line() { pane | grep -v '^ *$' | tail -1; }
# until COMMAND succeeds, polled every 0.1 s for at most SECONDS: 0, else 1 and the pane shown
wait_until() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  while [ "$SECONDS" -lt "$end" ]; do
    "$@" && return 0
    sleep 0.1
  done
  echo "timed out after ${secs}s waiting for: $*"
  echo "--- pane:"; pane | grep -v '^ *$' | tail -15 | cut -c1-160
  echo "--- stderr:"; tail -5 "$tmp/err"
  return 1
}
at_prompt() { [ "$(last_line)" = ">" ]; }
in_err() { grep -q -- "$1" "$tmp/err"; }
count_in_err() { [ "$(grep -c -- "$1" "$tmp/err")" -ge "$2" ]; }
replying() { [ "$(pane | grep -vc '^ *$')" -gt "$1" ]; } # the pane grew past N lines
exited() { [ -s "$tmp/rc" ]; }
alive() { ! exited; }

# start SESSION-ARGS: nibble chat in a detached 200x50 terminal, stderr to $tmp/err
start() {
  rm -f "$tmp/rc" "$tmp/err"
  t new-session -d -x 200 -y 50 -s chat \
    "env XDG_CACHE_HOME='$tmp/cache' XDG_STATE_HOME='$tmp/state' '$bin' chat -m '$gguf' \
     --chat-template chatml --path source -c 4096 -n -1 -t 1 2>'$tmp/err'; echo \$? >'$tmp/rc'"
  wait_until 60 at_prompt
}
# turn TEXT N: send a message, wait until its answer is streaming, Ctrl-C, back at the prompt
turn() {
  local lines
  lines=$(pane | grep -vc '^ *$')
  t send-keys -t chat -l "$1"; t send-keys -t chat Enter
  wait_until 60 count_in_err "cached tokens reused" "$2" && wait_until 30 replying "$((lines + 1))"
  t send-keys -t chat C-c
  wait_until 30 count_in_err "stopped (Ctrl-C)" "$2" && wait_until 30 at_prompt
}
# saved FILE PYTHON: the conversation /save wrote, checked by a python expression over m
saved() {
  python3 -c "import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

ok start
ok in_err "template chatml;"
# Ctrl-C mid-reply: back at the prompt, still running
ok turn "And God said" 1
ok at_prompt
ok alive
# Up recalls the last line; Enter sends it: the second turn reuses the first one's tokens
t send-keys -t chat Up
ok wait_until 10 eval '[ "$(last_line)" = "> And God said" ]'
lines=$(pane | grep -vc '^ *$')
t send-keys -t chat Enter
ok wait_until 60 count_in_err "cached tokens reused" 2
ok wait_until 30 replying "$((lines + 1))"
t send-keys -t chat C-c
ok wait_until 30 count_in_err "stopped (Ctrl-C)" 2
ok wait_until 30 at_prompt
reused=$(sed -n 's/^\[\([0-9]*\) cached tokens reused.*/\1/p' "$tmp/err" | sed -n 2p)
ok test "${reused:-0}" -gt 20 # the first turn and its partial answer, from the cache
t send-keys -t chat -l "/save $tmp/a.json"; t send-keys -t chat Enter
ok wait_until 10 eval 'pane | grep -q "4 messages saved"'
ok saved "$tmp/a.json" '[x["role"] for x in m] == ["user", "assistant"] * 2 and
  m[0]["content"] == m[2]["content"] == "And God said" and len(m[1]["content"]) > 0'

# a """ block over three lines is one turn, newlines kept
t send-keys -t chat -l '"""'; t send-keys -t chat Enter
for w in one two three; do t send-keys -t chat -l "$w"; t send-keys -t chat Enter; done
ok turn '"""' 3
# /help and an unknown /foo: answered here, never sent to the model
t send-keys -t chat -l "/help"; t send-keys -t chat Enter
ok wait_until 10 eval 'pane | grep -q "/save FILE"'
t send-keys -t chat -l "/foo bar"; t send-keys -t chat Enter
ok wait_until 10 eval 'pane | grep -q "unknown command /foo, /help lists them"'
t send-keys -t chat -l "/save $tmp/b.json"; t send-keys -t chat Enter
ok wait_until 10 eval 'pane | grep -q "6 messages saved"'
ok saved "$tmp/b.json" 'len(m) == 6 and m[4] == {"role": "user", "content": "one\ntwo\nthree"}
  and not any("/foo" in x["content"] or "/help" in x["content"] for x in m)'
ok test "$(grep -c "cached tokens reused" "$tmp/err")" -eq 3 # three turns, no more
# /bye: exit status 0; the history file holds the lines typed
t send-keys -t chat -l "/bye"; t send-keys -t chat Enter
ok wait_until 30 exited
ok test "$(cat "$tmp/rc" 2>/dev/null)" = 0
ok grep -q "And" "$tmp/state/nibble/chat_history"

# two Ctrl-C in a row at the prompt: a hint, then exit 0
ok start
t send-keys -t chat C-c
ok wait_until 10 eval 'pane | grep -q "Ctrl-C again, /bye or Ctrl-D quits"'
ok alive
t send-keys -t chat C-c
ok wait_until 30 exited
ok test "$(cat "$tmp/rc" 2>/dev/null)" = 0
echo "cli chat_tmux: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
