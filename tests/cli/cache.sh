#!/usr/bin/env bash
# The warm-start cache under concurrency and on disks that refuse writes (issue 10):
# - 2 and 8 cold `nibble run` processes on one model share a cache while the writer is
#   slowed down (tests/shim/slow_write.c): every one exits 0 with the same greedy text as
#   one undisturbed cold run, exactly one of them writes, the entry verifies and no
#   temporary is left behind;
# - a full disk, a file where the cache folder should be, a read-only folder (when not
#   root) and --no-cache: run still exits 0 with that text, and says why it did not cache;
# - a FIFO as the model is refused at once (no hang).
set -u
bin="${NIBBLE_BIN:?}"
shim="${NIBBLE_TEST_SHIM:?}"
model="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$model" ]; then echo "skip: no $model"; exit 0; fi
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
run_args=(run -m "$model" --path w4a8 -p "In the beginning" -n 24 -t 1)

# The reference: one undisturbed cold run.
XDG_CACHE_HOME="$tmp/ref" "$bin" "${run_args[@]}" >"$tmp/ref.txt" 2>"$tmp/ref.err" \
  && ok || { bad "reference run"; cat "$tmp/ref.err"; }
[ -s "$tmp/ref.txt" ] && ok || bad "reference run printed nothing"
# first use is not silent: what is happening, and how long it took
grep -q "quantizing .* as w4a8 (first use" "$tmp/ref.err" && grep -q "quantized in [0-9.]* s" "$tmp/ref.err" \
  && ok || { bad "first use says nothing about quantizing"; cat "$tmp/ref.err"; }

race() { # n: n cold starts on one empty cache, the writer slowed down
  local n=$1 cache="$tmp/race$1" pids=() i
  for i in $(seq 1 "$n"); do
    LD_PRELOAD="$shim" NIBBLE_TEST_WRITE_DELAY_US=20000 XDG_CACHE_HOME="$cache" \
      "$bin" "${run_args[@]}" >"$tmp/out$n.$i" 2>"$tmp/err$n.$i" &
    pids+=($!)
    [ "$i" = 1 ] && sleep 0.3 # the first one is writing when the others start
  done
  for i in $(seq 1 "$n"); do
    if wait "${pids[$((i-1))]}"; then ok; else bad "race $n: process $i exited $?"; cat "$tmp/err$n.$i"; fi
    if cmp -s "$tmp/ref.txt" "$tmp/out$n.$i"; then ok; else
      bad "race $n: process $i printed other text:"; cat "$tmp/out$n.$i"; echo; cat "$tmp/err$n.$i"; fi
  done
  local writers
  writers=$(cat "$tmp"/err"$n".* | grep -c "cache miss")
  [ "$writers" = 1 ] && ok || bad "race $n: $writers processes wrote the entry (expected 1)"
  grep -q "after waiting for another nibble" "$tmp"/err"$n".* && ok \
    || bad "race $n: no process waited for the writer"
  local entries=("$cache"/nibble/*.nib)
  [ "${#entries[@]}" = 1 ] && ok || bad "race $n: ${#entries[@]} entries"
  "$bin" verify "${entries[0]}" >/dev/null 2>&1 && ok || bad "race $n: the entry does not verify"
  ls "$cache"/nibble/ | grep -q '\.tmp$' && bad "race $n: a temporary was left" || ok
}
race 2
race 8

# nibble cache list / clear: an entry being written is left alone, the rest removed
XDG_CACHE_HOME="$tmp/race2" "$bin" cache list >"$tmp/list" 2>/dev/null
grep -q "w4a8 .*kjv-7m-f32.gguf .*race2/nibble/.*\.nib" "$tmp/list" && ok || { bad "cache list"; cat "$tmp/list"; }
LD_PRELOAD="$shim" NIBBLE_TEST_WRITE_DELAY_US=50000 XDG_CACHE_HOME="$tmp/race2" \
  "$bin" "${run_args[@]}" --path w4a16 >"$tmp/busy.txt" 2>"$tmp/busy.err" &
writer=$!
for _ in $(seq 1 600); do ls "$tmp/race2/nibble/" | grep -q '\.tmp$' && break; sleep 0.1; done
XDG_CACHE_HOME="$tmp/race2" "$bin" cache clear >"$tmp/clear" 2>&1
grep -q "removed 1 files .*1 being written by another nibble, left alone" "$tmp/clear" && ok \
  || { bad "cache clear during a write"; cat "$tmp/clear"; }
wait $writer && ok || { bad "the writer failed while cache clear ran"; cat "$tmp/busy.err"; }
# a read-only cache: the entry that stays is named, and the exit status says so
LD_PRELOAD="$shim" NIBBLE_TEST_UNLINK_FAIL=EROFS XDG_CACHE_HOME="$tmp/race2" "$bin" cache clear \
  >"$tmp/clear" 2>"$tmp/clear.err"
rc=$?
[ "$rc" = 1 ] && grep -q "removed 0 files" "$tmp/clear" &&
  grep -q "cannot remove 1 cache file (first: .*race2/nibble/.*\.nib: Read-only file system)" \
    "$tmp/clear.err" && ok || { bad "cache clear, read-only: rc $rc"; cat "$tmp/clear" "$tmp/clear.err"; }
XDG_CACHE_HOME="$tmp/race2" "$bin" cache clear >"$tmp/clear" 2>&1
grep -q "removed 1 files" "$tmp/clear" && ok || { bad "cache clear"; cat "$tmp/clear"; }
XDG_CACHE_HOME="$tmp/race2" "$bin" cache list 2>&1 | grep -q "0 entries" && ok || bad "cache list after clear"

degraded() { # name, expected words on stderr, env...
  local name=$1 want=$2; shift 2
  if env "$@" "$bin" "${run_args[@]}" >"$tmp/deg.txt" 2>"$tmp/deg.err"; then ok; else
    bad "$name: exit $?"; cat "$tmp/deg.err"; fi
  cmp -s "$tmp/ref.txt" "$tmp/deg.txt" && ok || bad "$name: other text"
  grep -q "quantized into memory, not cached" "$tmp/deg.err" && grep -q -- "$want" "$tmp/deg.err" \
    && ok || { bad "$name: stderr lacks the fallback and '$want':"; cat "$tmp/deg.err"; }
}
degraded "full disk" "No space left on device" \
  LD_PRELOAD="$shim" NIBBLE_TEST_WRITE_FAIL=ENOSPC XDG_CACHE_HOME="$tmp/full"
ls "$tmp/full/nibble/" | grep -q '\.tmp$' && bad "full disk: a temporary was left" || ok
mkdir -p "$tmp/blocked" && : >"$tmp/blocked/nibble"
degraded "file for folder" "$tmp/blocked/nibble" XDG_CACHE_HOME="$tmp/blocked"
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$tmp/ro/nibble" && chmod 0555 "$tmp/ro/nibble"
  degraded "read-only folder" "Permission denied" XDG_CACHE_HOME="$tmp/ro"
fi
run_args+=(--no-cache)
degraded "no-cache" "turned off" XDG_CACHE_HOME="$tmp/off"
[ -e "$tmp/off" ] && bad "--no-cache created the cache folder" || ok

# A FIFO as the model: refused by type, at once.
mkfifo "$tmp/fifo"
for c in "run -m $tmp/fifo --ids 1,2" "inspect $tmp/fifo" "verify $tmp/fifo"; do
  # shellcheck disable=SC2086
  timeout 20 "$bin" $c >/dev/null 2>"$tmp/fifo.err"; rc=$?
  [ "$rc" = 1 ] && grep -q "FIFO" "$tmp/fifo.err" && ok \
    || { bad "'nibble $c': exit $rc (124 = hung)"; cat "$tmp/fifo.err"; }
done

echo "cache: $pass passed, $fail failed"
[ "$fail" = 0 ]
