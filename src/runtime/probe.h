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
 * The "family key" names the CPU family that measurement records are matched by:
 *   "x86:<vendor>:<family>"            e.g. "x86:AuthenticAMD:26", "x86:GenuineIntel:6"
 *   "arm:<implementer>:<part>"         e.g. "arm:0x41:0xd0b" (hex, as /proc/cpuinfo has it)
 * A probe is plain data: tests write probes of other machines by hand.
 */
#ifndef NB_RUNTIME_PROBE_H
#define NB_RUNTIME_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/cpu.h"
#include "core/error.h"

struct nb_probe_arm {
    int asimd, asimddp, i8mm, bf16, sve; /* HWCAP / HWCAP2 bits the kernel reports */
};

struct nb_probe {
    char arch[16];           /* "x86_64", "aarch64" or the uname machine */
    char vendor[16];         /* x86 CPUID vendor ("AuthenticAMD"); Arm: implementer ("0x41") */
    int family, model;       /* x86 display family / model; Arm: -1 / part number */
    char model_name[128];    /* /proc/cpuinfo "model name" (x86) or CPUID brand string */
    char family_key[64];     /* see the header comment */
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

#endif
