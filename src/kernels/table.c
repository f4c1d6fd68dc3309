/* kernels/table.c — which kernel runs each weight format, per CPU and ISA level.
 *
 * nb_kernels_fill is the one function that decides: the dispatcher calls it for this
 * machine (kernels/dispatch.c), the selector for any probe (runtime/selector.c), so the
 * kernel a record names and the kernel that runs cannot disagree.
 *
 *   format      ref     avx2                       avx512
 *   f32/f16/bf16 ref    ref                        avx512
 *   q4_k/q6_k   ref     ref                        avx512   (a GGUF source as stored)
 *   q5_k/q4_0/q8_0/iq4_nl/iq4_xs ref ref           ref      (a GGUF source as stored)
 *   q4_k/q5_k/q6_k/q4_0/q8_0/iq4_nl/iq4_xs-x16
 *               ref     avxvnni, else avx2         avx512vnni when VNNI, else avx2's (the
 *                                                  same blocks as 16-row records: int8
 *                                                  activations); amx when use_amx is
 *                                                  2 (NIBBLE_AMX=all)
 *   w8a16       ref     ref                        ref
 *   w4a16       ref     ref                        ref            (ROWS layout)
 *   w4a16-x16   ref     ref                        avx512vnni when VNNI (int16 decode;
 *                                                  bf16 prefill with AVX512-BF16, else
 *                                                  FMA), else avx512 (FMA); amx when
 *                                                  use_amx and the CPU has AMX-BF16 +
 *                                                  AVX512-BF16
 *   w4a8        ref     ref                        ref            (ROWS layout)
 *   w4a8-x16    ref     avxvnni, else avx2         avx512vnni when VNNI, amx when use_amx
 *   attention   ref     avx2                       avx512   (attn_tile, attn_decode,
 *                                                            kv_row_load, kv_row_store);
 *                                                            attn_tile amx when use_amx
 *                                                            and the CPU has AMX-BF16 +
 *                                                            AVX512-BF16
 *
 * On aarch64 there is one level, neon (every aarch64 CPU has NEON); the CPU's dotprod
 * (HWCAP asimddp) and i8mm (HWCAP2 i8mm) pick the w4a8 variant within it (dotprod also
 * the GGUF block formats' X16 kernels):
 *
 *   format        neon (armv8.0)   + dotprod          + dotprod + i8mm
 *   f32/f16/bf16  neon             neon               neon     (bit-identical to ref)
 *   q4_k/q6_k     ref              ref                ref
 *   q5_k/q4_0/q8_0/iq4_nl/iq4_xs: ref (a GGUF source as stored)
 *   q4_k/q5_k/q6_k/q4_0/q8_0/iq4_nl/iq4_xs-x16
 *                 ref              neon-dotprod       neon-dotprod (sdot on the 16-row
 *                                                                   records, int8
 *                                                                   activations)
 *   w8a16         neon             neon               neon
 *   w4a16         ref              ref                ref      (ROWS layout)
 *   w4a16-x16     neon             neon               neon     (neon-bf16: bfmmla, bf16
 *                                                                activations, when the CPU
 *                                                                has bf16, any column)
 *   w4a8          ref              ref                ref      (ROWS layout)
 *   w4a8-x16      neon             neon-dotprod       neon-i8mm (smmla prefill,
 *                                                                sdot decode)
 *   act quant, dot / axpy, glu, rmsnorm, attention (attn_tile, attn_decode, kv_row_load,
 *   kv_row_store): neon
 *   isa           "neon"           "neon+dotprod"     "neon+dotprod+i8mm"
 * Unverified: no NEON kernel has been measured on Arm hardware (tests under qemu only).
 *
 * Each kernel function keeps the arguments its maths needs; the adapters below put
 * them behind the table's one signature (nb_gemm_op).
 */
#include <string.h>

#include "kernels/kernels.h"

/* ---------------------------------------------------------------- adapters */

#define GEMM_PLAIN(fn)                                                                         \
    static void fn##_op(const struct nb_gemm_args *a, int64_t r0, int64_t r1, float *scratch)  \
    {                                                                                          \
        fn(a->y, a->ldy, a->x, a->ldx, a->w, a->n_in, a->n_tok, r0, r1, scratch);              \
    }
#define GEMM_Q8(fn)                                                                            \
    static void fn##_op(const struct nb_gemm_args *a, int64_t r0, int64_t r1, float *scratch)  \
    {                                                                                          \
        (void)scratch;                                                                         \
        fn(a->y, a->ldy, a->xq, a->xd, a->xsum, a->ldxq, a->ldxg, a->w, a->n_out, a->n_in,     \
           a->group, a->n_tok, r0, r1);                                                        \
    }
#define GEMM_KQ(fn)                                                                            \
    static void fn##_op(const struct nb_gemm_args *a, int64_t r0, int64_t r1, float *scratch)  \
    {                                                                                          \
        (void)scratch;                                                                         \
        fn(a->y, a->ldy, a->xq, a->xd, a->xsum, a->ldxq, a->ldxg, a->w, a->n_out, a->n_in,     \
           a->n_tok, r0, r1);                                                                  \
    }
/* The seven GGUF block formats' X16 kernels of one variant (nb_gemm_q4_k_x16_<v>, ...):
 * their adapters and, for nb_kernels_fill, their table entries in kq_formats' order. */
#define GEMM_KQ7(v)                                                                            \
    GEMM_KQ(nb_gemm_q4_k_x16_##v)                                                              \
    GEMM_KQ(nb_gemm_q5_k_x16_##v)                                                              \
    GEMM_KQ(nb_gemm_q6_k_x16_##v)                                                              \
    GEMM_KQ(nb_gemm_iq4_xs_x16_##v)                                                            \
    GEMM_KQ(nb_gemm_q4_0_x16_##v)                                                              \
    GEMM_KQ(nb_gemm_q8_0_x16_##v)                                                              \
    GEMM_KQ(nb_gemm_iq4_nl_x16_##v)
#define KQ7(v, name)                                                                           \
    {                                                                                          \
        {nb_gemm_q4_k_x16_##v##_op, name}, {nb_gemm_q5_k_x16_##v##_op, name},                  \
            {nb_gemm_q6_k_x16_##v##_op, name}, {nb_gemm_iq4_xs_x16_##v##_op, name},            \
            {nb_gemm_q4_0_x16_##v##_op, name}, {nb_gemm_q8_0_x16_##v##_op, name},              \
            {nb_gemm_iq4_nl_x16_##v##_op, name},                                               \
    }
#if defined(NB_HAVE_X86) || defined(NB_HAVE_ARM)
static const enum nb_wformat kq_formats[7] = {NB_WF_Q4_K_X16, NB_WF_Q5_K_X16, NB_WF_Q6_K_X16,
                                              NB_WF_IQ4_XS_X16, NB_WF_Q4_0_X16, NB_WF_Q8_0_X16,
                                              NB_WF_IQ4_NL_X16};

/* The seven block formats' entries of k from kern[7] (KQ7's order). */
static void set_kq(struct nb_kernels *k, const struct nb_gemm_kernel kern[7])
{
    for (int i = 0; i < 7; i++) k->gemm[kq_formats[i]] = kern[i];
}
#endif

#define GEMM_W4A16(fn)                                                                         \
    static void fn##_op(const struct nb_gemm_args *a, int64_t r0, int64_t r1, float *scratch)  \
    {                                                                                          \
        fn(a->y, a->ldy, a->x, a->ldx, a->w, a->n_out, a->n_in, a->group, a->n_tok, r0, r1,    \
           scratch);                                                                           \
    }

GEMM_PLAIN(nb_gemm_f32_ref)
GEMM_PLAIN(nb_gemm_f16_ref)
GEMM_PLAIN(nb_gemm_bf16_ref)
GEMM_PLAIN(nb_gemm_q4_k_ref)
GEMM_PLAIN(nb_gemm_q6_k_ref)
GEMM_PLAIN(nb_gemm_q5_k_ref)
GEMM_PLAIN(nb_gemm_q4_0_ref)
GEMM_PLAIN(nb_gemm_q8_0_ref)
GEMM_PLAIN(nb_gemm_iq4_nl_ref)
GEMM_PLAIN(nb_gemm_iq4_xs_ref)
GEMM_Q8(nb_gemm_w4a8_ref)
GEMM_KQ(nb_gemm_q4_k_x16_ref)
GEMM_KQ(nb_gemm_q6_k_x16_ref)
GEMM_KQ(nb_gemm_q5_k_x16_ref)
GEMM_KQ(nb_gemm_q4_0_x16_ref)
GEMM_KQ(nb_gemm_q8_0_x16_ref)
GEMM_KQ(nb_gemm_iq4_nl_x16_ref)
GEMM_KQ(nb_gemm_iq4_xs_x16_ref)
GEMM_Q8(nb_gemm_w4a8_x16_ref)
GEMM_W4A16(nb_gemm_w4a16_ref)
GEMM_W4A16(nb_gemm_w4a16_x16_ref)

static void nb_gemm_w8a16_ref_op(const struct nb_gemm_args *a, int64_t r0, int64_t r1,
                                 float *scratch)
{
    nb_gemm_w8a16_ref(a->y, a->ldy, a->x, a->ldx, a->w, a->n_out, a->n_in, a->n_tok, r0, r1,
                      scratch);
}

#ifdef NB_HAVE_X86
GEMM_PLAIN(nb_gemm_f32_avx512)
GEMM_PLAIN(nb_gemm_f16_avx512)
GEMM_PLAIN(nb_gemm_bf16_avx512)
GEMM_PLAIN(nb_gemm_q4_k_avx512)
GEMM_PLAIN(nb_gemm_q6_k_avx512)
GEMM_Q8(nb_gemm_w4a8_x16_avx2)
GEMM_KQ7(avx512vnni)
GEMM_KQ7(avxvnni)
GEMM_KQ7(avx2)
GEMM_KQ7(amx)
GEMM_Q8(nb_gemm_w4a8_x16_avxvnni)
GEMM_Q8(nb_gemm_w4a8_x16_avx512vnni)
GEMM_Q8(nb_gemm_w4a8_x16_amx)
GEMM_W4A16(nb_gemm_w4a16_x16_avx512)
GEMM_W4A16(nb_gemm_w4a16_x16_avx512bf16)
GEMM_W4A16(nb_gemm_w4a16_x16_avx512vnni)
GEMM_W4A16(nb_gemm_w4a16_x16_amx)
#endif

#ifdef NB_HAVE_ARM
GEMM_PLAIN(nb_gemm_f32_neon)
GEMM_PLAIN(nb_gemm_f16_neon)
GEMM_PLAIN(nb_gemm_bf16_neon)
GEMM_Q8(nb_gemm_w4a8_x16_neon)
GEMM_Q8(nb_gemm_w4a8_x16_dotprod)
GEMM_Q8(nb_gemm_w4a8_x16_i8mm)
GEMM_KQ7(dotprod)
GEMM_W4A16(nb_gemm_w4a16_x16_neon)
GEMM_W4A16(nb_gemm_w4a16_x16_neon_bf16)

static void nb_gemm_w8a16_neon_op(const struct nb_gemm_args *a, int64_t r0, int64_t r1,
                                  float *scratch)
{
    nb_gemm_w8a16_neon(a->y, a->ldy, a->x, a->ldx, a->w, a->n_out, a->n_in, a->n_tok, r0, r1,
                       scratch);
}
#endif

/* ---------------------------------------------------------------- the tables */

#define K(fn, name) {fn##_op, name}

static const struct nb_kernels k_ref = {
    .isa = "ref",
    .level = NB_LEVEL_REF,
    .gemm =
        {
            [NB_WF_F32] = K(nb_gemm_f32_ref, "ref"),
            [NB_WF_F16] = K(nb_gemm_f16_ref, "ref"),
            [NB_WF_BF16] = K(nb_gemm_bf16_ref, "ref"),
            [NB_WF_W8A16] = K(nb_gemm_w8a16_ref, "ref"),
            [NB_WF_W4A16] = K(nb_gemm_w4a16_ref, "ref"),
            [NB_WF_W4A16_X16] = K(nb_gemm_w4a16_x16_ref, "ref"),
            [NB_WF_W4A8] = K(nb_gemm_w4a8_ref, "ref"),
            [NB_WF_W4A8_X16] = K(nb_gemm_w4a8_x16_ref, "ref"),
            [NB_WF_Q4_K] = K(nb_gemm_q4_k_ref, "ref"),
            [NB_WF_Q6_K] = K(nb_gemm_q6_k_ref, "ref"),
            [NB_WF_Q4_K_X16] = K(nb_gemm_q4_k_x16_ref, "ref"),
            [NB_WF_Q6_K_X16] = K(nb_gemm_q6_k_x16_ref, "ref"),
            [NB_WF_Q5_K] = K(nb_gemm_q5_k_ref, "ref"),
            [NB_WF_Q4_0] = K(nb_gemm_q4_0_ref, "ref"),
            [NB_WF_Q8_0] = K(nb_gemm_q8_0_ref, "ref"),
            [NB_WF_Q5_K_X16] = K(nb_gemm_q5_k_x16_ref, "ref"),
            [NB_WF_Q4_0_X16] = K(nb_gemm_q4_0_x16_ref, "ref"),
            [NB_WF_Q8_0_X16] = K(nb_gemm_q8_0_x16_ref, "ref"),
            [NB_WF_IQ4_NL] = K(nb_gemm_iq4_nl_ref, "ref"),
            [NB_WF_IQ4_XS] = K(nb_gemm_iq4_xs_ref, "ref"),
            [NB_WF_IQ4_NL_X16] = K(nb_gemm_iq4_nl_x16_ref, "ref"),
            [NB_WF_IQ4_XS_X16] = K(nb_gemm_iq4_xs_x16_ref, "ref"),
        },
    .dot_f32 = nb_dot_f32_ref,
    .axpy_f32 = nb_axpy_f32_ref,
    .act_quant_q8 = nb_act_quant_q8_ref,
    .attn_tile = nb_attn_tile_ref,
    .attn_decode = nb_attn_decode_ref,
    .kv_row_load = nb_kv_row_load,
    .kv_row_store = nb_kv_row_store,
    .glu = nb_glu_ref,
    .rmsnorm = nb_rmsnorm_ref,
};

const struct nb_kernels *nb_kernels_ref(void)
{
    return &k_ref;
}

enum nb_isa_level nb_cpu_isa_level(const struct nb_cpu *c)
{
    if (c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx2 && c->fma && c->f16c)
        return NB_LEVEL_AVX512;
    if (c->avx2 && c->fma && c->f16c) return NB_LEVEL_AVX2;
    if (c->asimd) return NB_LEVEL_NEON;
    return NB_LEVEL_REF;
}

enum nb_isa_level nb_kernels_best_level(const struct nb_cpu *c)
{
    enum nb_isa_level l = nb_cpu_isa_level(c);
#if defined(NB_HAVE_X86)
    return l == NB_LEVEL_NEON ? NB_LEVEL_REF : l;
#elif defined(NB_HAVE_ARM)
    return l == NB_LEVEL_NEON ? l : NB_LEVEL_REF;
#else
    (void)l;
    return NB_LEVEL_REF;
#endif
}

int nb_isa_level_within(enum nb_isa_level level, enum nb_isa_level best)
{
    if (level == NB_LEVEL_REF || level == best) return 1;
    return level == NB_LEVEL_AVX2 && best == NB_LEVEL_AVX512;
}

int nb_isa_level_from_name(const char *name, enum nb_isa_level *out)
{
    static const char *const names[] = {"ref", "avx2", "avx512", "neon"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) {
            *out = (enum nb_isa_level)i;
            return 1;
        }
    return 0;
}

void nb_kernels_fill(struct nb_kernels *k, const struct nb_cpu *c, enum nb_isa_level lvl,
                     int use_amx)
{
    *k = k_ref;
    enum nb_isa_level best = nb_kernels_best_level(c);
    if (!nb_isa_level_within(lvl, best)) lvl = best;
    k->level = lvl;
#ifdef NB_HAVE_X86
    if (lvl >= NB_LEVEL_AVX2) {
        k->isa = "avx2";
        k->gemm[NB_WF_W4A8_X16] = c->avx_vnni ? (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_avxvnni,
                                                                         "avxvnni")
                                              : (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_avx2,
                                                                         "avx2");
        static const struct nb_gemm_kernel kq_avxvnni[7] = KQ7(avxvnni, "avxvnni"),
                                           kq_avx2[7] = KQ7(avx2, "avx2");
        set_kq(k, c->avx_vnni ? kq_avxvnni : kq_avx2);
        k->attn_tile = nb_attn_tile_avx2;
        k->attn_decode = nb_attn_decode_avx2;
        k->kv_row_load = nb_kv_row_load_avx2;
        k->kv_row_store = nb_kv_row_store_avx2;
    }
    if (lvl >= NB_LEVEL_AVX512) {
        k->isa = "avx512";
        if (c->avx512_vnni)
            k->gemm[NB_WF_W4A8_X16] = (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_avx512vnni,
                                                                "avx512vnni");
        if (c->avx512_vnni) {
            static const struct nb_gemm_kernel kq[7] = KQ7(avx512vnni, "avx512vnni");
            set_kq(k, kq);
        }
        if (c->avx512_vnni && use_amx) {
            k->isa = "avx512+amx";
            k->gemm[NB_WF_W4A8_X16] = (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_amx,
                                                                "amx");
        }
        if (c->avx512_vnni && use_amx >= 2) { /* NIBBLE_AMX=all: no faster in situ */
            static const struct nb_gemm_kernel kq[7] = KQ7(amx, "amx");
            set_kq(k, kq);
        }
        /* w4a16: decode on int16 activations and vpdpwssd where the CPU has AVX-512 VNNI
         * (kernel avx512vnni: its records are new, those of kernel avx512 decoded on bf16
         * or f32), prefill on vdpbf16ps where it also has AVX512-BF16 (the same name: the
         * record key's features tell them apart), else everything on FMA (avx512) */
        k->gemm[NB_WF_W4A16_X16] =
            c->avx512_bf16 && c->avx512_vnni
                ? (struct nb_gemm_kernel)K(nb_gemm_w4a16_x16_avx512bf16, "avx512vnni")
            : c->avx512_vnni ? (struct nb_gemm_kernel)K(nb_gemm_w4a16_x16_avx512vnni, "avx512vnni")
                             : (struct nb_gemm_kernel)K(nb_gemm_w4a16_x16_avx512, "avx512");
        /* AMX-BF16 w4a16 prefill: 4.5x the AVX512-BF16 kernel in situ (pp512, 2 threads,
         * Xeon family 6 model 167, docs/benchmarks.md) */
        if (c->avx512_vnni && use_amx && c->amx_bf16 && c->avx512_bf16)
            k->gemm[NB_WF_W4A16_X16] = (struct nb_gemm_kernel)K(nb_gemm_w4a16_x16_amx, "amx");
        k->gemm[NB_WF_F32] = (struct nb_gemm_kernel)K(nb_gemm_f32_avx512, "avx512");
        k->gemm[NB_WF_F16] = (struct nb_gemm_kernel)K(nb_gemm_f16_avx512, "avx512");
        k->gemm[NB_WF_BF16] = (struct nb_gemm_kernel)K(nb_gemm_bf16_avx512, "avx512");
        k->gemm[NB_WF_Q4_K] = (struct nb_gemm_kernel)K(nb_gemm_q4_k_avx512, "avx512");
        k->gemm[NB_WF_Q6_K] = (struct nb_gemm_kernel)K(nb_gemm_q6_k_avx512, "avx512");
        k->act_quant_q8 = nb_act_quant_q8_avx512;
        k->dot_f32 = nb_dot_f32_avx512;
        k->axpy_f32 = nb_axpy_f32_avx512;
        k->attn_tile = nb_attn_tile_avx512;
        /* AMX-BF16 prefill attention (docs/benchmarks.md, "Prefill attention on AMX tiles"),
         * at f32's precision as the decode kernel (with ~16 bits a factor, a served greedy
         * text changed with the prefix cache, which runs a prompt's last token alone) */
        if (c->avx512_vnni && use_amx && c->amx_bf16 && c->avx512_bf16)
            k->attn_tile = nb_attn_tile_amx;
        k->attn_decode = nb_attn_decode_avx512;
        k->kv_row_load = nb_kv_row_load_avx512;
        k->kv_row_store = nb_kv_row_store_avx512;
        k->glu = nb_glu_avx512;
        k->rmsnorm = nb_rmsnorm_avx512;
    }
#else
    (void)use_amx;
#endif
#ifdef NB_HAVE_ARM
    if (lvl == NB_LEVEL_NEON) {
        k->isa = c->asimddp ? c->i8mm ? "neon+dotprod+i8mm" : "neon+dotprod" : "neon";
        k->gemm[NB_WF_W4A8_X16] =
            c->asimddp && c->i8mm ? (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_i8mm, "neon-i8mm")
            : c->asimddp ? (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_dotprod, "neon-dotprod")
                         : (struct nb_gemm_kernel)K(nb_gemm_w4a8_x16_neon, "neon");
        if (c->asimddp) { /* the GGUF block formats' X16 records: sdot */
            static const struct nb_gemm_kernel kq[7] = KQ7(dotprod, "neon-dotprod");
            set_kq(k, kq);
        }
        k->gemm[NB_WF_W4A16_X16] =
            c->bf16 ? (struct nb_gemm_kernel)K(nb_gemm_w4a16_x16_neon_bf16, "neon-bf16")
                    : (struct nb_gemm_kernel)K(nb_gemm_w4a16_x16_neon, "neon");
        k->gemm[NB_WF_W8A16] = (struct nb_gemm_kernel)K(nb_gemm_w8a16_neon, "neon");
        k->gemm[NB_WF_F32] = (struct nb_gemm_kernel)K(nb_gemm_f32_neon, "neon");
        k->gemm[NB_WF_F16] = (struct nb_gemm_kernel)K(nb_gemm_f16_neon, "neon");
        k->gemm[NB_WF_BF16] = (struct nb_gemm_kernel)K(nb_gemm_bf16_neon, "neon");
        k->act_quant_q8 = nb_act_quant_q8_neon;
        k->dot_f32 = nb_dot_f32_neon;
        k->axpy_f32 = nb_axpy_f32_neon;
        k->glu = nb_glu_neon;
        k->rmsnorm = nb_rmsnorm_neon;
        k->attn_tile = nb_attn_tile_neon;
        k->attn_decode = nb_attn_decode_neon;
        k->kv_row_load = nb_kv_row_load_neon;
        k->kv_row_store = nb_kv_row_store_neon;
    }
#endif
}
