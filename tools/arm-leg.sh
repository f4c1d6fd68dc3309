#!/usr/bin/env bash
# The Arm leg of CI (docs/arm.md): cross-build the release-aarch64 preset (static nibble,
# checked to be one file with no shared library), then run its test subset under
# qemu-aarch64 in user mode once per emulated CPU:
#   max         dotprod, i8mm, bf16 (the fast variants)
#   cortex-a53  plain NEON, armv8.0 (the fallback paths)
# Usage: tools/arm-leg.sh [CPU ...]   (default: max cortex-a53). Needs tools/install-deps.sh
# (with NIBBLE_ARM=1). Exit status: 0 only when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(max cortex-a53)
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null ||
    { echo "arm-leg: $tool not found: run tools/install-deps.sh (as root)" >&2; exit 1; }
done
jobs="${NIBBLE_ARM_JOBS:-$(nproc)}"
cmake --preset release-aarch64 -DNIBBLE_QEMU_CPU="${cpus[0]}" >/dev/null
cmake --build --preset release-aarch64 -j "$jobs"
# the phone binary: statically linked, nothing to load at start
info="$(file -b build/aarch64/nibble)"
case "$info" in
  *aarch64*"statically linked"*) echo "arm-leg: build/aarch64/nibble: $info" ;;
  *) echo "arm-leg: build/aarch64/nibble is not a static aarch64 program: $info" >&2; exit 1 ;;
esac
fail=0
for cpu in "${cpus[@]}"; do
  # only the test commands change (the emulator's -cpu): nothing recompiles
  cmake --preset release-aarch64 -DNIBBLE_QEMU_CPU="$cpu" >/dev/null
  echo "arm-leg: ctest under qemu-aarch64 -cpu $cpu"
  start=$SECONDS
  if ! ctest --preset release-aarch64 -j "$jobs"; then
    echo "arm-leg: FAILED under -cpu $cpu" >&2
    fail=1
  fi
  echo "arm-leg: -cpu $cpu took $((SECONDS - start)) s"
done
exit $fail
