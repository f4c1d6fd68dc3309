# Cross build for 64-bit Arm Linux (aarch64) on a Debian x86-64 host: Debian's
# gcc-aarch64-linux-gnu, the arm64 multiarch -dev packages in /usr/lib/aarch64-linux-gnu
# and the static libraries tools/build-arm64-static.sh makes (all installed by
# tools/install-deps.sh). Used by the release-aarch64 preset; docs/arm.md says more.
#
# The test programs run under qemu-aarch64 in user mode, on the CPU named by
# NIBBLE_QEMU_CPU: `max` (dotprod, i8mm, bf16, SVE) or `cortex-a53` (plain NEON, armv8.0:
# the fallback paths). Changing it only rewrites the test commands, nothing recompiles:
#   cmake build/aarch64 -DNIBBLE_QEMU_CPU=cortex-a53 && ctest --test-dir build/aarch64
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config reads the arm64 .pc files only (never the host's)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

set(NIBBLE_QEMU_CPU "max" CACHE STRING
    "CPU emulated by qemu-aarch64 for the tests (max, cortex-a53, ...)")
find_program(NIBBLE_QEMU qemu-aarch64)
if(NIBBLE_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${NIBBLE_QEMU};-cpu;${NIBBLE_QEMU_CPU}")
endif()
