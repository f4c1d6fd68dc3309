#!/usr/bin/env bash
# The Python package (python/, issue 36): `pip install ./python` into a fresh venv,
# offline, then python/tests with Debian's pytest on this build's libnibble.so — the
# greedy text compared with this build's nibble. python/README.md explains the choices:
# a venv with --system-site-packages (Debian's pip refuses the system Python, PEP 668; the
# venv sees Debian's setuptools, wheel and pytest) and --no-build-isolation --no-index
# (nothing is downloaded).
set -u
bin="${NIBBLE_BIN:?}"
src="${NIBBLE_SOURCE_DIR:?}"
build=$(cd "$(dirname "$bin")" && pwd)
lib="$build/libnibble.so.0"
die() { echo "FAIL cli python: $*"; exit 1; }
[ -f "$lib" ] || die "$lib not found: build the shared library (target nibble_shared)"

# an interpreter with pytest and venv (Debian's python3-pytest, python3-venv)
py=""
for c in "${NIBBLE_PYTHON:-}" /usr/bin/python3 python3; do
  if [ -n "$c" ] && "$c" -c 'import pytest, venv, ensurepip' >/dev/null 2>&1; then py="$c"; break; fi
done
[ -n "$py" ] || die "no python3 with pytest and venv: install python3-pytest python3-venv (tools/install-deps.sh)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages "$tmp/venv" || die "python3 -m venv failed"
# pip builds in the folder it is given (build/, *.egg-info): a copy keeps the checkout clean
mkdir "$tmp/src" && cp -r "$src/python" "$tmp/src/python" && rm -rf "$tmp/src/python/build" "$tmp/src/python"/*.egg-info
(cd "$tmp/src" && PIP_DISABLE_PIP_VERSION_CHECK=1 "$tmp/venv/bin/pip" install -q \
  --no-build-isolation --no-index ./python) || die "pip install ./python failed"
where=$(cd "$tmp" && "$tmp/venv/bin/python" -c 'import nibble; print(nibble.__file__)')
case "$where" in "$tmp/venv/"*) ;; *) die "nibble imported from $where, not the venv";; esac

# A sanitizer build's library (the dev preset: clang, ASan + UBSan) needs the ASan
# runtime loaded first into Python: gcc's libasan.so is a dependency of the library,
# clang's runtime is linked into programs only, so it is found beside the compiler.
preload=""
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan\.so/ {print $3; exit}')
if [ -n "$asan" ]; then
  preload="$asan"
elif nm -D --undefined-only "$lib" 2>/dev/null | grep -q ' __asan_init'; then
  cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
  preload=$("${cc:-clang}" -print-file-name="libclang_rt.asan-$(uname -m).so" 2>/dev/null)
  [ -f "$preload" ] || die "$lib is built with ASan but the clang ASan runtime was not found (got '$preload')"
fi
[ -n "$preload" ] && echo "cli python: ASan library: preloading $preload"

cd "$tmp" || die "cd"
env NIBBLE_LIB="$lib" NIBBLE_BIN="$bin" NIBBLE_SOURCE_DIR="$src" PYTHONDONTWRITEBYTECODE=1 \
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ${preload:+"LD_PRELOAD=$preload"} \
  "$tmp/venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$src/python/tests"
rc=$?
[ "$rc" -eq 0 ] || die "python/tests: pytest exit status $rc"
echo "cli python: pip install ./python and python/tests passed"
