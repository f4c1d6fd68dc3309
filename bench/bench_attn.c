/* bench_attn — the attention kernel lab: checks each fast attention kernel this CPU runs
 * (avx2, avx512; amx: the AMX-BF16 prefill tile) against the reference, then times one call
 * of each on one thread at the Qwen3-1.7B head shape (hd 128, GQA group 2) over a paged
 * cache of 4096 keys:
 *   decode: nb_attn_decode_fn over keys [0, 4096) for the group's 2 query rows;
 *   prefill: nb_attn_tile_fn, 16 tokens x 2 heads (32 rows) at positions 4080..4095.
 * The cache is laid out as the model's (model/kvcache.h): a layer's pool head-major (each kv
 * head's rows one after the other, in blocks of 32 keys), one sequence's blocks in order.
 * ns per call, best of PASSES interleaved passes, and the spread (worst / best - 1).
 * Usage: bench_attn [passes]   (env NIBBLE_BENCH_KV=f32|f16|bf16|q8_0, default f16;
 * NIBBLE_BENCH_HEADS=H: decode calls cycle over H kv heads' caches (8 a layer, 2 MiB each
 * at f16), so that H = 224, the 1.7 B shape's 28 layers, reads from memory as decode at
 * depth does rather than from the caches)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/timer.h"
#include "kernels/kernels.h"
#include "lab.h"

#define HD     128
#define REP    2
#define N_KEYS 4096
#define N_TOK  16
#define BSHIFT 5
#define KVH    8 /* kv heads a layer */

static uint64_t g_rng = 7;
static float frand(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

struct impl {
    const char *name;
    nb_attn_decode_fn decode;
    nb_attn_tile_fn tile;
};


int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 5;
    const char *kvn = getenv("NIBBLE_BENCH_KV") ? getenv("NIBBLE_BENCH_KV") : "f16";
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    int type = -1;
    int heads = getenv("NIBBLE_BENCH_HEADS") ? atoi(getenv("NIBBLE_BENCH_HEADS")) : 1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(kvn, names[i])) type = i;
    if (type < 0 || passes < 1 || heads < 1) {
        fprintf(stderr, "usage: bench_attn [passes]  (NIBBLE_BENCH_KV=f32|f16|bf16|q8_0, "
                        "NIBBLE_BENCH_HEADS=H)\n");
        return 2;
    }
    const struct nb_cpu *cpu = nb_cpu_get();
    printf("cpu flags: %s\n", nb_cpu_flags_str());
#define MAX_IMPL 4
    struct impl im[MAX_IMPL];
    int n = 0;
    im[n++] = (struct impl){"ref", nb_attn_decode_ref, nb_attn_tile_ref};
#ifdef NB_HAVE_X86
    if (cpu->avx2 && cpu->fma && cpu->f16c)
        im[n++] = (struct impl){"avx2", nb_attn_decode_avx2, nb_attn_tile_avx2};
    if (cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512dq && cpu->f16c)
        im[n++] = (struct impl){"avx512", nb_attn_decode_avx512, nb_attn_tile_avx512};
    /* the AMX-BF16 prefill tile (decode: the AVX-512 kernel's) */
    if (cpu->avx512f && cpu->avx512_vnni && cpu->amx_tile && cpu->amx_bf16 && nb_amx_request_perm())
        im[n++] = (struct impl){"amx", nb_attn_decode_avx512, nb_attn_tile_amx};
#else
    (void)cpu;
#endif

    /* the cache: layers of KVH heads; the timed tile and the checks use layer 0's head 0 */
    int64_t rb = NB_KV_ROW_BYTES(type, HD);
    int n_blk = N_KEYS >> BSHIFT, n_layers = (heads + KVH - 1) / KVH;
    int32_t *blocks = malloc(sizeof(int32_t) * (size_t)n_blk);
    for (int b = 0; b < n_blk; b++) blocks[b] = b;
    size_t hb = (size_t)(N_KEYS * rb), lb = hb * KVH; /* one head's K (or V), one layer's */
    char *kt = malloc(lb * (size_t)n_layers), *vt = malloc(lb * (size_t)n_layers);
    struct nb_kv_view view = {kt, vt, blocks, rb << BSHIFT, rb, BSHIFT, type}, hv = view;
    float row[HD];
    for (int h = 0; h < n_layers * KVH; h++)
        for (int r = 0; r < N_KEYS; r++) {
            int64_t at = (int64_t)h * (int64_t)hb + NB_KV_AT(&view, r);
            for (int d = 0; d < HD; d++) row[d] = 2 * frand();
            nb_kv_row_store(type, row, kt + at, HD);
            for (int d = 0; d < HD; d++) row[d] = frand();
            nb_kv_row_store(type, row, vt + at, HD);
        }
    int hcur = 0;
    float scale = 1.0f / sqrtf((float)HD);
    static float q[N_TOK * REP * HD], qs[REP * HD];
    for (int i = 0; i < N_TOK * REP * HD; i++) q[i] = frand();
    for (int i = 0; i < REP * HD; i++) qs[i] = q[i] * scale;
    int32_t pos[N_TOK];
    for (int t = 0; t < N_TOK; t++) pos[t] = N_KEYS - N_TOK + t;
    float *scr = malloc(sizeof(float) * (size_t)NB_ATTN_SCRATCH(HD));
    float *dscr = malloc(sizeof(float) * (size_t)NB_ATTN_DECODE_SCRATCH(HD));
    static float o_ref[N_TOK * REP * HD], o[N_TOK * REP * HD];
    static float d_ref[REP * (HD + 2)], d_o[REP * (HD + 2)];

    /* check: max |fast - ref| (decode: of acc / l, the attention output) */
    nb_attn_tile_ref(o_ref, REP * HD, q, REP * HD, N_TOK, REP, HD, pos, &view, 0, scale, scr);
    nb_attn_decode_ref(qs, REP, HD, &view, 0, N_KEYS, d_ref, HD + 2, dscr);
    for (int i = 1; i < n; i++) {
        im[i].tile(o, REP * HD, q, REP * HD, N_TOK, REP, HD, pos, &view, 0, scale, scr);
        im[i].decode(qs, REP, HD, &view, 0, N_KEYS, d_o, HD + 2, dscr);
        double et = 0, ed = 0;
        for (int j = 0; j < N_TOK * REP * HD; j++) et = fmax(et, fabs((double)o[j] - o_ref[j]));
        for (int r = 0; r < REP; r++)
            for (int d = 0; d < HD; d++) {
                const float *x = d_o + r * (HD + 2), *y = d_ref + r * (HD + 2);
                ed = fmax(ed, fabs((double)x[2 + d] / x[1] - (double)y[2 + d] / y[1]));
            }
        printf("check %-7s vs ref: tile max abs err %.2g, decode %.2g\n", im[i].name, et, ed);
    }

    /* time: interleaved passes; each pass repeats a call for at least ~2 ms */
    struct result rt[MAX_IMPL] = {{0}}, rd[MAX_IMPL] = {{0}};
    for (int p = 0; p < passes; p++)
        for (int i = 0; i < n; i++) {
            for (int mode = 0; mode < 2; mode++) {
                int reps = 0;
                uint64_t t0 = nb_time_ns(), t1;
                do {
                    if (mode)
                        im[i].tile(o, REP * HD, q, REP * HD, N_TOK, REP, HD, pos, &view, 0, scale,
                                   scr);
                    else {
                        hcur = (hcur + 1) % heads;
                        int64_t at = (int64_t)hcur * (int64_t)hb;
                        hv.k = kt + at;
                        hv.v = vt + at;
                        im[i].decode(qs, REP, HD, &hv, 0, N_KEYS, d_o, HD + 2, dscr);
                    }
                    reps++;
                    t1 = nb_time_ns();
                } while (t1 - t0 < 2000000);
                upd(mode ? &rt[i] : &rd[i], (double)(t1 - t0) / reps);
            }
        }
    printf("\n== hd %d, group %d, %d keys, KV %s, decode over %d kv head%s (%.0f MiB), 1 thread, "
           "%d interleaved passes: ns per call, best [spread] ==\n",
           HD, REP, N_KEYS, names[type], heads, heads > 1 ? "s" : "",
           2.0 * (double)hb * heads / (1 << 20), passes);
    for (int i = 0; i < n; i++)
        printf("%-7s decode %10.0f ns [+%3.0f%%] (%5.2fx ref, %4.1f GB/s)   prefill tile (%d rows) %11.0f ns "
               "[+%3.0f%%] (%5.2fx ref)\n",
               im[i].name, rd[i].best, 100 * (rd[i].worst / rd[i].best - 1),
               rd[0].best / rd[i].best, 2.0 * (double)hb / rd[i].best, N_TOK * REP, rt[i].best,
               100 * (rt[i].worst / rt[i].best - 1), rt[0].best / rt[i].best);
    free(blocks), free(kt), free(vt), free(scr), free(dscr);
    return 0;
}
