#!/usr/bin/env bash
# tools/arm-bundle.sh — the aarch64 nibble as one folder that needs nothing of the device
# but a Linux kernel (issue 17; docs/arm.md "The phone build"): build/aarch64's dynamically
# linked `nibble`, every shared library it loads (from Debian's arm64 packages: glibc,
# libcjson, libmicrohttpd and its GnuTLS chain, OpenBLAS, PCRE2, xxHash, ...) and glibc's
# loader, which the launcher runs on them, so neither a system glibc nor /lib paths are used:
#
#   OUT/nibble                     launcher (#!/bin/sh): OUT/lib/ld-linux-aarch64.so.1
#                                  --inhibit-cache --library-path OUT/lib OUT/lib/nibble ARGS
#   OUT/lib/nibble                 the program (ELF aarch64)
#   OUT/lib/ld-linux-aarch64.so.1  the loader; OUT/lib/*.so.*: the libraries, by soname
#   OUT/share/nibble/calib.txt     GPTQ's calibration text (as in the build tree)
#
# A statically linked file would be simpler; Debian ships no libcjson.a and no GnuTLS-free
# libmicrohttpd.a, and this project builds no other project's code (docs/arm.md).
#
# Usage: tools/arm-bundle.sh [OUT=build/aarch64/bundle]            make the bundle
#        tools/arm-bundle.sh --check [OUT] [CPU=max] [MODEL]        make it, then check it
#   --check runs the bundle under qemu-aarch64 -cpu CPU (the launcher itself, with
#   NIBBLE_BUNDLE_EMU naming the emulator, as binfmt_misc would on an x86 host): the
#   loader must find every library inside OUT/lib (ld.so --list), `nibble run` on MODEL
#   (kjv-7m f32) must print the same text as build/aarch64/nibble run the usual way, and
#   `nibble serve` must answer /health and a completion. Needs cmake --build --preset
#   release-aarch64 first. NIBBLE_ARM_BUILD: the build folder (build/aarch64).
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
build=${NIBBLE_ARM_BUILD:-build/aarch64}
out=${1:-$build/bundle}
cpu=${2:-max}
model=${3:-${NIBBLE_MODELS_DIR:-../shared/models}/kjv-7m/kjv-7m-f32.gguf}
prog=$build/nibble
[ -x "$prog" ] || { echo "arm-bundle: $prog not found: cmake --build --preset release-aarch64" >&2; exit 1; }
command -v qemu-aarch64 >/dev/null || { echo "arm-bundle: qemu-aarch64 not found" >&2; exit 1; }
loader=/lib/ld-linux-aarch64.so.1
[ -e "$loader" ] || { echo "arm-bundle: no $loader (NIBBLE_ARM=1 tools/install-deps.sh)" >&2; exit 1; }

# What the system loader resolves for the program (guest paths = host paths with -L /).
list=$(qemu-aarch64 -L / "$loader" --list "$prog")
rm -rf "$out"
mkdir -p "$out/lib"
cp "$prog" "$out/lib/nibble"
cp -L "$loader" "$out/lib/ld-linux-aarch64.so.1"
# GPTQ's calibration text: nibble finds it beside its program, which is the loader here
mkdir -p "$out/share/nibble"
cp "$build/share/nibble/calib.txt" "$out/share/nibble/calib.txt"
n=0
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  case "$path" in
    /*) cp -L "$path" "$out/lib/$name"; n=$((n + 1)) ;;
    *) echo "arm-bundle: $name not found by the loader ($path)" >&2; exit 1 ;;
  esac
done <<<"$list"
cat >"$out/nibble" <<'EOF'
#!/bin/sh
# nibble for aarch64 Linux with its own loader and libraries (tools/arm-bundle.sh).
# NIBBLE_BUNDLE_EMU: a command to run the loader under (an emulator on another host).
# /proc/self/exe is the loader, so the calibration text and the program `nibble agent -m`
# starts are named: NIBBLE_CALIB (unless set), NIBBLE_SELF.
d=$(cd "$(dirname "$0")" && pwd)
: "${NIBBLE_CALIB=$d/share/nibble/calib.txt}"
NIBBLE_SELF=$d/nibble
export NIBBLE_CALIB NIBBLE_SELF
exec ${NIBBLE_BUNDLE_EMU:-} "$d/lib/ld-linux-aarch64.so.1" --inhibit-cache --argv0 "$0" \
  --library-path "$d/lib" "$d/lib/nibble" "$@"
EOF
chmod +x "$out/nibble"
echo "arm-bundle: $out: nibble, the loader and $n libraries, $(du -sk "$out" | cut -f1) KiB"
[ "$check" = 1 ] || exit 0

# 1. every library from the bundle, none from the host's /lib or /usr/lib
abs=$(cd "$out" && pwd)
own=$(qemu-aarch64 "$abs/lib/ld-linux-aarch64.so.1" --inhibit-cache --library-path "$abs/lib" \
  --list "$abs/lib/nibble")
bad=$(awk '$2 == "=>" && index($3, "'"$abs"'/lib/") != 1' <<<"$own")
[ -z "$bad" ] || { echo "arm-bundle: libraries from outside the bundle:" >&2; echo "$bad" >&2; exit 1; }
echo "arm-bundle: check: $(grep -c '=>' <<<"$own") libraries, all from $out/lib"

# 2. the CLI: the same text as the program run the usual way
export NIBBLE_BUNDLE_EMU="qemu-aarch64 -cpu $cpu"
args=(run -m "$model" --path f32 -p "In the beginning" -n 12 -t 1)
want=$(qemu-aarch64 -L / -cpu "$cpu" "$prog" "${args[@]}" 2>/dev/null)
got=$("$out/nibble" "${args[@]}" 2>/dev/null)
[ -n "$want" ] && [ "$got" = "$want" ] ||
  { echo "arm-bundle: nibble run differs: bundle '$got', program '$want'" >&2; exit 1; }
echo "arm-bundle: check: nibble run gives the program's text: $got"

# 3. the server: /health, then one completion
port=$((20000 + RANDOM % 20000))
"$out/nibble" serve -m "$model" --path f32 --port "$port" -t 1 >"$out/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
ok=0
for _ in $(seq 1 240); do
  if curl -sf --max-time 10 "http://127.0.0.1:$port/health" >/dev/null 2>&1; then ok=1; break; fi
  kill -0 $pid 2>/dev/null || break
  sleep 0.5
done
[ "$ok" = 1 ] || { echo "arm-bundle: nibble serve did not answer /health:" >&2; cat "$out/serve.log" >&2; exit 1; }
reply=$(curl -sf --max-time 120 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "In the beginning", "max_tokens": 8, "temperature": 0}')
grep -q '"text"' <<<"$reply" || { echo "arm-bundle: no completion: $reply" >&2; exit 1; }
echo "arm-bundle: check: nibble serve answered: $reply"
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
trap - EXIT
echo "arm-bundle: check passed (-cpu $cpu)"
