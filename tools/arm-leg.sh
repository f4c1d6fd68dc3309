#!/usr/bin/env bash
# The Arm leg of CI (docs/arm.md): cross-build the release-aarch64 preset (dynamically
# linked against Debian's arm64 multiarch libraries), then run its test subset (label arm:
# the unit, kernel and kjv-7m golden tests) under qemu-aarch64 in user mode once per
# emulated CPU:
#   max         dotprod, i8mm, bf16 (the fast variants)
#   cortex-a53  plain NEON, armv8.0 (the fallback paths)
# Usage: tools/arm-leg.sh [CPU ...]   (default: max cortex-a53). Needs tools/install-deps.sh
# (with NIBBLE_ARM=1); NIBBLE_MODELS_DIR (default ../shared/models) names the test models
# for a checkout elsewhere. Each test has a time limit (CMakeLists.txt: the Arm leg), so a test
# that hangs under emulation fails instead of stopping CI. Exit status: 0 only when every
# run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
cpus=("$@")
[ ${#cpus[@]} -gt 0 ] || cpus=(max cortex-a53)
for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null ||
    { echo "arm-leg: $tool not found: run tools/install-deps.sh (as root)" >&2; exit 1; }
done
[ -e /lib/ld-linux-aarch64.so.1 ] ||
  { echo "arm-leg: no arm64 loader (libc6:arm64): run NIBBLE_ARM=1 tools/install-deps.sh" >&2; exit 1; }
jobs="${NIBBLE_ARM_JOBS:-$(nproc)}"
models=()
[ -z "${NIBBLE_MODELS_DIR:-}" ] || models=(-DNIBBLE_MODELS_DIR="$NIBBLE_MODELS_DIR")
leg_start=$SECONDS
cmake --preset release-aarch64 "${models[@]}" -DNIBBLE_QEMU_CPU="${cpus[0]}" >/dev/null
cmake --build --preset release-aarch64 -j "$jobs"
echo "arm-leg: build took $((SECONDS - leg_start)) s"
# The CI build is dynamic: it loads Debian's arm64 libraries (libc6:arm64 and the -dev
# packages' libraries in /usr/lib/aarch64-linux-gnu) through /lib/ld-linux-aarch64.so.1.
# A statically linked nibble (the phone) is the release-aarch64-static preset (docs/arm.md).
info="$(file -b build/aarch64/nibble)"
case "$info" in
  *aarch64*"dynamically linked"*) echo "arm-leg: build/aarch64/nibble is dynamic (Debian's arm64 libraries): $info" ;;
  *aarch64*"statically linked"*) echo "arm-leg: build/aarch64/nibble is static: $info" ;;
  *) echo "arm-leg: build/aarch64/nibble is not an aarch64 program: $info" >&2; exit 1 ;;
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
echo "arm-leg: the whole leg took $((SECONDS - leg_start)) s"
exit $fail
