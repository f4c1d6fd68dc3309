/* bench_quant — the scale search: nb_quantize_rows (the batched search, quant/search.c)
 * against the one-group reference functions of quant.c on the same weights. Checks
 * first that both store the same codes and scales, then times them: nanoseconds of
 * one thread's CPU time per weight (CPU time, not wall time: the machine is shared), in
 * PASSES interleaved passes, best and spread (worst / best - 1).
 * Usage: bench_quant [passes] [n_out]    NIBBLE_ISA=ref|avx2|avx512 picks the level
 * (the batched search's and the reference's own), as for the CLI.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/wformat.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

#define N_IN  2048
#define GROUP 128

static uint64_t g_rng = 7;
static double unit(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The reference: one group (row) at a time, packed as nb_quantize_rows packs. */
static void reference(enum nb_wpath p, const float *w, int64_t n_out, uint8_t *blob,
                      const struct nb_layout_planes *pl, void *scratch)
{
    uint8_t q[GROUP];
    int64_t ng = N_IN / GROUP;
    for (int64_t r = 0; r < n_out; r++) {
        if (p == NB_WPATH_W8A16) {
            float d;
            nb_quant_row_w8a16(w + r * N_IN, NULL, N_IN, 1, (int8_t *)(blob + pl->offset[0] + r * N_IN),
                               &d, scratch);
            memcpy(blob + pl->offset[1] + 4 * r, &d, 4);
            continue;
        }
        for (int64_t g = 0; g < ng; g++) {
            uint16_t d, m;
            if (p == NB_WPATH_W4A8) {
                nb_quant_group_w4a8(w + r * N_IN + g * GROUP, NULL, GROUP, 1, q, &d);
            } else {
                nb_quant_group_w4a16(w + r * N_IN + g * GROUP, NULL, GROUP, 1, q, &d, &m);
                memcpy(blob + pl->offset[2] + 2 * (r * ng + g), &m, 2);
            }
            memcpy(blob + pl->offset[1] + 2 * (r * ng + g), &d, 2);
            for (int i = 0; i < GROUP; i += 2)
                blob[pl->offset[0] + r * (N_IN / 2) + (g * GROUP + i) / 2] =
                    (uint8_t)(q[i] | (q[i + 1] << 4));
        }
    }
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 5;
    int64_t n_out = argc > 2 ? atoll(argv[2]) : 512;
    const char *isa = getenv("NIBBLE_ISA");
    if (isa && nb_kernels_configure(isa, 0)) {
        fprintf(stderr, "bench_quant: %s\n", nb_last_error());
        return 1;
    }
    static const enum nb_wpath paths[] = {NB_WPATH_W4A8, NB_WPATH_W4A16, NB_WPATH_W8A16};
    float *w = malloc(sizeof(float) * (size_t)(n_out * N_IN));
    void *scratch = malloc(NB_QUANT_W8_SCRATCH(N_IN));
    for (int64_t i = 0; i < n_out * N_IN; i++) /* Gaussian, Box-Muller */
        w[i] = (float)(0.02 * sqrt(-2.0 * log(1.0 - unit())) * cos(6.283185307179586 * unit()));
    printf("bench_quant: %lld x %d, G = %d, search on, level %s, %d passes; ns of CPU per "
           "weight, best (spread)\n",
           (long long)n_out, N_IN, GROUP, nb_kernels_get()->isa, passes);
    for (int k = 0; k < 3; k++) {
        enum nb_wpath p = paths[k];
        struct nb_layout_planes pl;
        nb_layout_planes(p, GROUP, n_out, N_IN, &pl);
        size_t bytes = ((size_t)pl.total + 63) / 64 * 64;
        uint8_t *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
        memset(a, 0, bytes);
        memset(b, 0, bytes);
        double best[2] = {1e30, 1e30}, worst[2] = {0, 0};
        for (int pass = 0; pass < passes; pass++) {
            double t = cpu_s();
            if (nb_quantize_rows(p, GROUP, w, n_out, N_IN, 0, n_out, NULL, 1, a, NULL)) {
                fprintf(stderr, "bench_quant: %s\n", nb_last_error());
                return 1;
            }
            t = cpu_s() - t;
            best[0] = t < best[0] ? t : best[0];
            worst[0] = t > worst[0] ? t : worst[0];
            t = cpu_s();
            reference(p, w, n_out, b, &pl, scratch);
            t = cpu_s() - t;
            best[1] = t < best[1] ? t : best[1];
            worst[1] = t > worst[1] ? t : worst[1];
            /* the padding is the matrix call's; compare the planes */
            for (int i = 0; i < pl.n_planes; i++)
                if (memcmp(a + pl.offset[i], b + pl.offset[i], (size_t)pl.size[i])) {
                    fprintf(stderr, "bench_quant: %s: batched and reference differ (plane %d)\n",
                            nb_wpath_name(p), i);
                    return 1;
                }
        }
        double nw = (double)(n_out * N_IN) * 1e-9;
        printf("  %-6s batched %6.2f (%4.0f%%)   reference %6.2f (%4.0f%%)   %.1fx\n",
               nb_wpath_name(p), best[0] / nw, 100 * (worst[0] / best[0] - 1), best[1] / nw,
               100 * (worst[1] / best[1] - 1), best[1] / best[0]);
        free(a);
        free(b);
    }
    free(w);
    free(scratch);
    return 0;
}
