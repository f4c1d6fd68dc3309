#!/usr/bin/env bash
# Installs nibble's build and test dependencies from Debian's packages (as root).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# shellcheck disable=SC2046
$SUDO apt-get install -y -qq --no-install-recommends $(grep -v '^#' "$here/debian-packages.txt") >/dev/null
echo "install-deps: Debian packages installed"
