/* runtime/probe.h — what this machine can do and what its OS allows: the input of the
 * weight-path selector (runtime/selector.h) and of `nibble probe`.
 *
 *   x86-64   CPUID (raw capability) and XGETBV (state the OS saves) through core/cpu.h,
 *            vendor / family / model from CPUID leaves 0 and 1, the Linux AMX tile-data
 *            permission (arch_prctl ARCH_REQ_XCOMP_PERM) when the CPU has AMX;
 *   aarch64  HWCAP / HWCAP2 (asimd, asimddp, i8mm, bf16, sve), implementer and part
 *            from /proc/cpuinfo;
 *   both     logical and physical cores (sysfs topology), cache sizes (sysfs), total
 *            memory (/proc/meminfo) and, when asked, a measured read bandwidth.
 *
 * Record keys. A measurement record (`nibble bench --record`) vouches for a CPU only
 * when its record key equals the key of the run the selector would make there:
 *
 *   <cpu key>/<weight path>/<kernel>/<features>
 *
 *   cpu key   "x86:<vendor>:<family>:<model>"  CPUID vendor, display family and model,
 *                                              decimal: "x86:GenuineIntel:6:207"
 *             "arm:<implementer>:<part>"       hex: "arm:0x41:0xd0b"
 *   kernel    the path's GEMM kernel: the first word of its dispatch name (older records:
 *             "amx (unverified)" is "amx"): amx, avx512vnni, avxvnni, avx2, avx512, ref (Arm
 *             NEON kernels: neon, neon-dotprod, neon-i8mm)
 *   features  the CPU features that run uses, '+'-joined in this order ("none": none):
 *             avx512       the AVX-512 level ran (AVX2, FMA, F16C, AVX-512 F/BW/VL/DQ:
 *                          the forward pass's other ops use them, whatever the GEMM)
 *             avx2         the AVX2 level ran with an AVX2 w4a8 kernel (AVX2, FMA, F16C)
 *             avx_vnni     kernel avxvnni
 *             avx512_vnni  kernels avx512vnni (w4a8; w4a16: int16 decode) and amx (w4a8)
 *             avx512_bf16  w4a16 kernels avx512vnni, amx and (records before 2026-12-06)
 *                          avx512 on an AVX512-BF16 CPU: bf16 prefill (the old avx512:
 *                          bf16 decode too)
 *             amx_int8     kernel amx (AMX-TILE + AMX-INT8, tile data granted by the OS)
 *             asimd, asimddp, i8mm   the Arm features a NEON kernel uses (bf16: only
 *                                    a kernel named neon-bf16, none yet)
 *   e.g. "x86:GenuineIntel:6:207/w4a8/amx/avx512+avx512_vnni+amx_int8",
 *        "x86:AuthenticAMD:26:2/w4a16/avx512/avx512+avx512_bf16",
 *        "x86:AuthenticAMD:23:113/w4a16/ref/none".
 * So a record from one CPU model never vouches for another, nor for the same model
 * running another kernel or variant (AMX refused, AVX512-BF16 hidden by a VM).
 * nb_record_key below is the one function that writes keys. The older "family key"
 * ("x86:<vendor>:<family>", "arm:<implementer>:<part>") is still reported and written
 * into records for people; nothing is matched on it.
 *
 * A probe is plain data: tests write probes of other machines by hand.
 */
#ifndef NB_RUNTIME_PROBE_H
#define NB_RUNTIME_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/wformat.h"
#include "kernels/kernels.h"

struct nb_probe_arm {
    int asimd, asimddp, i8mm, bf16, sve; /* HWCAP / HWCAP2 bits the kernel reports */
};

struct nb_probe {
    char arch[16];           /* "x86_64", "aarch64" or the uname machine */
    char vendor[16];         /* x86 CPUID vendor ("AuthenticAMD"); Arm: implementer ("0x41") */
    int family, model;       /* x86 display family / model; Arm: -1 / part number */
    char model_name[128];    /* /proc/cpuinfo "model name" (x86) or CPUID brand string */
    char family_key[64];     /* the old, coarse key (header comment): for people only */
    struct nb_cpu x86;       /* usable: CPU has it AND the OS saves its state (core/cpu.h) */
    struct nb_cpu x86_cpuid; /* what CPUID says, whatever the OS allows */
    uint64_t xcr0;           /* XGETBV(0): state components the OS enabled */
    int amx_permitted;       /* 1/0: Linux granted / refused AMX tile data; -1: not asked */
    struct nb_probe_arm arm;
    int n_logical, n_physical;             /* online CPUs; distinct (package, core) pairs */
    int64_t l1d_bytes, l2_bytes, l3_bytes; /* per instance (cpu0's view); 0: unknown */
    int64_t mem_total_bytes;               /* 0: unknown */
    double read_bw_gbs;                    /* 0: not measured */
    int bw_threads;                        /* threads of that measurement */
};

/* Probe this machine. measure_bw: also measure the read bandwidth on all logical CPUs
 * (about a second, 256 MiB buffer). Never fails: what cannot be read stays 0/"". */
void nb_probe_host(struct nb_probe *p, int measure_bw);

/* The probe as a JSON object (caller frees with cJSON_Delete); NULL on NOMEM. */
cJSON *nb_probe_to_json(const struct nb_probe *p);

/* "avx2 fma ... amx_int8" / "asimd asimddp i8mm" — the usable flags of a probe, into buf. */
void nb_probe_flags_str(const struct nb_probe *p, char *buf, size_t size);
/* The reverse, for a record's cpu.flags: set the usable flags (x86 or Arm, by p->arch)
 * named in a space-separated list; unknown names are skipped. */
void nb_probe_set_flags(struct nb_probe *p, const char *flags);

/* ---------------------------------------------------------------- record keys */

#define NB_CPU_KEY_LEN    64
#define NB_RECORD_KEY_LEN 160

/* The CPU part of a record key ("x86:GenuineIntel:6:207", "arm:0x41:0xd0b") into buf:
 * 1, or 0 with buf "" and *why (a static phrase; why may be NULL) when the probe lacks
 * an architecture, a vendor, a family (x86) or a model / part. */
int nb_probe_cpu_key(const struct nb_probe *p, char *buf, size_t size, const char **why);

/* The record key (header comment) of a run of `path` with the GEMM kernel named `kernel`
 * (a dispatch name: "avx512vnni", "amx", ...) at ISA level `level` on p's
 * CPU, into buf. 1, or 0 with buf "" and *why when there is no cpu key or the kernel
 * needs what p's flags or the level lack (avx512vnni without avx512_vnni, amx without
 * amx_int8 or with tile data refused, ...). Pure: records and hand-written probes are
 * keyed the same way as this host. */
int nb_record_key(const struct nb_probe *p, enum nb_wpath path, const char *kernel,
                  enum nb_isa_level level, char *buf, size_t size, const char **why);

#endif
