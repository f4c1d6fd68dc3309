/* kernels/dispatch.c — probe the CPU once, fill the kernel table.
 *
 * Levels: "ref" (scalar everywhere), "avx2" (256-bit kernels; AVX-VNNI when present),
 * "avx512" (AVX-512 F/BW/VL/DQ; VNNI for w4a8). The best level the CPU supports is
 * used unless NIBBLE_ISA=ref|avx2|avx512 asks for a lower one (a level the CPU lacks
 * falls back, with a warning). SIMD variants so far: the X16 int4 kernels, the
 * activation quantizer and (AVX-512) the gated activation, RMSNorm, the float dot/axpy, float-weight GEMMs and the
 * prefill attention tile; the rest of the table stays reference.
 *
 * AMX (avx512 level): when the CPU has amx_tile + amx_int8 + AVX-512 VNNI, Linux grants
 * tile data (arch_prctl ARCH_REQ_XCOMP_PERM) and NIBBLE_AMX is not "0", the AMX w4a8
 * kernel runs a self-check on first use (small random problems against
 * nb_gemm_w4a8_x16_ref, bit-exact or within 1e-5 of the output scale) and only then
 * becomes gemm_w4a8_x16, with isa "avx512+amx (unverified)"; otherwise a warning and
 * VNNI stays. Unverified: never measured on an AMX machine.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/log.h"
#include "kernels/kernels.h"

static const struct nb_kernels k_ref = {
    .isa = "ref",
    .gemm_f32 = nb_gemm_f32_ref,
    .gemm_f16 = nb_gemm_f16_ref,
    .gemm_bf16 = nb_gemm_bf16_ref,
    .dot_f32 = nb_dot_f32_ref,
    .axpy_f32 = nb_axpy_f32_ref,
    .gemm_w4a8 = nb_gemm_w4a8_ref,
    .gemm_w4a16 = nb_gemm_w4a16_ref,
    .gemm_w8a16 = nb_gemm_w8a16_ref,
    .act_quant_q8 = nb_act_quant_q8_ref,
    .gemm_w4a8_x16 = nb_gemm_w4a8_x16_ref,
    .gemm_w4a16_x16 = nb_gemm_w4a16_x16_ref,
    .attn_tile = nb_attn_tile_ref,
    .glu = nb_glu_ref,
    .rmsnorm = nb_rmsnorm_ref,
};

static struct nb_kernels g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

enum level { LVL_REF, LVL_AVX2, LVL_AVX512 };

#ifdef NB_HAVE_X86
static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* One random X16 problem through the AMX kernel and the reference: 1 if they agree. */
static int amx_check_one(int group, int64_t n_out, int64_t n_in, int n_tok, int64_t r0, int64_t r1,
                         uint64_t *rng)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A8, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return 0;
    const int64_t ldxq = n_in + 64, ldxg = ldxq / 32, ldy = n_out + 16;
    uint8_t *blob = aligned_alloc(64, (size_t)pl.total);
    int8_t *xq = malloc((size_t)(n_tok * ldxq));
    float *xd = malloc(sizeof(float) * (size_t)(n_tok * ldxg));
    int32_t *xs = calloc((size_t)(n_tok * ldxg), sizeof(int32_t));
    float *ya = malloc(sizeof(float) * (size_t)(n_tok * ldy));
    float *yr = malloc(sizeof(float) * (size_t)(n_tok * ldy));
    int ok = 0;
    if (!blob || !xq || !xd || !xs || !ya || !yr) goto out;
    memset(blob, 0, (size_t)pl.total);
    for (int64_t i = 0; i < pl.size[0]; i++)
        blob[pl.offset[0] + i] = (uint8_t)xorshift(rng);
    for (int64_t i = 0; i < pl.size[1] / 2; i++) { /* bf16 scales in [2^-10, 2^-6) */
        float f = ldexpf(1.0f + (float)(xorshift(rng) % 1000) / 1000.0f, -10 + (int)(i % 4));
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(blob + pl.offset[1] + 2 * i, &h, 2);
    }
    for (int t = 0; t < n_tok; t++)
        for (int64_t g = 0; g < n_in / group; g++) {
            xd[t * ldxg + g] = (float)(1 + xorshift(rng) % 100) / 4096.0f;
            for (int64_t k = g * group; k < (g + 1) * group; k++) {
                int8_t q = (int8_t)((int)(xorshift(rng) % 255) - 127);
                xq[t * ldxq + k] = q;
                xs[t * ldxg + g] += q;
            }
        }
    for (int64_t i = 0; i < n_tok * ldy; i++)
        ya[i] = yr[i] = 0.0f;
    nb_gemm_w4a8_x16_amx(ya, ldy, xq, xd, xs, ldxq, ldxg, blob, n_out, n_in, group, n_tok, r0, r1);
    nb_gemm_w4a8_x16_ref(yr, ldy, xq, xd, xs, ldxq, ldxg, blob, n_out, n_in, group, n_tok, r0, r1);
    if (!memcmp(ya, yr, sizeof(float) * (size_t)(n_tok * ldy))) {
        ok = 1;
        goto out;
    }
    double scale = 0;
    for (int64_t i = 0; i < n_tok * ldy; i++)
        scale = fmax(scale, fabs((double)yr[i]));
    ok = 1;
    for (int64_t i = 0; i < n_tok * ldy; i++)
        if (!(fabs((double)ya[i] - yr[i]) <= 1e-5 * scale)) ok = 0;
out:
    free(blob), free(xq), free(xd), free(xs), free(ya), free(yr);
    return ok;
}

static int g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;
/* nb_kernels_configure: the cap on the level (-1: none) and AMX allowed; read once by
 * the probe, so they must be set before the first nb_kernels_get */
static int g_cap = -1, g_allow_amx = 1, g_probed;

static void amx_probe(void)
{
    const struct nb_cpu *c = nb_cpu_get();
    if (!(c->amx_tile && c->amx_int8 && c->avx512_vnni)) return;
    if (!g_allow_amx) return;
    if (!nb_amx_request_perm()) {
        NB_LOGW("AMX: Linux refused tile data (arch_prctl); keeping the VNNI w4a8 kernel");
        return;
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    /* groups 32 / 64 / 128, odd row blocks, token remainders, a sub-range of rows */
    int ok = amx_check_one(128, 48, 256, 35, 0, 48, &rng) &&
             amx_check_one(64, 32, 192, 16, 0, 32, &rng) &&
             amx_check_one(32, 64, 96, 49, 16, 48, &rng);
    if (!ok) {
        NB_LOGW("AMX: the w4a8 kernel failed its self-check against the reference; keeping "
                "VNNI");
        return;
    }
    g_amx_ok = 1;
    NB_LOGD("AMX: w4a8 kernel passed its self-check (unverified: never measured)");
}

/* 1 when the AMX w4a8 kernel may be used (asked once, self-checked once). */
static int amx_usable(void)
{
    pthread_once(&g_amx_once, amx_probe);
    return g_amx_ok;
}
#endif

static enum level cpu_level(void)
{
#ifdef NB_HAVE_X86
    const struct nb_cpu *c = nb_cpu_get();
    if (c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx2 && c->fma && c->f16c)
        return LVL_AVX512;
    if (c->avx2 && c->fma && c->f16c) return LVL_AVX2;
#endif
    return LVL_REF;
}

static void fill(struct nb_kernels *k, enum level lvl)
{
    *k = k_ref;
#ifdef NB_HAVE_X86
    const struct nb_cpu *c = nb_cpu_get();
    if (lvl >= LVL_AVX2) {
        k->isa = "avx2";
        k->gemm_w4a8_x16 = c->avx_vnni ? nb_gemm_w4a8_x16_avxvnni : nb_gemm_w4a8_x16_avx2;
    }
    if (lvl >= LVL_AVX512) {
        k->isa = "avx512";
        if (c->avx512_vnni) k->gemm_w4a8_x16 = nb_gemm_w4a8_x16_avx512vnni;
        if (c->avx512_vnni && amx_usable()) {
            k->isa = "avx512+amx (unverified)";
            k->gemm_w4a8_x16 = nb_gemm_w4a8_x16_amx;
        }
        k->gemm_w4a16_x16 =
            c->avx512_bf16 ? nb_gemm_w4a16_x16_avx512bf16 : nb_gemm_w4a16_x16_avx512;
        k->act_quant_q8 = nb_act_quant_q8_avx512;
        k->dot_f32 = nb_dot_f32_avx512;
        k->axpy_f32 = nb_axpy_f32_avx512;
        k->attn_tile = nb_attn_tile_avx512;
        k->glu = nb_glu_avx512;
        k->rmsnorm = nb_rmsnorm_avx512;
        k->gemm_f32 = nb_gemm_f32_avx512;
        k->gemm_f16 = nb_gemm_f16_avx512;
        k->gemm_bf16 = nb_gemm_bf16_avx512;
    }
#else
    (void)lvl;
#endif
}

/* "ref", "avx2", "avx512" -> a level; -1 for another name. One parser for
 * nb_kernels_configure and nb_kernels_for_isa. */
static int level_of_name(const char *isa)
{
    return !strcmp(isa, "ref")      ? LVL_REF
           : !strcmp(isa, "avx2")   ? LVL_AVX2
           : !strcmp(isa, "avx512") ? LVL_AVX512
                                    : -1;
}

static void probe(void)
{
    enum level lvl = cpu_level();
    if (g_cap >= 0) {
        if ((enum level)g_cap > lvl)
            NB_LOGW("kernels: this CPU lacks the level asked for, using the best it has");
        else
            lvl = (enum level)g_cap;
    }
    fill(&g_table, lvl);
    __atomic_store_n(&g_probed, 1, __ATOMIC_RELEASE);
    NB_LOGD("kernels: %s (cpu: %s)", g_table.isa, nb_cpu_flags_str());
}

enum nb_status nb_kernels_configure(const char *isa, int allow_amx)
{
    if (__atomic_load_n(&g_probed, __ATOMIC_ACQUIRE))
        return nb_set_error(NB_ERR_INVALID_ARG, "kernels: configure before the first use");
    int cap = -1;
    if (isa && *isa && strcmp(isa, "auto") != 0 && (cap = level_of_name(isa)) < 0)
        return nb_set_error(NB_ERR_INVALID_ARG, "kernels: unknown ISA level '%s' (auto, ref, "
                            "avx2, avx512)", isa);
    g_cap = cap;
    g_allow_amx = allow_amx != 0;
    return NB_OK;
}

const struct nb_kernels *nb_kernels_get(void)
{
    pthread_once(&g_once, probe);
    return &g_table;
}

const struct nb_kernels *nb_kernels_ref(void)
{
    return &k_ref;
}

int nb_kernels_for_isa(const char *isa, struct nb_kernels *out)
{
    int want = level_of_name(isa);
    if (want < 0 || (enum level)want > cpu_level()) return 0;
    fill(out, (enum level)want);
    return 1;
}
