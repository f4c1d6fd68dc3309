#!/usr/bin/env bash
# The two static arm64 libraries Debian does not ship, for the statically linked aarch64
# nibble (the release-aarch64 preset, docs/arm.md), built from Debian's own source
# packages of the versions installed (apt-get source) with the cross compiler:
#   libcjson.a       cjson's one file, cJSON.c
#   libmicrohttpd.a  without HTTPS: Debian's libmicrohttpd.a needs GnuTLS, whose static
#                    link needs p11-kit and libunistring, which have no .a in Debian;
#                    nibble serve speaks plain HTTP anyway.
# Usage (as root, after tools/install-deps.sh installed the cross compiler):
#   tools/build-arm64-static.sh [PREFIX]    (default /opt/nibble-aarch64; libs in PREFIX/lib)
# Does nothing when PREFIX/lib already has both from the same Debian versions.
set -euo pipefail
prefix="${1:-/opt/nibble-aarch64}"
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
cc=aarch64-linux-gnu-gcc
command -v "$cc" >/dev/null || { echo "build-arm64-static: $cc not found (tools/install-deps.sh)" >&2; exit 1; }

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }
stamp="cjson $(ver libcjson-dev:arm64) microhttpd $(ver libmicrohttpd-dev:arm64)"
if [ -f "$prefix/lib/libcjson.a" ] && [ -f "$prefix/lib/libmicrohttpd.a" ] &&
   [ "$(cat "$prefix/lib/VERSIONS" 2>/dev/null)" = "$stamp" ]; then
  echo "build-arm64-static: $prefix/lib is up to date ($stamp)"
  exit 0
fi

# apt-get source needs the deb-src lines of the same archive
# (deb822 debian.sources as on Debian 12 images, else the one-line sources.list)
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed -e 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
      $SUDO tee /etc/apt/sources.list.d/nibble-deb-src.sources >/dev/null
  elif grep -qs '^deb ' /etc/apt/sources.list; then
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list |
      $SUDO tee /etc/apt/sources.list.d/nibble-deb-src.list >/dev/null
  else
    echo "build-arm64-static: no deb-src lines, and no Debian sources to copy them from" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work" # apt-get source downloads as the _apt user
cd "$work"
apt-get source -qq "cjson=$(ver libcjson-dev:arm64)" "libmicrohttpd=$(ver libmicrohttpd-dev:arm64)" >/dev/null 2>&1 ||
  apt-get source -qq cjson libmicrohttpd >/dev/null
mkdir -p "$prefix/lib"

# cjson: one translation unit
"$cc" -O2 -fPIC -std=c89 -c cjson-*/cJSON.c -o cJSON.o
aarch64-linux-gnu-ar rcs "$prefix/lib/libcjson.a" cJSON.o

# microhttpd: the library only, no TLS, no docs, no examples
(cd libmicrohttpd-*/ &&
  ./configure -q --host=aarch64-linux-gnu --prefix="$work/mhd" --disable-shared --enable-static \
    --disable-https --without-gnutls --disable-doc --disable-examples --disable-curl \
    --disable-tools >configure.log 2>&1 || { tail -30 configure.log >&2; exit 1; }
  make -s -j"$(nproc)" -C src/microhttpd install >make.log 2>&1 || { tail -30 make.log >&2; exit 1; })
cp "$work/mhd/lib/libmicrohttpd.a" "$prefix/lib/"
echo "$stamp" >"$prefix/lib/VERSIONS"
echo "build-arm64-static: $prefix/lib/libcjson.a and libmicrohttpd.a ($stamp)"
