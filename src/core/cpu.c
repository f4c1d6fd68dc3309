/* core/cpu.c — CPUID / XGETBV probe (x86-64), HWCAP probe (aarch64). */
#include "core/cpu.h"

#include <pthread.h>
#include <string.h>

static struct nb_cpu g_cpu;
static char g_str[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xgetbv0(void)
{
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void probe_x86(struct nb_cpu *c)
{
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    int osxsave = (cx >> 27) & 1, avx = (cx >> 28) & 1;
    int fma = (cx >> 12) & 1, f16c = (cx >> 29) & 1;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    int os_ymm = (xcr0 & 0x6) == 0x6;         /* SSE + AVX state */
    int os_zmm = (xcr0 & 0xe6) == 0xe6;       /* + opmask, ZMM_Hi256, Hi16_ZMM */
    int os_amx = (xcr0 & 0x60000) == 0x60000; /* XTILECFG + XTILEDATA */
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b7, c7, d7);
        unsigned b1, c1, d1;
        __cpuid_count(7, 1, a71, b1, c1, d1);
    }
    if (!(avx && os_ymm)) return;
    c->fma = fma;
    c->f16c = f16c;
    c->avx2 = (b7 >> 5) & 1;
    c->avx_vnni = c->avx2 && ((a71 >> 4) & 1);
    if (os_zmm) {
        c->avx512f = (b7 >> 16) & 1;
        c->avx512dq = c->avx512f && ((b7 >> 17) & 1);
        c->avx512bw = c->avx512f && ((b7 >> 30) & 1);
        c->avx512vl = c->avx512f && ((b7 >> 31) & 1);
        c->avx512_vnni = c->avx512f && ((c7 >> 11) & 1);
        c->avx512_bf16 = c->avx512f && ((a71 >> 5) & 1);
    }
    if (os_amx) {
        c->amx_bf16 = (d7 >> 22) & 1;
        c->amx_tile = (d7 >> 24) & 1;
        c->amx_int8 = (d7 >> 25) & 1;
    }
}
#endif

#ifdef __aarch64__
#include <sys/auxv.h>

/* The bits of <asm/hwcap.h>, spelled here so older headers build too. */
#define HWCAP_ASIMD_BIT   (1ul << 1)
#define HWCAP_ASIMDDP_BIT (1ul << 20)
#define HWCAP_SVE_BIT     (1ul << 22)
#define HWCAP2_I8MM_BIT   (1ul << 13)
#define HWCAP2_BF16_BIT   (1ul << 14)

static void probe_arm(struct nb_cpu *c)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    c->asimd = (hw & HWCAP_ASIMD_BIT) != 0;
    /* the kernels using these also need asimd: never report one without it */
    c->asimddp = c->asimd && (hw & HWCAP_ASIMDDP_BIT) != 0;
    c->i8mm = c->asimd && (hw2 & HWCAP2_I8MM_BIT) != 0;
    c->bf16 = c->asimd && (hw2 & HWCAP2_BF16_BIT) != 0;
    c->sve = (hw & HWCAP_SVE_BIT) != 0;
}
#endif

static void probe(void)
{
    memset(&g_cpu, 0, sizeof g_cpu);
#if defined(__x86_64__) || defined(__i386__)
    probe_x86(&g_cpu);
#endif
#ifdef __aarch64__
    probe_arm(&g_cpu);
#endif
    const struct {
        const char *name;
        int on;
    } f[] = {{"avx2", g_cpu.avx2},
             {"fma", g_cpu.fma},
             {"f16c", g_cpu.f16c},
             {"avx512f", g_cpu.avx512f},
             {"avx512bw", g_cpu.avx512bw},
             {"avx512vl", g_cpu.avx512vl},
             {"avx512dq", g_cpu.avx512dq},
             {"avx512_vnni", g_cpu.avx512_vnni},
             {"avx512_bf16", g_cpu.avx512_bf16},
             {"avx_vnni", g_cpu.avx_vnni},
             {"amx_tile", g_cpu.amx_tile},
             {"amx_int8", g_cpu.amx_int8},
             {"amx_bf16", g_cpu.amx_bf16},
             {"asimd", g_cpu.asimd},
             {"asimddp", g_cpu.asimddp},
             {"i8mm", g_cpu.i8mm},
             {"bf16", g_cpu.bf16},
             {"sve", g_cpu.sve}};
    g_str[0] = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].on) {
            if (g_str[0]) strcat(g_str, " ");
            strcat(g_str, f[i].name);
        }
}

const struct nb_cpu *nb_cpu_get(void)
{
    pthread_once(&g_once, probe);
    return &g_cpu;
}

const char *nb_cpu_flags_str(void)
{
    pthread_once(&g_once, probe);
    return g_str;
}
