# Cross build for 64-bit Arm Linux (aarch64) on a Debian x86-64 host: Debian's
# gcc-aarch64-linux-gnu and the arm64 multiarch -dev packages in /usr/lib/aarch64-linux-gnu
# (installed by NIBBLE_ARM=1 tools/install-deps.sh). Used by the release-aarch64 presets;
# docs/arm.md says more.
#
# The test programs run under qemu-aarch64 in user mode, on the CPU named by
# NIBBLE_QEMU_CPU: `max` (dotprod, i8mm, bf16, SVE) or `cortex-a53` (plain NEON, armv8.0:
# the fallback paths). Changing it only rewrites the test commands, nothing recompiles:
#   cmake build/aarch64 -DNIBBLE_QEMU_CPU=cortex-a53 && ctest --test-dir build/aarch64
#
# The programs are dynamic and load the multiarch arm64 libraries through libc6:arm64's
# loader, /lib/ld-linux-aarch64.so.1, so qemu runs with `-L /` (no prefix; it also
# overrides a QEMU_LD_PREFIX in the environment). Not `-L /usr/aarch64-linux-gnu`: that
# loader is libc6-arm64-cross's (the compiler's glibc, 2.36-8cross1 on Debian 12) while
# libc.so.6 is still found in /lib/aarch64-linux-gnu (libc6:arm64, 2.36-9+deb12u14): a
# loader and a libc of two builds disagree on the loader's private data, and the first
# pthread_create (OpenBLAS starts its threads before main) spins forever on a lock.
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
  set(CMAKE_CROSSCOMPILING_EMULATOR "${NIBBLE_QEMU};-L;/;-cpu;${NIBBLE_QEMU_CPU}")
endif()
