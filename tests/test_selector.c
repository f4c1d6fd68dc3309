/* test_selector — the weight-path selector over recorded probe answers (AMX Xeon, VNNI
 * Zen 4, this machine's family, AVX2-only, Arm with and without dot-product, phone
 * target), measurement-record parsing (malformed records are errors, not crashes),
 * record keys (runtime/probe.h: a record vouches only for its CPU model and the features
 * its kernel used; older records keyed from their cpu fields; unkeyable ones ignored
 * with a reason), the committed records against hand-written probes of the machines
 * that wrote them, the NIBBLE_WEIGHT_PATH override and the host probe's consistency
 * with dispatch. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "quant/quant.h"
#include "runtime/measurements.h"
#include "runtime/probe.h"
#include "runtime/selector.h"

/* Kernel names differ when this build has no x86 kernels. */
#ifdef NB_HAVE_X86
#define X86K(k) k
#else
#define X86K(k) "ref"
#endif
/* ... and when it has no Arm kernels: the name the CPU wants, and that it runs ref. */
#ifdef NB_HAVE_ARM
#define ARMK(k) k
#else
#define ARMK(k) k " (not built: scalar ref)"
#endif

/* ---------------------------------------------------------------- recorded probes */

static void x86_base(struct nb_probe *p, const char *vendor, int family, int model,
                     const char *name)
{
    memset(p, 0, sizeof *p);
    snprintf(p->arch, sizeof p->arch, "x86_64");
    snprintf(p->vendor, sizeof p->vendor, "%s", vendor);
    p->family = family;
    p->model = model;
    snprintf(p->model_name, sizeof p->model_name, "%s", name);
    snprintf(p->family_key, sizeof p->family_key, "x86:%s:%d", vendor, family);
    p->amx_permitted = -1;
    p->x86.avx2 = p->x86.fma = p->x86.f16c = 1;
    p->n_logical = p->n_physical = 8;
    p->xcr0 = 0x7;
}

static void avx512(struct nb_probe *p)
{
    p->x86.avx512f = p->x86.avx512bw = p->x86.avx512vl = p->x86.avx512dq = 1;
    p->x86.avx512_vnni = p->x86.avx512_bf16 = 1;
    p->xcr0 = 0xe7;
}

static void probe_amx_xeon(struct nb_probe *p)
{
    x86_base(p, "GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+");
    avx512(p);
    p->x86.avx_vnni = 1;
    p->x86.amx_tile = p->x86.amx_int8 = p->x86.amx_bf16 = 1;
    p->xcr0 = 0x600e7;
    p->amx_permitted = 1;
    p->x86_cpuid = p->x86;
}

static void probe_zen4(struct nb_probe *p)
{
    x86_base(p, "AuthenticAMD", 25, 97, "AMD Ryzen 9 7950X");
    avx512(p);
    p->x86_cpuid = p->x86;
}

static void probe_zen5(struct nb_probe *p)
{
    x86_base(p, "AuthenticAMD", 26, 2, "AMD EPYC");
    avx512(p);
    p->x86.avx_vnni = 1;
    p->x86_cpuid = p->x86;
}

/* The 16-core Xeon that wrote docs/measurements/x86-GenuineIntel-6-207-*.json
 * (Emerald Rapids: AMX-INT8/BF16, AVX512-BF16; Linux granted tile data). */
static void probe_amx_207(struct nb_probe *p)
{
    probe_amx_xeon(p);
    p->model = 207;
    snprintf(p->model_name, sizeof p->model_name, "Intel(R) Xeon(R) Processor");
}

static void probe_amx_167(struct nb_probe *p)
{
    probe_amx_xeon(p);
    p->model = 167;
    snprintf(p->model_name, sizeof p->model_name, "Intel(R) Xeon(R) Processor");
}

/* The same model as a 2-core VM that exposes AVX-512 VNNI but neither AVX512-BF16 nor
 * AMX (issue 14's VNNI-only Intel row). */
static void probe_vnni_vm_207(struct nb_probe *p)
{
    x86_base(p, "GenuineIntel", 6, 207, "Intel(R) Xeon(R) Processor");
    avx512(p);
    p->x86.avx512_bf16 = 0;
    p->x86_cpuid = p->x86;
}

#ifdef NB_HAVE_X86 /* (the committed x86 records' tests only) */
/* Another family-6 model with AVX-512 VNNI and no AMX (Ice Lake-SP). */
static void probe_icelake(struct nb_probe *p)
{
    x86_base(p, "GenuineIntel", 6, 106, "Intel(R) Xeon(R) Gold 6338");
    avx512(p);
    p->x86.avx512_bf16 = 0;
    p->x86_cpuid = p->x86;
}
#endif

static void probe_avx2(struct nb_probe *p)
{
    x86_base(p, "AuthenticAMD", 23, 113, "AMD Ryzen 7 3700X");
    p->x86_cpuid = p->x86;
}

static void arm_base(struct nb_probe *p, const char *part, const char *name)
{
    memset(p, 0, sizeof *p);
    snprintf(p->arch, sizeof p->arch, "aarch64");
    snprintf(p->vendor, sizeof p->vendor, "0x41");
    p->family = -1;
    p->model = (int)strtol(part, NULL, 0);
    snprintf(p->model_name, sizeof p->model_name, "%s", name);
    snprintf(p->family_key, sizeof p->family_key, "arm:0x41:%s", part);
    p->amx_permitted = -1;
    p->arm.asimd = 1;
    p->n_logical = p->n_physical = 4;
}

static void probe_arm_dot(struct nb_probe *p)
{
    arm_base(p, "0xd0b", "Cortex-A76");
    p->arm.asimddp = 1;
}

static void probe_arm_nodot(struct nb_probe *p)
{
    arm_base(p, "0xd08", "Cortex-A72");
}

static void probe_arm_i8mm(struct nb_probe *p)
{
    arm_base(p, "0xd40", "Neoverse-V1");
    p->arm.asimddp = p->arm.i8mm = p->arm.bf16 = p->arm.sve = 1;
}

/* ---------------------------------------------------------------- records */

/* A record as `nibble bench --record` wrote it before record keys (the fields the
 * selector reads; the key is derived from the cpu fields), on the CPU `probe` writes. */
static const char *record(void (*probe)(struct nb_probe *), const char *kernel, const char *path,
                          int threads, double tg_best, double pp_best)
{
    static char buf[8][1200];
    static int next;
    char *b = buf[next++ % 8];
    char flags[256];
    struct nb_probe p;
    probe(&p);
    nb_probe_flags_str(&p, flags, sizeof flags);
    snprintf(b, 1200,
             "{\"schema\": \"nibble-measurement-1\", \"cpu\": {\"vendor\": \"%s\", \"family\": "
             "%d, \"model\": %d, \"name\": \"Test CPU\", \"flags\": \"%s\", \"family_key\": "
             "\"%s\"}, \"threads\": %d, \"commit\": \"abc1234\", \"date\": "
             "\"2025-01-01T00:00:00Z\", \"model_file\": \"kjv-7m.nib\", \"model_shape\": "
             "{\"arch\": \"llama\", \"n_layers\": 8, \"n_embd\": 256, \"n_vocab\": 4096}, "
             "\"weight_path\": \"%s\", \"kernel\": \"%s\", \"head_bits\": 4, "
             "\"bits_per_weight\": 4.125, \"pp\": {\"n_prompt\": 128, \"best_ts\": %.2f, "
             "\"median_ts\": %.2f, \"mean_ts\": %.2f, \"stddev_ts\": 10, \"spread_pct\": 4, "
             "\"samples\": [900, 880, 860]}, \"tg\": {\"n_gen\": 64, \"best_ts\": %.2f, "
             "\"median_ts\": %.2f, \"mean_ts\": %.2f, \"stddev_ts\": 1, \"spread_pct\": 2.5, "
             "\"samples\": [1, 2, 3]}, \"read_bw_gbs\": 30, \"roofline_fraction\": 0.5}",
             p.vendor, p.family, p.model, flags, p.family_key, threads, path, kernel, pp_best,
             pp_best * 0.98, pp_best * 0.97, tg_best, tg_best * 0.98, tg_best * 0.97);
    return b;
}

/* ---------------------------------------------------------------- the table */

struct row {
    const char *name;
    void (*probe)(struct nb_probe *);
    enum nb_priority priority;
    int priority_given;
    enum nb_target target;
    const char *records[4]; /* JSON texts, NULL-terminated */
    const char *path, *kernel;
    int head_bits, verified, runs_locally;
    const char *reason; /* a substring one of the reasons must contain */
};

static struct row *rows(int *n)
{
    static struct row r[32];
    /* record() keeps 8 texts: at most 8 calls here. */
    int i = 0;
    const char *zen5_a8 = record(probe_zen5, X86K("avx512vnni"), "w4a8", 2, 300, 900);
    const char *avx2_a8 = record(probe_avx2, X86K("avx2"), "w4a8", 8, 40, 900);
    const char *avx2_a16 = record(probe_avx2, "ref", "w4a16", 8, 55, 900);
    const char *avx2_a16_close = record(probe_avx2, "ref", "w4a16", 8, 40.4, 900);
    const char *avx2_a16_t4 = record(probe_avx2, "ref", "w4a16", 4, 99, 900);
    const char *zen4_a16 = record(probe_zen4, X86K("avx512vnni"), "w4a16", 8, 50, 900);
    /* decode within the 8% noise (+5%), prefill not: the prefill decides */
    const char *avx2_a16_tie_slowpp = record(probe_avx2, "ref", "w4a16", 8, 42, 500);
    /* AMX Xeon (Sapphire Rapids), tile data granted: the AMX kernel (VNNI if its
     * self-check fails); no record of this model: unverified. */
    r[i++] = (struct row){"amx xeon speed",
                          probe_amx_xeon,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
#ifdef NB_HAVE_X86
                          "amx (if its self-check passes, else avx512vnni)",
#else
                          "amx (not built: scalar ref)",
#endif
                          4,
                          0,
                          1,
                          "no measurement record with key x86:GenuineIntel:6:143/w4a8/"};
    r[i++] = (struct row){"amx xeon fidelity",
                          probe_amx_xeon,
                          NB_PRIORITY_FIDELITY,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a16",
#ifdef NB_HAVE_X86 /* AMX-BF16: the w4a16 tile kernel for prefill */
                          "amx (if its self-check passes, else avx512vnni)",
#else
                          "amx (not built: scalar ref)",
#endif
                          8,
                          0,
                          1,
                          "fidelity: w4a16"};
    /* VNNI-only Zen 4: w4a8 for speed, w4a16 for fidelity, w4a8 for memory. */
    r[i++] = (struct row){"zen4 speed",
                          probe_zen4,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          X86K("avx512vnni"),
                          4,
                          0,
                          1,
                          "default w4a8"};
    r[i++] = (struct row){"zen4 fidelity verified",
                          probe_zen4,
                          NB_PRIORITY_FIDELITY,
                          1,
                          NB_TARGET_HOST,
                          {zen4_a16},
                          "w4a16",
                          X86K("avx512vnni"),
                          8,
                          1,
                          1,
                          "verified: zen4-a16.json"};
    r[i++] = (struct row){"zen4 memory",
                          probe_zen4,
                          NB_PRIORITY_MEMORY,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          X86K("avx512vnni"),
                          4,
                          0,
                          1,
                          "memory: w4a8 stores 4.125"};
    /* This machine's family, without and with a record. */
    r[i++] = (struct row){"zen5 no record",
                          probe_zen5,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          X86K("avx512vnni"),
                          4,
                          0,
                          1,
                          "unverified: no measurement record with key x86:AuthenticAMD:26:2/w4a8/"};
    r[i++] = (struct row){"zen5 record",
                          probe_zen5,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {zen5_a8},
                          "w4a8",
                          X86K("avx512vnni"),
                          4,
                          1,
                          1,
                          "verified: zen5-a8.json"};
    /* A record of another family verifies nothing here. */
    r[i++] = (struct row){"zen4 with zen5 record",
                          probe_zen4,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {zen5_a8},
                          "w4a8",
                          X86K("avx512vnni"),
                          4,
                          0,
                          1,
                          "unverified"};
    /* AVX2 only: the faster recorded path, or w4a8 unverified without records. */
    r[i++] = (struct row){"avx2 records say w4a16",
                          probe_avx2,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {avx2_a8, avx2_a16},
                          "w4a16",
                          "ref",
                          4,
                          1,
                          1,
                          "w4a16 decoded faster than w4a8"};
    r[i++] = (struct row){"avx2 no records",
                          probe_avx2,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          X86K("avx2"),
                          4,
                          0,
                          1,
                          "not a measurement"};
    /* A pair whose difference is inside its spread decides nothing. */
    r[i++] = (struct row){"avx2 pair inside spread",
                          probe_avx2,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {avx2_a8, avx2_a16_close},
                          "w4a8",
                          X86K("avx2"),
                          4,
                          1,
                          1,
                          "inconclusive"};
    /* Decode inside the noise (8%), w4a8 prefills 80% faster: w4a8, saying why. */
    r[i++] = (struct row){"avx2 decode tie, prefill decides",
                          probe_avx2,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {avx2_a8, avx2_a16_tie_slowpp},
                          "w4a8",
                          X86K("avx2"),
                          4,
                          1,
                          1,
                          "w4a8 prefilled faster"};
    /* A pair at different thread counts is no side-by-side comparison. */
    r[i++] = (struct row){"avx2 unpaired threads",
                          probe_avx2,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {avx2_a8, avx2_a16_t4},
                          "w4a8",
                          X86K("avx2"),
                          4,
                          1,
                          1,
                          "default w4a8"};
    /* Arm: dot product -> w4a8 (sdot; smmla with i8mm), none -> w4a16; the NEON kernel
     * on an aarch64 build, else the name and "scalar ref"; never verified (no record
     * from Arm hardware). */
    r[i++] = (struct row){"arm dotprod",
                          probe_arm_dot,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          ARMK("neon-dotprod"),
                          4,
                          0,
                          1,
                          "unverified on Arm: no NEON kernel has been measured on Arm hardware"};
    r[i++] = (struct row){"arm i8mm",
                          probe_arm_i8mm,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          ARMK("neon-i8mm"),
                          4,
                          0,
                          1,
                          "the Arm dot-product instructions (asimddp, i8mm)"};
    r[i++] = (struct row){"arm i8mm fidelity",
                          probe_arm_i8mm,
                          NB_PRIORITY_FIDELITY,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a16",
                          ARMK("neon-bf16"),
                          8,
                          0,
                          1,
                          "unverified: no measurement record with key arm:0x41:0xd40/w4a16/"};
    /* --target arm: on an Arm host its own choice; elsewhere a generic dotprod core,
     * the aarch64 build's kernel named, nothing run or verified here. */
    r[i++] = (struct row){"target arm on arm",
                          probe_arm_nodot,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_ARM,
                          {0},
                          "w4a16",
                          ARMK("neon"),
                          4,
                          0,
                          1,
                          "target arm: this host is an Arm CPU: its own choice"};
    r[i++] = (struct row){"target arm from x86",
                          probe_zen5,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_ARM,
                          {zen5_a8},
                          "w4a8",
                          "neon-dotprod (aarch64 build)",
                          4,
                          0,
                          0,
                          "target arm from this x86_64 host: chosen for a generic armv8.2-a "
                          "CPU with dotprod"};
    r[i++] = (struct row){"target arm from x86 fidelity",
                          probe_zen5,
                          NB_PRIORITY_FIDELITY,
                          1,
                          NB_TARGET_ARM,
                          {0},
                          "w4a16",
                          "neon (aarch64 build)",
                          8,
                          0,
                          0,
                          "unverified on Arm"};
    r[i++] = (struct row){"arm no dotprod",
                          probe_arm_nodot,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_HOST,
                          {0},
                          "w4a16",
                          ARMK("neon"),
                          4,
                          0,
                          1,
                          "no dot-product instructions"};
    /* Phone: w8a16 export only, whatever the priority. */
    r[i++] = (struct row){"phone",
                          probe_arm_dot,
                          NB_PRIORITY_SPEED,
                          1,
                          NB_TARGET_PHONE,
                          {0},
                          "w8a16",
                          "none (export only)",
                          8,
                          0,
                          0,
                          "w8a16 export only"};
    r[i++] = (struct row){"phone from x86",
                          probe_zen5,
                          NB_PRIORITY_FIDELITY,
                          1,
                          NB_TARGET_PHONE,
                          {zen5_a8},
                          "w8a16",
                          "none (export only)",
                          8,
                          0,
                          0,
                          "target phone"};
    /* Priority not given: speed, and the agentic-use reason. */
    r[i++] = (struct row){"no priority",
                          probe_zen5,
                          NB_PRIORITY_SPEED,
                          0,
                          NB_TARGET_HOST,
                          {0},
                          "w4a8",
                          X86K("avx512vnni"),
                          4,
                          0,
                          1,
                          "--priority fidelity for agents"};
    *n = i;
    return r;
}

/* Source names of the table's records, by their role. */
static const char *source_of(const char *json)
{
    if (strstr(json, "x86:AuthenticAMD:26")) return "zen5-a8.json";
    if (strstr(json, "x86:AuthenticAMD:25")) return "zen4-a16.json";
    if (strstr(json, "\"w4a16\"")) return "avx2-a16.json";
    return "avx2-a8.json";
}

static int has_reason(const struct nb_choice *c, const char *needle)
{
    for (int i = 0; i < c->n_reasons; i++)
        if (strstr(c->reasons[i], needle)) return 1;
    return 0;
}

static void dump(const struct row *r, const struct nb_choice *c)
{
    print_message("row '%s': %s, kernel '%s', head %d, verified %d\n", r->name,
                  nb_wpath_name(c->path), c->kernel, c->head_bits, c->verified);
    for (int i = 0; i < c->n_reasons; i++)
        print_message("  - %s\n", c->reasons[i]);
}

static void test_table(void **state)
{
    int n;
    struct row *t = rows(&n);
    unsetenv("NIBBLE_WEIGHT_PATH");
    for (int i = 0; i < n; i++) {
        struct nb_probe p;
        struct nb_record recs[4];
        struct nb_choice c;
        int n_recs = 0;
        t[i].probe(&p);
        for (; n_recs < 4 && t[i].records[n_recs]; n_recs++) {
            const char *j = t[i].records[n_recs];
            assert_int_equal(nb_record_parse(j, strlen(j), source_of(j), &recs[n_recs]), NB_OK);
        }
        assert_int_equal(
            nb_select(&p, t[i].priority, t[i].priority_given, t[i].target, recs, n_recs, NULL, &c),
            NB_OK);
        int ok = !strcmp(nb_wpath_name(c.path), t[i].path) && !strcmp(c.kernel, t[i].kernel) &&
                 c.head_bits == t[i].head_bits && c.verified == t[i].verified &&
                 c.runs_locally == t[i].runs_locally && has_reason(&c, t[i].reason);
        if (!ok) {
            dump(&t[i], &c);
            print_message("  expected %s, '%s', head %d, verified %d, runs %d, reason '%s'\n",
                          t[i].path, t[i].kernel, t[i].head_bits, t[i].verified, t[i].runs_locally,
                          t[i].reason);
        }
        assert_true(ok);
        /* Every verified choice names the record that verifies it. */
        if (c.verified) {
            assert_non_null(c.record);
            assert_true(has_reason(&c, c.record->source));
        }
        assert_true(c.bits_per_weight == nb_layout_bpw(c.path, 128, 2048, 2048));
        assert_int_equal(has_reason(&c, "--priority fidelity for agents"), !t[i].priority_given);
    }
}

static void test_override(void **state)
{
    struct nb_probe p;
    struct nb_choice c;
    probe_zen5(&p);
    struct nb_select_overrides ov = {"w4a16", "NIBBLE_WEIGHT_PATH", NULL};
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, NULL, 0, &ov, &c), NB_OK);
    assert_string_equal(nb_wpath_name(c.path), "w4a16");
    assert_true(has_reason(&c, "NIBBLE_WEIGHT_PATH=w4a16 overrides the selector"));
    ov.path = "auto";
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, NULL, 0, &ov, &c), NB_OK);
    assert_string_equal(nb_wpath_name(c.path), "w4a8");
    ov.path = "w5a5";
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, NULL, 0, &ov, &c),
                     NB_ERR_INVALID_ARG);
    assert_non_null(strstr(nb_last_error(), "NIBBLE_WEIGHT_PATH=w5a5"));
    /* the library reads no environment: the variable alone changes nothing */
    setenv("NIBBLE_WEIGHT_PATH", "w4a16", 1);
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, NULL, 0, NULL, &c), NB_OK);
    assert_string_equal(nb_wpath_name(c.path), "w4a8");
    unsetenv("NIBBLE_WEIGHT_PATH");
}

static void test_record_fields(void **state)
{
    struct nb_record r;
    const char *j = record(probe_zen5, "avx512vnni", "w4a8", 2, 123.5, 900);
    assert_int_equal(nb_record_parse(j, strlen(j), "a.json", &r), NB_OK);
    assert_string_equal(r.source, "a.json");
    assert_string_equal(r.family_key, "x86:AuthenticAMD:26");
    assert_string_equal(r.cpu_key, "x86:AuthenticAMD:26:2");
    assert_string_equal(r.key, "x86:AuthenticAMD:26:2/w4a8/avx512vnni/avx512+avx512_vnni");
    assert_int_equal(r.key_derived, 1);
    assert_string_equal(r.kernel, "avx512vnni");
    assert_int_equal(r.path, NB_WPATH_W4A8);
    assert_int_equal(r.threads, 2);
    assert_int_equal(r.head_bits, 4);
    assert_string_equal(r.commit, "abc1234");
    assert_string_equal(r.arch, "llama");
    assert_int_equal(r.n_embd, 256);
    assert_true(r.tg.present && r.tg.best_ts == 123.5 && r.tg.n_tokens == 64);
    assert_int_equal(r.tg.samples, 3);
    assert_true(r.pp.present && r.pp.best_ts == 900 && r.pp.n_tokens == 128);
}

static void test_record_malformed(void **state)
{
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"", "not a JSON object"},
        {"[1, 2]", "not a JSON object"},
        {"{\"cpu\": {\"family_key\": \"x\"", "not a JSON object"},
        {"{\"kernel\": \"avx2\", \"weight_path\": \"w4a8\", \"threads\": 1}", "no tg or pp"},
        {"{\"cpu\": {\"family_key\": 7}, \"kernel\": \"avx2\"}", "weight_path"},
        {"{\"cpu\": {\"family_key\": \"x\"}, \"weight_path\": \"w4a8\", \"threads\": 1}", "kernel"},
        {"{\"cpu\": {\"family_key\": \"x\"}, \"kernel\": \"k\", \"weight_path\": \"w3\"}",
         "weight_path"},
        {"{\"cpu\": {\"family_key\": \"x\"}, \"kernel\": \"k\", \"weight_path\": \"w4a8\", "
         "\"threads\": 0}",
         "threads"},
        {"{\"cpu\": {\"family_key\": \"x\"}, \"kernel\": \"k\", \"weight_path\": \"w4a8\", "
         "\"threads\": 2, \"tg\": {\"best_ts\": \"fast\"}}",
         "no tg or pp figures"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nb_record r;
        assert_int_equal(nb_record_parse(bad[i].json, strlen(bad[i].json), "bad.json", &r),
                         NB_ERR_FORMAT);
        if (!strstr(nb_last_error(), bad[i].msg) || !strstr(nb_last_error(), "bad.json"))
            print_message("case %zu: '%s'\n", i, nb_last_error());
        assert_non_null(strstr(nb_last_error(), "record bad.json"));
        assert_non_null(strstr(nb_last_error(), bad[i].msg));
    }
    struct nb_record r;
    assert_int_equal(nb_record_parse(NULL, 0, NULL, &r), NB_ERR_FORMAT);
    /* A valid record cut short at every length: an error each time, never a crash. */
    const char *j = record(probe_zen5, "avx2", "w4a8", 2, 10, 900);
    for (size_t len = 0; len + 1 < strlen(j); len += 7)
        assert_int_equal(nb_record_parse(j, len, "cut.json", &r), NB_ERR_FORMAT);
}

/* A record() text with "n_depth": depth (a JSON value, as written) as its first field. */
static const char *at_depth(const char *json, const char *depth)
{
    static char buf[4][1400];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "{\"n_depth\": %s, %s", depth, json + 1);
    return b;
}

/* Records of tests on a filled context (bench -d) are read with their depth, and the
 * selector neither verifies with them nor pairs them: their speeds are not the
 * empty-cache speeds the rules compare. A depth that is not a whole number >= 0 is an
 * error, never read as 0. */
static void test_record_depth(void **state)
{
    struct nb_record r, recs[2];
    struct nb_choice c;
    struct nb_probe p;
    const char *a8 = record(probe_zen5, X86K("avx512vnni"), "w4a8", 2, 300, 900);
    assert_int_equal(nb_record_parse(a8, strlen(a8), "d0.json", &r), NB_OK);
    assert_int_equal(r.n_depth, 0); /* written before depth existed */
    const char *j = at_depth(a8, "4096");
    assert_int_equal(nb_record_parse(j, strlen(j), "d4096.json", &r), NB_OK);
    assert_int_equal(r.n_depth, 4096);
    assert_true(r.tg.present && r.tg.best_ts == 300);
    static const char *bad[] = {"\"4096\"", "-1", "1.5", "null", "1e30"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = at_depth(a8, bad[i]);
        assert_int_equal(nb_record_parse(j, strlen(j), "bad.json", &r), NB_ERR_FORMAT);
        assert_non_null(strstr(nb_last_error(), "record bad.json: n_depth"));
    }

    /* verification: the same record at depth 0 verifies, at depth 4096 it does not */
    unsetenv("NIBBLE_WEIGHT_PATH");
    probe_zen5(&p);
    j = at_depth(a8, "0");
    assert_int_equal(nb_record_parse(j, strlen(j), "zen5-a8.json", &recs[0]), NB_OK);
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, recs, 1, NULL, &c), NB_OK);
    assert_true(c.verified && has_reason(&c, "verified: zen5-a8.json"));
    j = at_depth(a8, "4096");
    assert_int_equal(nb_record_parse(j, strlen(j), "zen5-a8-d4096.json", &recs[0]), NB_OK);
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, recs, 1, NULL, &c), NB_OK);
    assert_false(c.verified);
    assert_null(c.record);
    assert_false(has_reason(&c, "zen5-a8-d4096.json"));

    /* a speed pair: w4a16 decodes faster at depth 0 and wins; the same pair at depth,
     * or half of it, is no pair, and the default holds */
    probe_avx2(&p);
    const char *x8 = record(probe_avx2, X86K("avx2"), "w4a8", 8, 40, 900);
    const char *x16 = record(probe_avx2, "ref", "w4a16", 8, 55, 900);
    static const char *depths[3][2] = {{"0", "0"}, {"512", "512"}, {"0", "512"}};
    for (int k = 0; k < 3; k++) {
        j = at_depth(x8, depths[k][0]);
        assert_int_equal(nb_record_parse(j, strlen(j), "avx2-a8.json", &recs[0]), NB_OK);
        j = at_depth(x16, depths[k][1]);
        assert_int_equal(nb_record_parse(j, strlen(j), "avx2-a16.json", &recs[1]), NB_OK);
        assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, recs, 2, NULL, &c),
                         NB_OK);
        if (k == 0) {
            assert_string_equal(nb_wpath_name(c.path), "w4a16");
            assert_true(has_reason(&c, "w4a16 decoded faster than w4a8"));
        } else {
            assert_string_equal(nb_wpath_name(c.path), "w4a8");
            assert_false(has_reason(&c, "decoded faster"));
            assert_false(has_reason(&c, "avx2-a16.json"));
        }
    }
}

static void test_load_dir(void **state)
{
    char *dir = tu_mkdtemp();
    char path[4096];
    struct nb_record *recs = NULL;
    int n = 0;
    snprintf(path, sizeof path, "%s/b-good.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(record(probe_amx_xeon, "avx512vnni", "w4a8", 4, 50, 900), f);
    fclose(f);
    snprintf(path, sizeof path, "%s/a-bad.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"cpu\": ", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a record", f);
    fclose(f);
    assert_int_equal(nb_records_load_dir(dir, &recs, &n), NB_OK);
    assert_int_equal(n, 1);
    assert_string_equal(recs[0].source, "b-good.json");
    free(recs);

    /* NIBBLE_MEASUREMENTS adds to the compiled-in records. */
    int n_builtin = 0;
    assert_int_equal(nb_records_load_builtin(&recs, &n_builtin), NB_OK);
    free(recs);
    assert_int_equal(nb_records_load(dir, &recs, &n), NB_OK);
    assert_int_equal(n, n_builtin + 1);
    free(recs);
    assert_int_equal(nb_records_load("/nonexistent/measurements", &recs, &n), NB_ERR_IO);
    assert_non_null(strstr(nb_last_error(), "/nonexistent/measurements"));
    tu_rmtree(dir);
    free(dir);
}

/* Every record in docs/measurements parses (a bad one would be skipped at run time). */
static void test_builtin_records_parse(void **state)
{
    for (int i = 0; i < nb_n_builtin_records; i++) {
        struct nb_record r;
        const struct nb_builtin_record *b = &nb_builtin_records[i];
        enum nb_status st = nb_record_parse(b->json, b->size, b->name, &r);
        if (st != NB_OK) print_message("%s\n", nb_last_error());
        assert_int_equal(st, NB_OK);
    }
    assert_true(strlen(nb_build_commit()) > 0);
}

/* The selector's kernel names agree with what dispatch.c fills on this host. */
static void test_host_consistent(void **state)
{
    struct nb_probe p;
    struct nb_choice c;
    nb_probe_host(&p, 0);
    assert_true(p.n_logical >= 1 && p.n_physical >= 1 && p.n_physical <= p.n_logical);
    assert_true(p.family_key[0]);
    const char *isa = getenv("NIBBLE_ISA");
    if (!isa || !*isa || !strcmp(isa, "auto")) {
        const enum nb_wpath paths[] = {NB_WPATH_W4A8, NB_WPATH_W4A16, NB_WPATH_W8A16};
        for (int i = 0; i < 3; i++) {
            const char *tab = nb_select_kernel_of_table(nb_kernels_get(), paths[i]);
            /* the selector counts AMX where Linux grants tile data; the dispatcher
             * also needs its self-check (and NIBBLE_AMX not 0), else VNNI stays */
            const char *sel = nb_select_kernel_for(&p, paths[i]);
            if (!strcmp(sel, "amx") && !strcmp(tab, "avx512vnni")) continue;
            assert_string_equal(sel, tab);
        }
    }
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 0, NB_TARGET_HOST, NULL, 0, NULL, &c), NB_OK);
    assert_int_equal(c.runs_locally, 1);
    cJSON *j = nb_probe_to_json(&p);
    assert_non_null(j);
    assert_non_null(cJSON_GetObjectItem(j, "features"));
    assert_non_null(cJSON_GetObjectItem(j, "family_key"));
    cJSON_Delete(j);
    /* auto resolves; an explicit name passes through; a bad one is an error. */
    enum nb_wpath path;
    int head = 0;
    assert_int_equal(nb_select_resolve("auto", NB_PRIORITY_FIDELITY, 1, NULL, &path, &head, NULL), NB_OK);
    assert_int_equal(path, NB_WPATH_W4A16);
    assert_int_equal(head, 8);
    assert_int_equal(nb_select_resolve("w8a16", NB_PRIORITY_SPEED, 1, NULL, &path, NULL, NULL), NB_OK);
    assert_int_equal(path, NB_WPATH_W8A16);
    assert_int_equal(nb_select_resolve("w9", NB_PRIORITY_SPEED, 1, NULL, &path, NULL, NULL),
                     NB_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- record keys */

/* nb_record_key itself: build-independent (it takes the kernel and level). */
static void test_record_key_format(void **state)
{
    struct nb_probe p;
    char k[NB_RECORD_KEY_LEN];
    const char *why = NULL;
    probe_amx_207(&p);
    assert_true(
        nb_record_key(&p, NB_WPATH_W4A8, "amx", NB_LEVEL_AVX512, k, sizeof k, &why));
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a8/amx/avx512+avx512_vnni+amx_int8");
    assert_true(nb_record_key(&p, NB_WPATH_W4A8, "avx512vnni", NB_LEVEL_AVX512, k, sizeof k, NULL));
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a8/avx512vnni/avx512+avx512_vnni");
    /* the w4a16 avx512 kernel (bf16 or f32 decode: records before 2026-12-06) keeps its name
     * with and without its bf16 variant; avx512vnni (int16 decode) names both features */
    assert_true(nb_record_key(&p, NB_WPATH_W4A16, "avx512", NB_LEVEL_AVX512, k, sizeof k, NULL));
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a16/avx512/avx512+avx512_bf16");
    assert_true(
        nb_record_key(&p, NB_WPATH_W4A16, "avx512vnni", NB_LEVEL_AVX512, k, sizeof k, NULL));
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a16/avx512vnni/avx512+avx512_vnni+avx512_bf16");
    probe_vnni_vm_207(&p);
    assert_true(nb_record_key(&p, NB_WPATH_W4A16, "avx512", NB_LEVEL_AVX512, k, sizeof k, NULL));
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a16/avx512/avx512");
    /* AVX2 only: the w4a8 kernel's level, the ref GEMM's none */
    probe_avx2(&p);
    assert_true(nb_record_key(&p, NB_WPATH_W4A8, "avx2", NB_LEVEL_AVX2, k, sizeof k, NULL));
    assert_string_equal(k, "x86:AuthenticAMD:23:113/w4a8/avx2/avx2");
    assert_true(nb_record_key(&p, NB_WPATH_W4A16, "ref", NB_LEVEL_AVX2, k, sizeof k, NULL));
    assert_string_equal(k, "x86:AuthenticAMD:23:113/w4a16/ref/none");
    probe_zen5(&p);
    assert_true(nb_record_key(&p, NB_WPATH_W4A8, "avxvnni", NB_LEVEL_AVX2, k, sizeof k, NULL));
    assert_string_equal(k, "x86:AuthenticAMD:26:2/w4a8/avxvnni/avx2+avx_vnni");
    assert_true(nb_record_key(&p, NB_WPATH_W8A16, "ref", NB_LEVEL_AVX512, k, sizeof k, NULL));
    assert_string_equal(k, "x86:AuthenticAMD:26:2/w8a16/ref/avx512");
    /* Arm: implementer and part, and the NEON features a kernel uses */
    probe_arm_dot(&p);
    assert_true(nb_record_key(&p, NB_WPATH_W4A8, "ref", NB_LEVEL_REF, k, sizeof k, NULL));
    assert_string_equal(k, "arm:0x41:0xd0b/w4a8/ref/none");
    assert_true(nb_record_key(&p, NB_WPATH_W4A8, "neon-dotprod", NB_LEVEL_REF, k, sizeof k, NULL));
    assert_string_equal(k, "arm:0x41:0xd0b/w4a8/neon-dotprod/asimd+asimddp");
    assert_false(nb_record_key(&p, NB_WPATH_W4A8, "neon-i8mm", NB_LEVEL_REF, k, sizeof k, &why));
    assert_non_null(strstr(why, "i8mm"));
    assert_string_equal(k, "");
    probe_arm_i8mm(&p);
    assert_true(nb_record_key(&p, NB_WPATH_W4A8, "neon-i8mm", NB_LEVEL_NEON, k, sizeof k, NULL));
    assert_string_equal(k, "arm:0x41:0xd40/w4a8/neon-i8mm/asimd+asimddp+i8mm");
    /* the w4a16 NEON kernel is FMA: bf16 on the CPU is not a feature it uses; its bfmmla
     * variant is another kernel (neon-bf16), keyed with bf16, refused without it */
    assert_true(nb_record_key(&p, NB_WPATH_W4A16, "neon", NB_LEVEL_NEON, k, sizeof k, NULL));
    assert_string_equal(k, "arm:0x41:0xd40/w4a16/neon/asimd");
    assert_true(nb_record_key(&p, NB_WPATH_W4A16, "neon-bf16", NB_LEVEL_NEON, k, sizeof k, NULL));
    assert_string_equal(k, "arm:0x41:0xd40/w4a16/neon-bf16/asimd+bf16");
    p.arm.bf16 = 0;
    assert_false(nb_record_key(&p, NB_WPATH_W4A16, "neon-bf16", NB_LEVEL_NEON, k, sizeof k, &why));
    assert_non_null(strstr(why, "bf16"));
    p.arm.bf16 = 1;
    /* the probe's own keys, as this build would run there */
    assert_true(nb_select_record_key(&p, NB_WPATH_W4A8, k, sizeof k, NULL));
#ifdef NB_HAVE_ARM
    assert_string_equal(k, "arm:0x41:0xd40/w4a8/neon-i8mm/asimd+asimddp+i8mm");
#else
    assert_string_equal(k, "arm:0x41:0xd40/w4a8/ref/none");
#endif

    /* what cannot be keyed: a kernel the flags or the OS do not allow, no CPU identity */
    probe_amx_207(&p);
    p.amx_permitted = 0;
    assert_false(nb_record_key(&p, NB_WPATH_W4A8, "amx", NB_LEVEL_AVX512, k, sizeof k, &why));
    assert_non_null(strstr(why, "refused"));
    probe_vnni_vm_207(&p);
    assert_false(nb_record_key(&p, NB_WPATH_W4A8, "amx", NB_LEVEL_AVX512, k, sizeof k, &why));
    assert_non_null(strstr(why, "amx_int8"));
    probe_avx2(&p);
    assert_false(
        nb_record_key(&p, NB_WPATH_W4A8, "avx512vnni", NB_LEVEL_AVX512, k, sizeof k, &why));
    assert_false(nb_record_key(&p, NB_WPATH_W4A8, "", NB_LEVEL_AVX2, k, sizeof k, &why));
    p.vendor[0] = 0;
    assert_false(nb_record_key(&p, NB_WPATH_W4A8, "avx2", NB_LEVEL_AVX2, k, sizeof k, &why));
    assert_string_equal(why, "no CPU vendor");
    probe_avx2(&p);
    p.family = 0;
    assert_false(nb_probe_cpu_key(&p, k, sizeof k, &why));
    assert_string_equal(why, "no CPU family");

    /* the probe's own keys: what this build would run there */
    probe_amx_207(&p);
    assert_true(nb_select_record_key(&p, NB_WPATH_W4A8, k, sizeof k, NULL));
#ifdef NB_HAVE_X86
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a8/amx/avx512+avx512_vnni+amx_int8");
    p.amx_permitted = 0; /* refused: the VNNI kernel runs, and that is the key */
    assert_true(nb_select_record_key(&p, NB_WPATH_W4A8, k, sizeof k, NULL));
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a8/avx512vnni/avx512+avx512_vnni");
#else
    assert_string_equal(k, "x86:GenuineIntel:6:207/w4a8/ref/none");
#endif
}

/* The flags of a probe's string come back as the same probe flags. */
static void test_set_flags(void **state)
{
    struct nb_probe p, q = {0};
    char a[256], b[256];
    probe_amx_207(&p);
    nb_probe_flags_str(&p, a, sizeof a);
    snprintf(q.arch, sizeof q.arch, "x86_64");
    nb_probe_set_flags(&q, a);
    nb_probe_flags_str(&q, b, sizeof b);
    assert_string_equal(a, b);
    assert_true(q.x86.amx_int8 && q.x86.avx512_bf16 && !q.arm.asimd);
    struct nb_probe r = {0};
    snprintf(r.arch, sizeof r.arch, "aarch64");
    nb_probe_set_flags(&r, "asimd  i8mm,bogus avx2");
    assert_true(r.arm.asimd && r.arm.i8mm && !r.arm.asimddp && !r.x86.avx2);
    nb_probe_set_flags(&r, NULL);
}

static int n_builtin_keyed(void)
{
    int n = 0;
    for (int i = 0; i < nb_n_builtin_records; i++) {
        struct nb_record r;
        const struct nb_builtin_record *b = &nb_builtin_records[i];
        if (nb_record_parse(b->json, b->size, b->name, &r) == NB_OK && r.key[0]) n++;
    }
    return n;
}

/* Every committed record is keyed (none silently stops matching); one that carries a
 * record_key says what its cpu fields derive (the two ways cannot drift apart). */
static void test_builtin_records_keyed(void **state)
{
    int n_with_key = 0;
    assert_int_equal(n_builtin_keyed(), nb_n_builtin_records);
    for (int i = 0; i < nb_n_builtin_records; i++) {
        struct nb_record r, d;
        const struct nb_builtin_record *b = &nb_builtin_records[i];
        assert_int_equal(nb_record_parse(b->json, b->size, b->name, &r), NB_OK);
        if (!r.key[0]) print_message("%s: %s\n", b->name, r.key_note);
        assert_true(r.key[0] && r.cpu_key[0]);
        assert_ptr_equal(strstr(r.key, r.cpu_key), r.key);
        if (r.key_derived) continue;
        n_with_key++;
        cJSON *j = cJSON_ParseWithLength(b->json, b->size);
        assert_non_null(j);
        cJSON_DeleteItemFromObject(j, "record_key");
        char *t = cJSON_PrintUnformatted(j);
        assert_int_equal(nb_record_parse(t, strlen(t), b->name, &d), NB_OK);
        assert_true(d.key_derived);
        assert_string_equal(d.key, r.key);
        free(t);
        cJSON_Delete(j);
    }
    assert_true(n_with_key >= 4); /* the AMX Xeon's */
}

#ifdef NB_HAVE_X86 /* (the tests of the x86 records below) */
/* Select with the committed records; the verifying record's file name ("" if none). */
/* nb_select on the committed records for probe p (priority given, host target); returns
 * the source of the record that verifies the choice ("" if none). */
static const char *select_probe(const struct nb_probe *p, enum nb_priority prio,
                                struct nb_choice *c)
{
    static char source[128];
    struct nb_record *recs = NULL;
    int n = 0;
    assert_int_equal(nb_records_load_builtin(&recs, &n), NB_OK);
    assert_int_equal(nb_select(p, prio, 1, NB_TARGET_HOST, recs, n, NULL, c), NB_OK);
    snprintf(source, sizeof source, "%s", c->record ? c->record->source : "");
    c->record = NULL;
    free(recs);
    return source;
}

static const char *select_builtin(void (*probe)(struct nb_probe *), enum nb_priority prio,
                                  struct nb_choice *c)
{
    struct nb_probe p;
    probe(&p);
    return select_probe(&p, prio, c);
}

static void dump_choice(const char *what, const struct nb_choice *c)
{
    print_message("%s: %s, kernel '%s', key %s, verified %d\n", what, nb_wpath_name(c->path),
                  c->kernel, c->record_key, c->verified);
    for (int i = 0; i < c->n_reasons; i++)
        print_message("  - %s\n", c->reasons[i]);
}
#endif

/* The AMD Zen 5 records vouch for a hand-written probe of this development machine
 * (and for the host itself, when it is that machine): keyed from their cpu fields. */
static void test_builtin_zen5(void **state)
{
#ifdef NB_HAVE_X86
    struct nb_choice c;
    const char *src = select_builtin(probe_zen5, NB_PRIORITY_SPEED, &c);
    if (strcmp(src, "x86-AuthenticAMD-26-qwen3-1.7b-w4a8-w4a8-t2.json")) dump_choice("zen5", &c);
    assert_string_equal(src, "x86-AuthenticAMD-26-qwen3-1.7b-w4a8-w4a8-t2.json");
    assert_true(c.verified && has_reason(&c, "derived from its cpu fields"));
    /* its w4a16 record ran kernel avx512 (bf16 decode); since 2026-12-06 w4a16 runs
     * avx512vnni (int16 decode) there, which no Zen 5 record measured: no pair */
    assert_true(has_reason(&c, "no w4a8/w4a16 record pair for x86:AuthenticAMD:26:2"));
    src = select_builtin(probe_zen5, NB_PRIORITY_FIDELITY, &c);
    assert_string_equal(src, "");
    assert_false(c.verified);
    assert_string_equal(c.record_key,
                        "x86:AuthenticAMD:26:2/w4a16/avx512vnni/avx512+avx512_vnni+avx512_bf16");
    assert_true(has_reason(&c, "is for this CPU model but key x86:AuthenticAMD:26:2/w4a16/avx512/"));
    /* Zen 4 (family 25) and another Zen 5 model are other CPUs */
    src = select_builtin(probe_zen4, NB_PRIORITY_SPEED, &c);
    assert_string_equal(src, "");
    assert_false(c.verified);

    struct nb_probe h;
    nb_probe_host(&h, 0);
    const char *isa = getenv("NIBBLE_ISA");
    if (!strcmp(h.vendor, "AuthenticAMD") && h.family == 26 && h.model == 2 && h.x86.avx512_vnni &&
        h.x86.avx512_bf16 && (!isa || !*isa || !strcmp(isa, "auto"))) {
        struct nb_record *recs = NULL;
        int n = 0;
        assert_int_equal(nb_records_load_builtin(&recs, &n), NB_OK);
        assert_int_equal(nb_select(&h, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, recs, n, NULL, &c),
                         NB_OK);
        assert_true(c.verified);
        free(recs);
    }
#endif
}

/* The AMX Xeon's records vouch for a probe of that machine: family 6, model 207, AMX
 * flags, tile data granted — and for nothing else of family 6. */
static void test_builtin_amx(void **state)
{
#ifdef NB_HAVE_X86
    struct nb_choice c;
    const char *src = select_builtin(probe_amx_207, NB_PRIORITY_SPEED, &c);
    if (strcmp(src, "x86-GenuineIntel-6-207-w4a8-w4a8-t16.json")) dump_choice("amx 207", &c);
    assert_string_equal(src, "x86-GenuineIntel-6-207-w4a8-w4a8-t16.json");
    assert_string_equal(c.record_key,
                        "x86:GenuineIntel:6:207/w4a8/amx/avx512+avx512_vnni+amx_int8");
    assert_string_equal(c.kernel, "amx (if its self-check passes, else avx512vnni)");
    /* its w4a16 records ran the AVX512-BF16 kernel; with tile data granted w4a16 runs the
     * AMX-BF16 kernel (prefill), which no record of this model measured: no pair */
    assert_true(has_reason(&c, "no w4a8/w4a16 record pair for x86:GenuineIntel:6:207"));
    src = select_builtin(probe_amx_207, NB_PRIORITY_FIDELITY, &c);
    if (c.verified) dump_choice("amx 207 fidelity", &c);
    assert_false(c.verified);
    assert_string_equal(c.record_key,
                        "x86:GenuineIntel:6:207/w4a16/amx/avx512+avx512_bf16+amx_bf16");
    assert_string_equal(c.kernel, "amx (if its self-check passes, else avx512vnni)");

    /* the same model with tile data refused runs VNNI: the VM's VNNI record, not the AMX ones */
    static void (*const others[])(struct nb_probe *) = {probe_vnni_vm_207, probe_icelake,
                                                        probe_amx_xeon};
    for (int i = 0; i < 4; i++) {
        for (int prio = 0; prio < 2; prio++) {
            struct nb_probe p;
            if (i < 3)
                others[i](&p);
            else {
                probe_amx_207(&p);
                p.amx_permitted = 0;
            }
            select_probe(&p, prio ? NB_PRIORITY_FIDELITY : NB_PRIORITY_SPEED, &c);
            if ((i == 0 || i == 3) && !prio) {
                /* model 207 running VNNI (no AMX exposed, or tile data refused): the 2-core
                 * VM's w4a8 record (kernel avx512vnni) vouches for it */
                if (!c.verified) dump_choice("207 on VNNI", &c);
                assert_true(c.verified &&
                            has_reason(&c, "verified: x86-GenuineIntel-6-207-qwen3-1.7b-w4a8"));
                assert_string_equal(c.record_key,
                                    "x86:GenuineIntel:6:207/w4a8/avx512vnni/avx512+avx512_vnni");
                if (i == 3) assert_true(has_reason(&c, "tile data was refused"));
                continue;
            }
            assert_false(has_reason(&c, "decoded faster"));
            if (i == 3 && prio) {
                /* AMX refused: w4a16 runs avx512vnni (int16 decode, bf16 prefill), which the
                 * model's w4a16 records (kernel avx512, bf16 decode) did not measure */
                assert_false(c.verified);
                assert_string_equal(
                    c.record_key,
                    "x86:GenuineIntel:6:207/w4a16/avx512vnni/avx512+avx512_vnni+avx512_bf16");
                continue;
            }
            if (c.verified) dump_choice("family 6, not the AMX machine", &c);
            assert_false(c.verified);
            /* the same model says which of its records exist and why they do not apply */
            if (p.model == 207)
                assert_true(
                    has_reason(&c, "is for this CPU model but key x86:GenuineIntel:6:207/"));
        }
    }
#endif
}

/* A record without record_key is keyed from cpu.vendor/family/model/flags; one with a
 * record_key is matched on it. */
/* The 2-core Xeon VM (family 6 model 167) that wrote docs/measurements/
 * x86-GenuineIntel-6-167-*.json: AMX-INT8/BF16 and AVX512-BF16 exposed, tile data granted;
 * both paths' records ran their AMX kernels (w4a16: the AMX-BF16 prefill kernel). */
static void test_builtin_amx_167(void **state)
{
    (void)state;
#ifdef NB_HAVE_X86
    struct nb_choice c;
    const char *src = select_builtin(probe_amx_167, NB_PRIORITY_SPEED, &c);
    if (!c.verified) dump_choice("amx 167 speed", &c);
    assert_non_null(strstr(src, "x86-GenuineIntel-6-167-qwen3-1.7b-w4a8-w4a8-t"));
    assert_string_equal(c.record_key,
                        "x86:GenuineIntel:6:167/w4a8/amx/avx512+avx512_vnni+amx_int8");
    assert_true(has_reason(&c, "w4a8 decoded faster than w4a16 on x86:GenuineIntel:6:167"));
    src = select_builtin(probe_amx_167, NB_PRIORITY_FIDELITY, &c);
    if (!c.verified) dump_choice("amx 167 fidelity", &c);
    assert_true(c.verified);
    assert_non_null(strstr(src, "x86-GenuineIntel-6-167-qwen3-1.7b-w4a16-w4a16-t"));
    assert_string_equal(c.record_key,
                        "x86:GenuineIntel:6:167/w4a16/amx/avx512+avx512_bf16+amx_bf16");
    /* tile data refused: VNNI and the AVX512-BF16 kernel run, which no record of this
     * model measured */
    for (int prio = 0; prio < 2; prio++) {
        struct nb_probe p;
        probe_amx_167(&p);
        p.amx_permitted = 0;
        select_probe(&p, prio ? NB_PRIORITY_FIDELITY : NB_PRIORITY_SPEED, &c);
        assert_false(c.verified);
        assert_true(has_reason(&c, "tile data was refused") || prio);
        assert_string_equal(c.record_key,
                            prio ? "x86:GenuineIntel:6:167/w4a16/avx512vnni/"
                                   "avx512+avx512_vnni+avx512_bf16"
                                 : "x86:GenuineIntel:6:167/w4a8/avx512vnni/avx512+avx512_vnni");
    }
#else
    (void)probe_amx_167;
#endif
}

static void test_record_old_and_new_keys(void **state)
{
    struct nb_probe p;
    struct nb_record r[2];
    struct nb_choice c;
    char want[NB_RECORD_KEY_LEN], text[1600];
    probe_zen5(&p);
    assert_true(nb_select_record_key(&p, NB_WPATH_W4A8, want, sizeof want, NULL));
    const char *old = record(probe_zen5, X86K("avx512vnni"), "w4a8", 2, 300, 900);
    assert_int_equal(nb_record_parse(old, strlen(old), "old.json", &r[0]), NB_OK);
    assert_true(r[0].key_derived);
    assert_string_equal(r[0].key, want);
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, r, 1, NULL, &c), NB_OK);
    assert_true(c.verified && has_reason(&c, "verified: old.json"));

    /* new format: record_key decides, whatever the other fields say */
    snprintf(text, sizeof text, "{\"record_key\": \"%s\", %s", want, old + 1);
    assert_int_equal(nb_record_parse(text, strlen(text), "new.json", &r[0]), NB_OK);
    assert_false(r[0].key_derived);
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, r, 1, NULL, &c), NB_OK);
    assert_true(c.verified && has_reason(&c, "verified: new.json"));
    assert_false(has_reason(&c, "derived"));
    /* a key of another model on a record whose fields say this one: not this CPU */
    snprintf(text, sizeof text, "{\"record_key\": \"x86:AuthenticAMD:26:68%s\", %s",
             want + strlen("x86:AuthenticAMD:26:2"), old + 1);
    assert_int_equal(nb_record_parse(text, strlen(text), "model68.json", &r[0]), NB_OK);
    assert_string_equal(r[0].cpu_key, "x86:AuthenticAMD:26:2"); /* from the fields */
    assert_int_equal(nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, r, 1, NULL, &c), NB_OK);
    assert_false(c.verified);
}

/* A record that cannot be keyed parses, is never matched, and the selector says so. */
static void test_record_unkeyed(void **state)
{
    static const struct {
        const char *cpu, *note;
    } bad[] = {
        {"", "no record_key, and no usable cpu.vendor"},
        {"\"cpu\": {\"family_key\": \"x86:AuthenticAMD:26\"}, ", "no usable cpu.vendor"},
        {"\"cpu\": {\"vendor\": \"AuthenticAMD\", \"family\": 26, \"model\": 2}, ", "cpu.flags"},
        {"\"cpu\": {\"vendor\": \"\", \"family\": 26, \"model\": 2, \"flags\": \"avx2\"}, ",
         "cpu.vendor"},
        {"\"cpu\": {\"vendor\": \"GenuineIntel\", \"family\": 0, \"model\": 2, \"flags\": \"\"}, ",
         "no CPU family"},
        /* fields that contradict the kernel: no AVX-512 VNNI for kernel avx512vnni */
        {"\"cpu\": {\"vendor\": \"AuthenticAMD\", \"family\": 26, \"model\": 2, \"flags\": "
         "\"avx2 fma f16c\"}, ",
         "none can be derived from its cpu fields"},
        {"\"cpu\": {\"vendor\": \"AuthenticAMD\", \"family\": 26, \"model\": 2, \"flags\": "
         "\"avx2 fma f16c\"}, \"record_key\": 7, ",
         "none can be derived"},
    };
    struct nb_probe p;
    probe_zen5(&p);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[600];
        struct nb_record r[2];
        struct nb_choice c;
        snprintf(text, sizeof text,
                 "{%s\"kernel\": \"avx512vnni\", \"weight_path\": \"w4a8\", \"threads\": 2, "
                 "\"tg\": {\"n_gen\": 64, \"best_ts\": 70}}",
                 bad[i].cpu);
        assert_int_equal(nb_record_parse(text, strlen(text), "nokey.json", &r[0]), NB_OK);
        if (r[0].key[0] || !strstr(r[0].key_note, bad[i].note))
            print_message("case %zu: key '%s', note '%s'\n", i, r[0].key, r[0].key_note);
        assert_string_equal(r[0].key, "");
        assert_non_null(strstr(r[0].key_note, bad[i].note));
        const char *good = record(probe_zen5, X86K("avx512vnni"), "w4a8", 2, 300, 900);
        assert_int_equal(nb_record_parse(good, strlen(good), "good.json", &r[1]), NB_OK);
        for (int with_good = 0; with_good < 2; with_good++) {
            assert_int_equal(
                nb_select(&p, NB_PRIORITY_SPEED, 1, NB_TARGET_HOST, r, 1 + with_good, NULL, &c),
                NB_OK);
            assert_int_equal(c.verified, with_good);
            assert_true(has_reason(&c, "ignored: 1 measurement record that cannot be keyed to a "
                                       "CPU: nokey.json ("));
            assert_true(has_reason(&c, bad[i].note));
            assert_false(c.record && !strcmp(c.record->source, "nokey.json"));
        }
    }
}

static void test_names(void **state)
{
    enum nb_priority p;
    enum nb_target t;
    assert_true(nb_priority_from_name("fidelity", &p) && p == NB_PRIORITY_FIDELITY);
    assert_false(nb_priority_from_name("fast", &p));
    assert_false(nb_priority_from_name(NULL, &p));
    assert_true(nb_target_from_name("phone", &t) && t == NB_TARGET_PHONE);
    assert_true(nb_target_from_name("arm", &t) && t == NB_TARGET_ARM);
    assert_string_equal(nb_target_name(NB_TARGET_ARM), "arm");
    assert_false(nb_target_from_name("watch", &t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),           cmocka_unit_test(test_override),
        cmocka_unit_test(test_record_fields),   cmocka_unit_test(test_record_malformed),
        cmocka_unit_test(test_record_depth),
        cmocka_unit_test(test_load_dir),        cmocka_unit_test(test_builtin_records_parse),
        cmocka_unit_test(test_host_consistent), cmocka_unit_test(test_names),
        cmocka_unit_test(test_record_key_format), cmocka_unit_test(test_set_flags),
        cmocka_unit_test(test_builtin_records_keyed), cmocka_unit_test(test_builtin_zen5),
        cmocka_unit_test(test_builtin_amx), cmocka_unit_test(test_builtin_amx_167),
        cmocka_unit_test(test_record_old_and_new_keys),
        cmocka_unit_test(test_record_unkeyed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
