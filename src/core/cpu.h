/* core/cpu.h — what this CPU and its OS support, probed once.
 *   x86-64   CPUID + XGETBV: a flag is set only when the CPU has the instructions AND
 *            the OS saves the registers they use (XCR0: YMM for AVX*, opmask/ZMM for
 *            AVX-512, tile data for AMX);
 *   aarch64  getauxval(AT_HWCAP / AT_HWCAP2): the kernel reports what it lets user
 *            space run (asimd, asimddp = dotprod, i8mm, bf16, sve).
 * The flags of the other architecture are 0. */
#ifndef NB_CORE_CPU_H
#define NB_CORE_CPU_H

struct nb_cpu {
    int avx2, fma, f16c;
    int avx512f, avx512bw, avx512vl, avx512dq;
    int avx512_vnni, avx512_bf16, avx_vnni;
    int amx_tile, amx_int8, amx_bf16;
    int asimd, asimddp, i8mm, bf16, sve; /* aarch64 */
};

/* The probe result (computed on first use, thread-safe). */
const struct nb_cpu *nb_cpu_get(void);
/* "avx2 fma f16c avx512f ..." / "asimd asimddp i8mm ..." — the flags that are set, for logs. Static buffer. */
const char *nb_cpu_flags_str(void);

#endif
