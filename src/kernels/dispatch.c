/* kernels/dispatch.c — probe the CPU once, fill the kernel table.
 *
 * Levels: "ref" (scalar everywhere), "avx2" (256-bit kernels; AVX-VNNI when present),
 * "avx512" (AVX-512 F/BW/VL/DQ; VNNI for w4a8). The best level the CPU supports is
 * used unless NIBBLE_ISA=ref|avx2|avx512 asks for a lower one (a level the CPU lacks
 * falls back, with a warning). SIMD variants so far: the X16 int4 kernels, the
 * activation quantizer and (AVX-512) the float dot/axpy, float-weight GEMMs and the
 * prefill attention tile; the rest of the table stays reference.
 */
#include <pthread.h>
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
};

static struct nb_kernels g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

enum level { LVL_REF, LVL_AVX2, LVL_AVX512 };

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
        k->gemm_w4a16_x16 =
            c->avx512_bf16 ? nb_gemm_w4a16_x16_avx512bf16 : nb_gemm_w4a16_x16_avx512;
        k->act_quant_q8 = nb_act_quant_q8_avx512;
        k->dot_f32 = nb_dot_f32_avx512;
        k->axpy_f32 = nb_axpy_f32_avx512;
        k->attn_tile = nb_attn_tile_avx512;
        k->gemm_f32 = nb_gemm_f32_avx512;
        k->gemm_f16 = nb_gemm_f16_avx512;
        k->gemm_bf16 = nb_gemm_bf16_avx512;
    }
#else
    (void)lvl;
#endif
}

static void probe(void)
{
    enum level lvl = cpu_level();
    const char *isa = getenv("NIBBLE_ISA");
    if (isa && *isa && strcmp(isa, "auto") != 0) {
        enum level want = !strcmp(isa, "ref")      ? LVL_REF
                          : !strcmp(isa, "avx2")   ? LVL_AVX2
                          : !strcmp(isa, "avx512") ? LVL_AVX512
                                                   : (enum level) - 1;
        if ((int)want < 0)
            NB_LOGW("NIBBLE_ISA=%s: unknown ISA (ref, avx2, avx512), using the best", isa);
        else if (want > lvl)
            NB_LOGW("NIBBLE_ISA=%s: this CPU lacks it, using the best it has", isa);
        else
            lvl = want;
    }
    fill(&g_table, lvl);
    NB_LOGD("kernels: %s (cpu: %s)", g_table.isa, nb_cpu_flags_str());
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
    enum level want = !strcmp(isa, "ref")      ? LVL_REF
                      : !strcmp(isa, "avx2")   ? LVL_AVX2
                      : !strcmp(isa, "avx512") ? LVL_AVX512
                                               : (enum level) - 1;
    if ((int)want < 0 || want > cpu_level()) return 0;
    fill(out, want);
    return 1;
}
