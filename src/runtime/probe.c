/* runtime/probe.c — CPU features, OS permissions, topology, caches, memory. */
#include "runtime/probe.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/membw.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18
#endif
#ifdef __aarch64__
#include <sys/auxv.h>
#endif

/* ---------------------------------------------------------------- small file readers */

/* First line of a file into buf (newline stripped); 0 when it cannot be read. */
static int read_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (!ok) return 0;
    buf[strcspn(buf, "\n")] = 0;
    return 1;
}

/* Value of the first "key<spaces>: value" line of /proc/cpuinfo into buf; 0 if absent. */
static int cpuinfo_value(const char *key, char *buf, size_t size)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[1024];
    int found = 0;
    if (!f) return 0;
    size_t klen = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0) continue;
        const char *p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':') continue;
        p++;
        while (*p == ' ')
            p++;
        snprintf(buf, size, "%s", p);
        buf[strcspn(buf, "\n")] = 0;
        found = 1;
    }
    fclose(f);
    return found;
}

/* "48K", "2048K", "32M" -> bytes; 0 on anything else. */
static int64_t parse_size(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 0) return 0;
    if (*end == 'K')
        v *= 1024;
    else if (*end == 'M')
        v *= 1024 * 1024;
    else if (*end == 'G')
        v *= 1024LL * 1024 * 1024;
    return v;
}

static void probe_caches(struct nb_probe *p)
{
    for (int i = 0; i < 16; i++) {
        char path[128], level[16], type[32], size[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!read_line(path, level, sizeof level)) break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_line(path, type, sizeof type)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!read_line(path, size, sizeof size)) continue;
        int lv = atoi(level);
        int64_t bytes = parse_size(size);
        if (lv == 1 && !strcmp(type, "Data")) p->l1d_bytes = bytes;
        if (lv == 2 && strcmp(type, "Instruction") != 0) p->l2_bytes = bytes;
        if (lv == 3 && strcmp(type, "Instruction") != 0) p->l3_bytes = bytes;
    }
}

/* Logical CPUs online, and distinct (package, core) pairs among them. */
static void probe_topology(struct nb_probe *p)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    p->n_logical = n > 0 ? (int)n : 1;
    enum { MAX_CPUS = 1024 };
    static long seen[MAX_CPUS];
    int n_seen = 0, n_cpus_read = 0;
    for (int cpu = 0; cpu < MAX_CPUS && n_cpus_read < p->n_logical; cpu++) {
        char path[128], a[32], b[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (!read_line(path, a, sizeof a)) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        if (!read_line(path, b, sizeof b)) snprintf(b, sizeof b, "0");
        n_cpus_read++;
        long key = atol(b) * 100000 + atol(a);
        int dup = 0;
        for (int i = 0; i < n_seen && !dup; i++)
            dup = seen[i] == key;
        if (!dup && n_seen < MAX_CPUS) seen[n_seen++] = key;
    }
    p->n_physical = n_seen > 0 ? n_seen : p->n_logical;
}

static void probe_memory(struct nb_probe *p)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        long long kb;
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) {
            p->mem_total_bytes = (int64_t)kb * 1024;
            break;
        }
    }
    fclose(f);
}

/* ---------------------------------------------------------------- x86 */

#if defined(__x86_64__) || defined(__i386__)
static uint64_t xgetbv0(void)
{
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

/* The CPUID feature bits alone (what the silicon has), for "CPU vs OS" reporting. */
static void cpuid_raw(struct nb_cpu *c, int *osxsave)
{
    unsigned a, b, cx, d, b7 = 0, c7 = 0, d7 = 0, a71 = 0, b1, c1, d1;
    memset(c, 0, sizeof *c);
    *osxsave = 0;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return;
    *osxsave = (cx >> 27) & 1;
    c->fma = (cx >> 12) & 1;
    c->f16c = (cx >> 29) & 1;
    if ((unsigned)__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b7, c7, d7);
        __cpuid_count(7, 1, a71, b1, c1, d1);
    }
    c->avx2 = (b7 >> 5) & 1;
    c->avx_vnni = (a71 >> 4) & 1;
    c->avx512f = (b7 >> 16) & 1;
    c->avx512dq = (b7 >> 17) & 1;
    c->avx512bw = (b7 >> 30) & 1;
    c->avx512vl = (b7 >> 31) & 1;
    c->avx512_vnni = (c7 >> 11) & 1;
    c->avx512_bf16 = (a71 >> 5) & 1;
    c->amx_bf16 = (d7 >> 22) & 1;
    c->amx_tile = (d7 >> 24) & 1;
    c->amx_int8 = (d7 >> 25) & 1;
}

static void probe_x86(struct nb_probe *p)
{
    unsigned a, b, c, d;
    int osxsave;
    snprintf(p->arch, sizeof p->arch, "x86_64");
    p->x86 = *nb_cpu_get();
    cpuid_raw(&p->x86_cpuid, &osxsave);
    p->xcr0 = osxsave ? xgetbv0() : 0;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        char v[13];
        memcpy(v, &b, 4);
        memcpy(v + 4, &d, 4);
        memcpy(v + 8, &c, 4);
        v[12] = 0;
        snprintf(p->vendor, sizeof p->vendor, "%s", v);
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        int fam = (int)((a >> 8) & 0xf), mod = (int)((a >> 4) & 0xf);
        if (fam == 0xf) fam += (int)((a >> 20) & 0xff);
        if (fam == 0x6 || fam >= 0xf) mod += (int)((a >> 16) & 0xf) << 4;
        p->family = fam;
        p->model = mod;
    }
    if (!cpuinfo_value("model name", p->model_name, sizeof p->model_name) &&
        (unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000004u) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(p->model_name, r, 48);
        p->model_name[48] = 0;
    }
    snprintf(p->family_key, sizeof p->family_key, "x86:%s:%d", p->vendor, p->family);
    p->amx_permitted = -1;
    if (p->x86.amx_tile) {
#ifdef __linux__
        /* Linux hands out the 8 KiB tile-data state only on request (5.16+). */
        p->amx_permitted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
    }
}
#endif

/* ---------------------------------------------------------------- aarch64 */

#ifdef __aarch64__
static void probe_arm(struct nb_probe *p)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    char impl[32] = "", part[32] = "";
    snprintf(p->arch, sizeof p->arch, "aarch64");
    p->arm.asimd = (hw >> 1) & 1;    /* HWCAP_ASIMD */
    p->arm.asimddp = (hw >> 20) & 1; /* HWCAP_ASIMDDP */
    p->arm.sve = (hw >> 22) & 1;     /* HWCAP_SVE */
    p->arm.i8mm = (hw2 >> 13) & 1;   /* HWCAP2_I8MM */
    p->arm.bf16 = (hw2 >> 14) & 1;   /* HWCAP2_BF16 */
    cpuinfo_value("CPU implementer", impl, sizeof impl);
    cpuinfo_value("CPU part", part, sizeof part);
    snprintf(p->vendor, sizeof p->vendor, "%s", impl[0] ? impl : "unknown");
    p->family = -1;
    p->model = (int)strtol(part, NULL, 0);
    if (!cpuinfo_value("model name", p->model_name, sizeof p->model_name))
        snprintf(p->model_name, sizeof p->model_name, "Arm %s part %s", impl, part);
    snprintf(p->family_key, sizeof p->family_key, "arm:%s:%s", impl[0] ? impl : "unknown",
             part[0] ? part : "unknown");
    p->amx_permitted = -1;
}
#endif

void nb_probe_host(struct nb_probe *p, int measure_bw)
{
    memset(p, 0, sizeof *p);
    p->amx_permitted = -1;
#if defined(__x86_64__) || defined(__i386__)
    probe_x86(p);
#elif defined(__aarch64__)
    probe_arm(p);
#else
    snprintf(p->arch, sizeof p->arch, "other");
    snprintf(p->family_key, sizeof p->family_key, "other:unknown");
#endif
    for (char *s = p->model_name; *s; s++)
        if (!isprint((unsigned char)*s)) *s = ' ';
    probe_topology(p);
    probe_caches(p);
    probe_memory(p);
    if (measure_bw) {
        p->bw_threads = p->n_logical;
        p->read_bw_gbs = nb_measure_read_bw(p->n_logical, (size_t)256 << 20, 3);
    }
}

/* ---------------------------------------------------------------- output */

struct flag {
    const char *name;
    int on;
};

/* The flags probes report, in the order they are printed (cpu.flags of a record). */
#define X86_FLAGS(X)                                                                           \
    X(avx2) X(fma) X(f16c) X(avx512f) X(avx512bw) X(avx512vl) X(avx512dq) X(avx512_vnni)       \
        X(avx512_bf16) X(avx_vnni) X(amx_tile) X(amx_int8) X(amx_bf16)
#define ARM_FLAGS(X) X(asimd) X(asimddp) X(i8mm) X(bf16) X(sve)

static int x86_flags(const struct nb_cpu *c, struct flag *f)
{
#define GET(n) {#n, c->n},
    const struct flag all[] = {X86_FLAGS(GET)};
#undef GET
    memcpy(f, all, sizeof all);
    return (int)(sizeof all / sizeof all[0]);
}

static int arm_flags(const struct nb_probe_arm *a, struct flag *f)
{
#define GET(n) {#n, a->n},
    const struct flag all[] = {ARM_FLAGS(GET)};
#undef GET
    memcpy(f, all, sizeof all);
    return (int)(sizeof all / sizeof all[0]);
}

void nb_probe_set_flags(struct nb_probe *p, const char *flags)
{
    int arm = !strcmp(p->arch, "aarch64");
    for (const char *s = flags ? flags : ""; *s;) {
        size_t n = strcspn(s, " ,\t");
        if (n > 0) {
#define SET(dst, name)                                                                         \
    if (n == strlen(#name) && !strncmp(s, #name, n)) (dst)->name = 1;
#define SET_X86(name) SET(&p->x86, name)
#define SET_ARM(name) SET(&p->arm, name)
            if (arm) {
                ARM_FLAGS(SET_ARM)
            } else {
                X86_FLAGS(SET_X86)
            }
#undef SET_ARM
#undef SET_X86
#undef SET
        }
        s += n;
        s += strspn(s, " ,\t");
    }
}

void nb_probe_flags_str(const struct nb_probe *p, char *buf, size_t size)
{
    struct flag f[16];
    int n = !strcmp(p->arch, "aarch64") ? arm_flags(&p->arm, f) : x86_flags(&p->x86, f);
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used + 1 < size; i++) {
        if (!f[i].on) continue;
        int w = snprintf(buf + used, size - used, "%s%s", used ? " " : "", f[i].name);
        if (w < 0) break;
        used += (size_t)w;
    }
}

static cJSON *flags_object(const struct flag *f, int n)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < n; i++)
        cJSON_AddBoolToObject(o, f[i].name, f[i].on);
    return o;
}

cJSON *nb_probe_to_json(const struct nb_probe *p)
{
    struct flag f[16];
    char hex[32];
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "arch", p->arch);
    cJSON_AddStringToObject(o, "vendor", p->vendor);
    cJSON_AddNumberToObject(o, "family", p->family);
    cJSON_AddNumberToObject(o, "model", p->model);
    cJSON_AddStringToObject(o, "model_name", p->model_name);
    cJSON_AddStringToObject(o, "family_key", p->family_key);
    char key[NB_CPU_KEY_LEN];
    if (nb_probe_cpu_key(p, key, sizeof key, NULL))
        cJSON_AddStringToObject(o, "cpu_key", key);
    else
        cJSON_AddNullToObject(o, "cpu_key");
    if (!strcmp(p->arch, "aarch64")) {
        cJSON_AddItemToObject(o, "features", flags_object(f, arm_flags(&p->arm, f)));
    } else {
        cJSON_AddItemToObject(o, "features", flags_object(f, x86_flags(&p->x86, f)));
        cJSON_AddItemToObject(o, "cpuid", flags_object(f, x86_flags(&p->x86_cpuid, f)));
        cJSON *os = cJSON_AddObjectToObject(o, "os");
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)p->xcr0);
        cJSON_AddStringToObject(os, "xcr0", hex);
        cJSON_AddBoolToObject(os, "avx_state", (p->xcr0 & 0x6) == 0x6);
        cJSON_AddBoolToObject(os, "avx512_state", (p->xcr0 & 0xe6) == 0xe6);
        cJSON_AddBoolToObject(os, "amx_state", (p->xcr0 & 0x60000) == 0x60000);
        if (p->amx_permitted < 0)
            cJSON_AddNullToObject(os, "amx_permitted");
        else
            cJSON_AddBoolToObject(os, "amx_permitted", p->amx_permitted);
    }
    cJSON *cores = cJSON_AddObjectToObject(o, "cores");
    cJSON_AddNumberToObject(cores, "logical", p->n_logical);
    cJSON_AddNumberToObject(cores, "physical", p->n_physical);
    cJSON_AddBoolToObject(cores, "smt", p->n_logical > p->n_physical);
    cJSON *cache = cJSON_AddObjectToObject(o, "cache_bytes");
    cJSON_AddNumberToObject(cache, "l1d", (double)p->l1d_bytes);
    cJSON_AddNumberToObject(cache, "l2", (double)p->l2_bytes);
    cJSON_AddNumberToObject(cache, "l3", (double)p->l3_bytes);
    cJSON_AddNumberToObject(o, "mem_total_bytes", (double)p->mem_total_bytes);
    if (p->read_bw_gbs > 0) {
        cJSON_AddNumberToObject(o, "read_bw_gbs", p->read_bw_gbs);
        cJSON_AddNumberToObject(o, "read_bw_threads", p->bw_threads);
    } else {
        cJSON_AddNullToObject(o, "read_bw_gbs");
    }
    return o;
}

/* ---------------------------------------------------------------- record keys */

static int is_x86_arch(const struct nb_probe *p)
{
    return !strcmp(p->arch, "x86_64");
}

int nb_probe_cpu_key(const struct nb_probe *p, char *buf, size_t size, const char **why)
{
    const char *bad = NULL;
    int arm = !strcmp(p->arch, "aarch64");
    buf[0] = 0;
    if (!arm && !is_x86_arch(p))
        bad = "not an x86-64 or aarch64 CPU";
    else if (!p->vendor[0] || !strcmp(p->vendor, "unknown"))
        bad = arm ? "no CPU implementer" : "no CPU vendor";
    else if (!arm && p->family <= 0)
        bad = "no CPU family";
    else if (p->model < 0 || (arm && p->model == 0))
        bad = arm ? "no CPU part" : "no CPU model";
    if (bad) {
        if (why) *why = bad;
        return 0;
    }
    if (arm)
        snprintf(buf, size, "arm:%s:0x%03x", p->vendor, (unsigned)p->model);
    else
        snprintf(buf, size, "x86:%s:%d:%d", p->vendor, p->family, p->model);
    return 1;
}

/* kernel's first word is name */
static int kernel_is(const char *kernel, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(kernel, name, n) && (kernel[n] == 0 || kernel[n] == ' ');
}

int nb_record_key(const struct nb_probe *p, enum nb_wpath path, const char *kernel,
                  enum nb_isa_level level, char *buf, size_t size, const char **why)
{
    char cpu[NB_CPU_KEY_LEN], feats[128] = "";
    const char *bad = NULL, *f[8];
    int n = 0;
    const struct nb_cpu *c = &p->x86;
    size_t klen = kernel ? strcspn(kernel, " ") : 0;
    buf[0] = 0;
    if (!nb_probe_cpu_key(p, cpu, sizeof cpu, &bad)) goto fail;
    if (!klen) {
        bad = "no kernel name";
        goto fail;
    }
    if (is_x86_arch(p)) {
        int k_amx = kernel_is(kernel, "amx"), k_vnni512 = kernel_is(kernel, "avx512vnni");
        int k_avx512 = kernel_is(kernel, "avx512"), k_avxvnni = kernel_is(kernel, "avxvnni");
        int k_avx2 = kernel_is(kernel, "avx2");
        enum nb_isa_level has = nb_cpu_isa_level(c);
        if (level > has)
            bad = "the ISA level is above what the CPU flags allow";
        else if ((k_amx || k_vnni512 || k_avx512) && level < NB_LEVEL_AVX512)
            bad = "an AVX-512 kernel below the AVX-512 level";
        else if ((k_avx2 || k_avxvnni) && level < NB_LEVEL_AVX2)
            bad = "an AVX2 kernel below the AVX2 level";
        else if ((k_amx || k_vnni512) && !c->avx512_vnni)
            bad = "the kernel needs avx512_vnni, which the CPU flags lack";
        else if (k_amx && !(c->amx_tile && c->amx_int8))
            bad = "kernel amx needs amx_tile and amx_int8, which the CPU flags lack";
        else if (k_amx && path == NB_WPATH_W4A16 && !(c->amx_bf16 && c->avx512_bf16))
            bad = "the w4a16 kernel amx needs amx_bf16 and avx512_bf16, which the CPU flags lack";
        else if (k_amx && p->amx_permitted == 0)
            bad = "kernel amx, but the OS refused AMX tile data";
        else if (k_avxvnni && !c->avx_vnni)
            bad = "kernel avxvnni needs avx_vnni, which the CPU flags lack";
        if (bad) goto fail;
        if (level >= NB_LEVEL_AVX512)
            f[n++] = "avx512";
        else if (k_avx2 || k_avxvnni)
            f[n++] = "avx2";
        if (k_avxvnni) f[n++] = "avx_vnni";
        /* the w4a16 kernels: avx512vnni decodes on int16 activations (since 2026-12-06;
         * before, kernel avx512 decoded on bf16 or f32) and prefills on bf16 where the CPU
         * has AVX512-BF16; the tile kernel: bf16 tiles, avx512vnni for the tokens short of a
         * tile */
        const int w16 = path == NB_WPATH_W4A16;
        if (k_vnni512 || (k_amx && !w16)) f[n++] = "avx512_vnni";
        if ((k_avx512 || k_vnni512 || k_amx) && w16 && c->avx512_bf16) f[n++] = "avx512_bf16";
        if (k_amx) f[n++] = w16 ? "amx_bf16" : "amx_int8";
    } else if (!strcmp(p->arch, "aarch64")) {
        const struct nb_probe_arm *a = &p->arm;
        int neon = !strncmp(kernel, "neon", 4), dot = kernel_is(kernel, "neon-dotprod");
        int mm = kernel_is(kernel, "neon-i8mm");
        if (neon && !a->asimd)
            bad = "a NEON kernel needs asimd, which the CPU flags lack";
        else if ((dot || mm) && !a->asimddp)
            bad = "the kernel needs asimddp, which the CPU flags lack";
        else if (mm && !a->i8mm)
            bad = "kernel neon-i8mm needs i8mm, which the CPU flags lack";
        else if (kernel_is(kernel, "neon-bf16") && !a->bf16)
            bad = "kernel neon-bf16 needs bf16, which the CPU flags lack";
        if (bad) goto fail;
        if (neon) f[n++] = "asimd";
        if (dot || mm) f[n++] = "asimddp";
        if (mm) f[n++] = "i8mm";
        if (kernel_is(kernel, "neon-bf16")) f[n++] = "bf16"; /* w4a16 bfmmla; neon is FMA */
    }
    size_t used = 0;
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(feats + used, sizeof feats - used, "%s%s", i ? "+" : "", f[i]);
    int w = snprintf(buf, size, "%s/%s/%.*s/%s", cpu, nb_wpath_name(path), (int)klen, kernel,
                     n ? feats : "none");
    if (w < 0 || (size_t)w >= size) {
        buf[0] = 0;
        bad = "the key is too long";
        goto fail;
    }
    return 1;
fail:
    if (why) *why = bad;
    return 0;
}
