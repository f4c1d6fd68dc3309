/* kernels/dispatch.c — probe the CPU once, fill the process's kernel table.
 *
 * Levels: "ref" (scalar everywhere), "avx2" (256-bit kernels; AVX-VNNI when present),
 * "avx512" (AVX-512 F/BW/VL/DQ; VNNI for w4a8), and on aarch64 "neon" (dotprod / i8mm
 * variants when the HWCAPs say so). The best level the CPU supports is
 * used unless nb_kernels_configure (the CLI's NIBBLE_ISA) asks for a lower one (a level
 * the CPU lacks falls back, with a warning). Which kernel each weight format gets at a
 * level is decided in one place, nb_kernels_fill (kernels/table.c); this file decides
 * the level and whether the AMX kernel may run.
 *
 * AMX (avx512 level): when the CPU has amx_tile + amx_int8 + AVX-512 VNNI, Linux grants
 * tile data (arch_prctl ARCH_REQ_XCOMP_PERM) and NIBBLE_AMX is not "0", the AMX kernels
 * (w4a8; where the CPU has AMX-BF16 and AVX512-BF16 the w4a16 AMX-BF16 prefill kernel;
 * with NIBBLE_AMX=all also the seven GGUF block formats' records, correct on AMX tiles but
 * measured no faster than VNNI in situ: opt-in) run a
 * self-check on first use (small random problems against their _ref twins: bit-exact or
 * within 1e-5 of the output scale; w4a16 within 2^-8 of each output's term magnitudes) and
 * only then enter the table, with isa "avx512+amx"; otherwise a warning and VNNI stays.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/fp.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"

static struct nb_kernels g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* nb_kernels_configure: the cap on the level (-1: none) and AMX allowed; read once by
 * the probe, so they must be set before the first nb_kernels_get */
static int g_cap = -1, g_allow_amx = 1, g_probed;

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

/* One random problem in each GGUF block format's records through the AMX kernel and the
 * reference (records are any bytes with finite f16 scales): 1 if every one agrees
 * (bit-exact, or within 1e-5 of the output scale). */
static int amx_check_kq(uint64_t *rng)
{
    static const struct {
        enum nb_wformat f;
        nb_gemm_kq_fn amx, ref;
        int d, dmin; /* byte offsets of the f16 scales in a record (-1: none) */
    } fs[] = {
        {NB_WF_Q4_K_X16, nb_gemm_q4_k_x16_amx, nb_gemm_q4_k_x16_ref, NB_Q4_K_X16_D, NB_Q4_K_X16_DMIN},
        {NB_WF_Q5_K_X16, nb_gemm_q5_k_x16_amx, nb_gemm_q5_k_x16_ref, NB_Q5_K_X16_D, NB_Q5_K_X16_DMIN},
        {NB_WF_Q6_K_X16, nb_gemm_q6_k_x16_amx, nb_gemm_q6_k_x16_ref, NB_Q6_K_X16_D, -1},
        {NB_WF_IQ4_XS_X16, nb_gemm_iq4_xs_x16_amx, nb_gemm_iq4_xs_x16_ref, NB_IQ4_XS_X16_D, -1},
        {NB_WF_Q4_0_X16, nb_gemm_q4_0_x16_amx, nb_gemm_q4_0_x16_ref, NB_Q4_0_X16_D, -1},
        {NB_WF_Q8_0_X16, nb_gemm_q8_0_x16_amx, nb_gemm_q8_0_x16_ref, NB_Q8_0_X16_D, -1},
        {NB_WF_IQ4_NL_X16, nb_gemm_iq4_nl_x16_amx, nb_gemm_iq4_nl_x16_ref, NB_Q4_0_X16_D, -1},
    };
    const int64_t n_out = 32, n_tok = 35;
    int ok = 1;
    for (size_t fi = 0; fi < sizeof fs / sizeof *fs && ok; fi++) {
        struct nb_block_info bi;
        if (!nb_wformat_block(fs[fi].f, &bi)) return 0;
        const int64_t n_in = 2 * (int64_t)bi.rec_k, nrec = n_out / 16 * (n_in / bi.rec_k);
        const int64_t ldxq = n_in + 64, ldxg = ldxq / 16, ldy = n_out + 16;
        const int nd = bi.rec_k == 64 ? 32 : 16; /* f16 scales a record */
        uint8_t *blob = aligned_alloc(64, (size_t)(nrec * bi.rec_bytes));
        int8_t *xq = malloc((size_t)(n_tok * ldxq));
        float *x = malloc(sizeof(float) * (size_t)n_in);
        float *xd = calloc((size_t)(n_tok * ldxg), sizeof(float));
        int32_t *xs = calloc((size_t)(n_tok * ldxg), sizeof(int32_t));
        float *ya = calloc((size_t)(n_tok * ldy), sizeof(float));
        float *yr = calloc((size_t)(n_tok * ldy), sizeof(float));
        if (!blob || !xq || !x || !xd || !xs || !ya || !yr) ok = 0;
        for (int64_t i = 0; ok && i < nrec * bi.rec_bytes; i++) blob[i] = (uint8_t)xorshift(rng);
        for (int64_t r = 0; ok && r < nrec; r++)
            for (int j = 0; j < nd; j++) { /* f16 in [2^-10, 2^-8): 0x1400 + mantissa */
                uint16_t h = (uint16_t)(0x1400 + xorshift(rng) % 0x800);
                memcpy(blob + r * bi.rec_bytes + fs[fi].d + 2 * j, &h, 2);
                if (fs[fi].dmin >= 0) memcpy(blob + r * bi.rec_bytes + fs[fi].dmin + 2 * j, &h, 2);
            }
        for (int64_t t = 0; ok && t < n_tok; t++) {
            for (int64_t i = 0; i < n_in; i++) x[i] = (float)((int)(xorshift(rng) % 2001) - 1000);
            if (bi.rec_k == 64)
                nb_act_quant_q8_ref(x, n_in, 32, xq + t * ldxq, xd + t * ldxg, xs + t * ldxg);
            else
                nb_act_quant_q8k(nb_act_quant_q8_ref, x, n_in, xq + t * ldxq, xd + t * ldxg,
                                 xs + t * ldxg);
        }
        if (ok) {
            fs[fi].amx(ya, ldy, xq, xd, xs, ldxq, ldxg, blob, n_out, n_in, (int)n_tok, 0, n_out);
            fs[fi].ref(yr, ldy, xq, xd, xs, ldxq, ldxg, blob, n_out, n_in, (int)n_tok, 0, n_out);
            double scale = 0;
            for (int64_t i = 0; i < n_tok * ldy; i++) scale = fmax(scale, fabs((double)yr[i]));
            for (int64_t i = 0; i < n_tok * ldy; i++)
                if (!(fabs((double)ya[i] - yr[i]) <= 1e-5 * scale)) ok = 0;
        }
        free(blob), free(xq), free(x), free(xd), free(xs), free(ya), free(yr);
    }
    return ok;
}

/* One random w4a16 X16 problem through fn and the reference: 1 if every output is within
 * 2^-8 of its terms' magnitude sum_k (|d| q_k + |m|) |x_k| (bf16 activations), which the
 * reference gives on |x| with |m| (d > 0, q >= 0). */
static int check_w4a16_one(nb_gemm_w4a16_fn fn, int group, int64_t n_out, int64_t n_in, int n_tok,
                           uint64_t *rng)
{
    struct nb_layout_planes pl;
    if (!nb_layout_planes_x(NB_WPATH_W4A16, NB_LAYOUT_X16, group, n_out, n_in, &pl)) return 0;
    const int64_t ldx = n_in + 16, ldy = n_out;
    uint8_t *blob = aligned_alloc(64, (size_t)pl.total);
    uint8_t *babs = aligned_alloc(64, (size_t)pl.total);
    float *x = malloc(sizeof(float) * (size_t)(n_tok * ldx));
    float *xa = malloc(sizeof(float) * (size_t)(n_tok * ldx));
    float *ya = calloc((size_t)(n_tok * ldy), sizeof(float));
    float *yr = calloc((size_t)(n_tok * ldy), sizeof(float));
    float *mag = calloc((size_t)(n_tok * ldy), sizeof(float));
    float *scratch = malloc(sizeof(float) * (size_t)n_in);
    int ok = 0;
    if (!blob || !babs || !x || !xa || !ya || !yr || !mag || !scratch) goto out;
    memset(blob, 0, (size_t)pl.total);
    for (int64_t i = 0; i < pl.size[0]; i++)
        blob[pl.offset[0] + i] = (uint8_t)xorshift(rng);
    for (int64_t i = 0; i < pl.size[1] / 2; i++) { /* d in [2^-10, 2^-6), m = -(0..8) d */
        float d = ldexpf(1.0f + (float)(xorshift(rng) % 1000) / 1000.0f, -10 + (int)(i % 4));
        uint16_t hd = nb_f32_to_bf16(d), hm = nb_f32_to_bf16(-d * (float)(xorshift(rng) % 9));
        memcpy(blob + pl.offset[1] + 2 * i, &hd, 2);
        memcpy(blob + pl.offset[2] + 2 * i, &hm, 2);
    }
    memcpy(babs, blob, (size_t)pl.total);
    for (int64_t i = 0; i < pl.size[2] / 2; i++) babs[pl.offset[2] + 2 * i + 1] &= 0x7F;
    for (int64_t i = 0; i < n_tok * ldx; i++) {
        x[i] = (float)((int)(xorshift(rng) % 2001) - 1000) / 997.0f;
        xa[i] = fabsf(x[i]);
    }
    fn(ya, ldy, x, ldx, blob, n_out, n_in, group, n_tok, 0, n_out, scratch);
    nb_gemm_w4a16_x16_ref(yr, ldy, x, ldx, blob, n_out, n_in, group, n_tok, 0, n_out, scratch);
    nb_gemm_w4a16_x16_ref(mag, ldy, xa, ldx, babs, n_out, n_in, group, n_tok, 0, n_out, scratch);
    ok = 1;
    for (int64_t i = 0; i < n_tok * ldy; i++)
        if (!(fabs((double)ya[i] - yr[i]) <= 0x1p-8 * (double)mag[i] + 1e-30)) ok = 0;
out:
    free(blob), free(babs), free(x), free(xa), free(ya), free(yr), free(mag), free(scratch);
    return ok;
}

int nb_kernels_check_w4a16(nb_gemm_w4a16_fn fn)
{
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    return check_w4a16_one(fn, 64, 48, 1536, 37, &rng) &&
           check_w4a16_one(fn, 128, 32, 256, 64, &rng) && check_w4a16_one(fn, 32, 64, 96, 16, &rng);
}

/* The AMX-BF16 prefill attention tile against the reference: 8 tokens x 2 heads (hd 64)
 * and 3 tokens x 1 head (hd 128) over an f16 cache of 70 keys (two blocks of 32 keys and a
 * part block), a window in the second; 1 if every output is within 5e-5 (values in
 * [-1, 1]: the tile carries about 16 bits of each factor). */
static int check_attn_amx(uint64_t *rng)
{
    enum { NK = 70, MAXHD = 128 };
    static const int shape[2][4] = {{64, 2, 8, 0}, {128, 1, 3, 9}}; /* hd, rep, tokens, window */
    const int64_t rb = NB_KV_ROW_BYTES(NB_KVE_F16, MAXHD);
    uint16_t *k = malloc((size_t)(NK * rb)), *v = malloc((size_t)(NK * rb));
    float *q = malloc(sizeof(float) * 8 * 2 * MAXHD), *o1 = malloc(sizeof(float) * 8 * 2 * MAXHD);
    float *o2 = malloc(sizeof(float) * 8 * 2 * MAXHD);
    float *scratch = malloc(sizeof(float) * (size_t)NB_ATTN_SCRATCH(MAXHD));
    int ok = k && v && q && o1 && o2 && scratch;
    for (int c = 0; ok && c < 2; c++) {
        const int hd = shape[c][0], rep = shape[c][1], nt = shape[c][2], win = shape[c][3];
        for (int i = 0; i < NK * hd; i++) {
            k[i] = nb_f32_to_f16((float)((int)(xorshift(rng) % 2001) - 1000) / 1000.0f);
            v[i] = nb_f32_to_f16((float)((int)(xorshift(rng) % 2001) - 1000) / 1000.0f);
        }
        for (int i = 0; i < nt * rep * hd; i++)
            q[i] = (float)((int)(xorshift(rng) % 2001) - 1000) / 1000.0f;
        int32_t blocks[3] = {0, 1, 2}, pos[8];
        for (int t = 0; t < nt; t++)
            pos[t] = NK - nt + t;
        const struct nb_kv_view kv = {k, v, blocks, 32 * 2 * hd, 2 * hd, 5, NB_KVE_F16};
        const float sc = 1.0f / sqrtf((float)hd);
        nb_attn_tile_amx(o1, rep * hd, q, rep * hd, nt, rep, hd, pos, &kv, win, sc, scratch);
        nb_attn_tile_ref(o2, rep * hd, q, rep * hd, nt, rep, hd, pos, &kv, win, sc, scratch);
        for (int i = 0; i < nt * rep * hd; i++)
            if (!(fabsf(o1[i] - o2[i]) <= 5e-5f)) ok = 0;
    }
    free(k), free(v), free(q), free(o1), free(o2), free(scratch);
    return ok;
}

static int g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

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
    /* groups 32 / 64 / 128, odd row blocks, token remainders (3 to the VNNI kernel, 9 to a
     * tile of 9 rows), a sub-range of rows */
    int ok = amx_check_one(128, 48, 256, 35, 0, 48, &rng) &&
             amx_check_one(64, 32, 192, 16, 0, 32, &rng) &&
             amx_check_one(32, 64, 96, 57, 16, 48, &rng);
    if (!ok) {
        NB_LOGW("AMX: the w4a8 kernel failed its self-check against the reference; keeping "
                "VNNI");
        return;
    }
    if (g_allow_amx >= 2 && !amx_check_kq(&rng)) {
        NB_LOGW("AMX: a GGUF block kernel failed its self-check against the reference; "
                "keeping VNNI");
        return;
    }
    if (c->amx_bf16 && c->avx512_bf16 && !nb_kernels_check_w4a16(nb_gemm_w4a16_x16_amx)) {
        NB_LOGW("AMX: the w4a16 AMX-BF16 kernel failed its self-check against the reference; "
                "keeping VNNI");
        return;
    }
    if (c->amx_bf16 && c->avx512_bf16 && !check_attn_amx(&rng)) {
        NB_LOGW("AMX: the AMX-BF16 prefill attention tile failed its self-check against the "
                "reference; keeping VNNI");
        return;
    }
    g_amx_ok = 1;
    NB_LOGD("AMX: the tile kernels passed their self-checks");
}

/* 1 when the AMX w4a8 kernel may be used (asked once, self-checked once). */
static int amx_usable(void)
{
    pthread_once(&g_amx_once, amx_probe);
    return g_amx_ok;
}
#endif

/* What AMX may run here (nb_kernels_fill's use_amx): 0 none; 1 the w4a8 kernel, 2 also
 * the GGUF block kernels (as allowed): the CPU has AMX, Linux grants tile data and the
 * kernels passed their self-checks (asked once). */
static int use_amx(enum nb_isa_level lvl)
{
#ifdef NB_HAVE_X86
    return lvl == NB_LEVEL_AVX512 && nb_cpu_get()->avx512_vnni && amx_usable() ? g_allow_amx : 0;
#else
    (void)lvl;
    return 0;
#endif
}

static void probe(void)
{
    const struct nb_cpu *cpu = nb_cpu_get();
    enum nb_isa_level lvl = nb_kernels_best_level(cpu);
    if (g_cap >= 0) {
        if (!nb_isa_level_within((enum nb_isa_level)g_cap, lvl))
            NB_LOGW("kernels: this CPU lacks the level asked for, using the best it has");
        else
            lvl = (enum nb_isa_level)g_cap;
    }
    nb_kernels_fill(&g_table, cpu, lvl, use_amx(lvl));
    __atomic_store_n(&g_probed, 1, __ATOMIC_RELEASE);
    NB_LOGD("kernels: %s (cpu: %s)", g_table.isa, nb_cpu_flags_str());
}

enum nb_status nb_kernels_configure(const char *isa, int allow_amx)
{
    if (__atomic_load_n(&g_probed, __ATOMIC_ACQUIRE))
        return nb_set_error(NB_ERR_INVALID_ARG, "kernels: configure before the first use");
    enum nb_isa_level lvl = NB_LEVEL_REF;
    int auto_level = !isa || !*isa || !strcmp(isa, "auto");
    if (!auto_level && !nb_isa_level_from_name(isa, &lvl))
        return nb_set_error(NB_ERR_INVALID_ARG, "kernels: unknown ISA level '%s' (auto, ref, "
                            "avx2, avx512, neon)", isa);
    g_cap = auto_level ? -1 : (int)lvl;
    g_allow_amx = allow_amx < 0 ? 0 : allow_amx > 2 ? 2 : allow_amx;
    return NB_OK;
}

const struct nb_kernels *nb_kernels_get(void)
{
    pthread_once(&g_once, probe);
    return &g_table;
}

int nb_kernels_for_isa(const char *isa, struct nb_kernels *out)
{
    enum nb_isa_level want;
    const struct nb_cpu *cpu = nb_cpu_get();
    if (!nb_isa_level_from_name(isa, &want) || !nb_isa_level_within(want, nb_kernels_best_level(cpu)))
        return 0;
    nb_kernels_fill(out, cpu, want, use_amx(want));
    return 1;
}
