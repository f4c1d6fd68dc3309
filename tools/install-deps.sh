#!/usr/bin/env bash
# Installs nibble's build and test dependencies from Debian's packages (as root).
# With NIBBLE_ARM=1 also the Arm leg's (tools/debian-packages-arm64.txt: the cross
# compiler, qemu-user and the arm64 multiarch libraries the dynamically linked aarch64
# build loads under qemu; docs/arm.md says what a static link still lacks). With
# NIBBLE_TRAIN=1 also tools/debian-packages-train.txt (python3-torch, python3-sentencepiece:
# tools/train_phone_agent.py only, not the build or the tests).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
arm=0
[ "${NIBBLE_ARM:-0}" = 1 ] && arm=1
train=0
[ "${NIBBLE_TRAIN:-0}" = 1 ] && train=1
if [ "$arm" = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -qq
# shellcheck disable=SC2046
$SUDO apt-get install -y -qq --no-install-recommends $(grep -v '^#' "$here/debian-packages.txt") >/dev/null
echo "install-deps: Debian packages installed"
if [ "$arm" = 1 ]; then
  # shellcheck disable=SC2046
  $SUDO apt-get install -y -qq --no-install-recommends $(grep -v '^#' "$here/debian-packages-arm64.txt") >/dev/null
  echo "install-deps: Arm leg installed"
fi
if [ "$train" = 1 ]; then
  # shellcheck disable=SC2046
  $SUDO apt-get install -y -qq --no-install-recommends $(grep -v '^#' "$here/debian-packages-train.txt") >/dev/null
  echo "install-deps: training packages installed"
fi
