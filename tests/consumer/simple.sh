#!/usr/bin/env bash
# ctest example_simple: examples/simple.c opens kjv-7m with the library's default params
# and prints the text `nibble run` prints for the same prompt and -n (both greedy), and
# its first use builds the cache entry nibble run builds, byte for byte (issue 33: the
# library's "auto" is the CLI's: the same cache folder, choice and calibration text).
#   simple.sh EXAMPLE NIBBLE
set -u
example="${1:?}" bin="${2:?}"
gguf="${NIBBLE_MODELS_DIR:-}/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$gguf" ]; then echo "skip: no $gguf"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# the CLI's own variables would make its choice differ from the library's defaults
unset NIBBLE_CALIB NIBBLE_WEIGHT_PATH NIBBLE_MEASUREMENTS NIBBLE_LAYOUT NIBBLE_REPACK_ROWS
fail=0; pass=0
ok() { pass=$((pass+1)); }
bad() { echo "FAIL $*"; fail=$((fail+1)); }
prompt="In the beginning"

XDG_CACHE_HOME="$tmp/cli" "$bin" run -m "$gguf" -p "$prompt" -n 24 >"$tmp/cli.txt" 2>"$tmp/cli.err" ||
  { bad "nibble run:"; cat "$tmp/cli.err"; }
XDG_CACHE_HOME="$tmp/lib" "$example" "$gguf" "$prompt" 24 >"$tmp/lib.txt" 2>"$tmp/lib.err" ||
  { bad "example_simple:"; cat "$tmp/lib.err"; }
[ "$(tr -d ' \n' <"$tmp/lib.txt")" != "" ] && ok || bad "example_simple printed no text"
cmp -s "$tmp/cli.txt" "$tmp/lib.txt" && ok ||
  bad "example_simple printed '$(cat "$tmp/lib.txt")', nibble run '$(cat "$tmp/cli.txt")'"

# one entry each, under $XDG_CACHE_HOME/nibble, with the same name and bytes
cli=$(cd "$tmp/cli/nibble" 2>/dev/null && ls -- *.nib 2>/dev/null)
lib=$(cd "$tmp/lib/nibble" 2>/dev/null && ls -- *.nib 2>/dev/null)
[ -n "$cli" ] && [ "$(echo "$cli" | wc -l)" = 1 ] && ok || bad "nibble run's cache holds '$cli'"
[ "$cli" = "$lib" ] && ok || bad "cache entries: nibble run '$cli', the library '$lib'"
if [ -n "$cli" ] && [ "$cli" = "$lib" ]; then
  cmp "$tmp/cli/nibble/$cli" "$tmp/lib/nibble/$lib" && ok || bad "the entries' bytes differ"
  # a choice with GPTQ ran it on the calibration text shipped with nibble (the build tree's)
  if head -c 65536 "$tmp/lib/nibble/$lib" | grep -aq '"gptq":'; then
    head -c 65536 "$tmp/lib/nibble/$lib" | grep -aq '"calib":"[^"]*/share/nibble/calib.txt"' &&
      ok || bad "a GPTQ entry that names no share/nibble/calib.txt"
  fi
fi
echo "example_simple: $pass passed, $fail failed"
[ "$fail" = 0 ]
