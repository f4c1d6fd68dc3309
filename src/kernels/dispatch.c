/* kernels/dispatch.c — probe the CPU once, fill the kernel table. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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
};

static struct nb_kernels g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void probe(void)
{
    g_table = k_ref;
    const char *isa = getenv("NIBBLE_ISA");
    if (isa && strcmp(isa, "ref") != 0 && strcmp(isa, "auto") != 0)
        NB_LOGW("NIBBLE_ISA=%s: unknown ISA, using the reference kernels", isa);
    NB_LOGD("kernels: %s", g_table.isa);
}

const struct nb_kernels *nb_kernels_get(void)
{
    pthread_once(&g_once, probe);
    return &g_table;
}

const struct nb_kernels *nb_kernels_ref(void) { return &k_ref; }
