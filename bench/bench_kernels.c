/* bench_kernels — the kernel lab: checks every fast X16 kernel against its _ref twin,
 * then times them at the Qwen3-1.7B shapes, decode (1 token: GB/s of weights
 * streamed) and prefill (512 tokens: GOP/s, 1 MAC = 2 ops), on 1 and 2 threads
 * (rows split in 16-row blocks, as the forward pass does), next to a measured read
 * bandwidth and the measured vpdpbusd peak.
 * On aarch64 it checks and times the NEON kernels the CPU runs (neon, neon-dotprod,
 * neon-i8mm, w4a16 neon, neon-bf16) with no instruction peak; under qemu-aarch64 its times are
 * emulation times, not speed (docs/arm.md).
 *
 * The machine is shared and noisy: every configuration is measured in PASSES
 * interleaved passes; the best and the spread (worst / best - 1) are printed.
 * Decode rotates over enough copies of each matrix to exceed the L3 cache.
 * Then the GGUF block formats' X16 kernels (Q4_K, Q6_K, Q8_0: every variant this CPU
 * runs) on the gate/up shape, decode and prefill, as the file's own records.
 * Usage: bench_kernels [passes]   (env NIBBLE_BENCH_QUICK=1: fewer, smaller runs;
 *        NIBBLE_BENCH_GROUP=32|64|128: the int4 group, default 64)
 *        bench_kernels --kq [passes]   (the block formats only)
 *        bench_kernels --insn NAME N_TOK REPS   (one kernel, for instruction counts under
 *        emulation: bench/arm_insn.sh)
 */
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/fp.h"
#include "core/membw.h"
#include "core/mmap.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "kernels/kernels.h"
#include "kernels/qblock.h"
#include "quant/kq_repack.h"
#include "quant/repack.h"
#include "lab.h"

/* the int4 group along K: 64, or NIBBLE_BENCH_GROUP (32, 64, 128: the models' default) */
static int g_group = 64;
#define PREFILL_TOK  512
#define ROTATE_BYTES ((int64_t)384 << 20)

static uint64_t g_rng = 99;
static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float gauss(void)
{
    double u1 = ((double)(rnd() >> 11) + 1) * 0x1.0p-53, u2 = (double)(rnd() >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---------------------------------------------------------------- instruction peaks */

/* The peak rate of the instruction each kernel is built on: vpdpbusd (w4a8, 64 MACs),
 * vdpbf16ps (w4a16 bf16, 32 MACs) and vfmadd231ps (w4a16 FMA, 16 MACs), each as 16
 * independent chains written out so they stay in registers (an array indexed in a loop
 * was kept on the stack by the compiler: every step then waited on a store and a
 * reload, and the "peak" came out at half the real one). Distinct starting values and
 * every chain in an asm barrier: identical chains would be merged by the compiler. */
#if defined(__x86_64__)
#define PEAK_ITERS  4000000
#define PEAK_CHAINS 16
#define PEAK_BODY(T, INIT, STEP, REDUCE)                                                       \
    T c0 = INIT(0), c1 = INIT(1), c2 = INIT(2), c3 = INIT(3), c4 = INIT(4), c5 = INIT(5),       \
      c6 = INIT(6), c7 = INIT(7), c8 = INIT(8), c9 = INIT(9), c10 = INIT(10), c11 = INIT(11),   \
      c12 = INIT(12), c13 = INIT(13), c14 = INIT(14), c15 = INIT(15);                          \
    for (int it = 0; it < PEAK_ITERS; it++) {                                                  \
        STEP(c0); STEP(c1); STEP(c2); STEP(c3); STEP(c4); STEP(c5); STEP(c6); STEP(c7);        \
        STEP(c8); STEP(c9); STEP(c10); STEP(c11); STEP(c12); STEP(c13); STEP(c14); STEP(c15);  \
        __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5),      \
                         "+v"(c6), "+v"(c7));                                                  \
        __asm__ volatile("" : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13),  \
                         "+v"(c14), "+v"(c15));                                                \
    }                                                                                          \
    T all[16] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15};        \
    double sum = 0;                                                                            \
    for (int i = 0; i < 16; i++) sum += REDUCE(all[i]);                                        \
    ((double *)arg)[ith] = sum; /* a sink, so the chains are not optimized away */
#define PEAK_INIT_PS(i) _mm512_set1_ps((float)(i))

#endif

enum peak_kind { PEAK_VNNI, PEAK_BF16, PEAK_FMA, PEAK_COUNT };
static const char *const k_peak_names[PEAK_COUNT] = {"vpdpbusd", "vdpbf16ps", "vfmadd231ps"};
#if defined(__x86_64__)
static const int k_peak_macs[PEAK_COUNT] = {64, 32, 16}; /* per zmm instruction */

__attribute__((target("avx512f,avx512vnni"))) static void peak_vnni(void *arg, int ith, int nth)
{
    (void)nth;
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
#define INIT(i) _mm512_set1_epi32(i)
#define STEP(c) c = _mm512_dpbusd_epi32(c, a, b)
    PEAK_BODY(__m512i, INIT, STEP, _mm512_reduce_add_epi32)
#undef INIT
#undef STEP
}

__attribute__((target("avx512f,avx512bf16"))) static void peak_bf16(void *arg, int ith, int nth)
{
    (void)nth;
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = a; /* bf16 1.0 */
#define STEP(c) c = _mm512_dpbf16_ps(c, a, b)
    PEAK_BODY(__m512, PEAK_INIT_PS, STEP, _mm512_reduce_add_ps)
#undef STEP
}

__attribute__((target("avx512f,fma"))) static void peak_fma(void *arg, int ith, int nth)
{
    (void)nth;
    const __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(1e-7f);
#define STEP(c) c = _mm512_fmadd_ps(a, b, c)
    PEAK_BODY(__m512, PEAK_INIT_PS, STEP, _mm512_reduce_add_ps)
#undef STEP
}
#endif

/* GOP/s (1 MAC = 2 ops) of one instruction on 1 and 2 threads, best of 3; 0 if the CPU
 * lacks it (every one off x86-64). */
static void measure_peak(struct nb_pool *pool, enum peak_kind k, double out[3])
{
#if !defined(__x86_64__)
    (void)pool, (void)k;
    out[0] = out[1] = out[2] = 0;
    return;
#else
    const struct nb_cpu *cpu = nb_cpu_get();
    static const nb_pool_fn fns[PEAK_COUNT] = {peak_vnni, peak_bf16, peak_fma};
    int have = k == PEAK_VNNI ? cpu->avx512_vnni : k == PEAK_BF16 ? cpu->avx512_bf16 : cpu->avx512f;
    out[0] = out[1] = out[2] = 0;
    if (!have) return;
    double sink[2];
    for (int nth = 1; nth <= 2; nth++)
        for (int rep = 0; rep < 3; rep++) {
            uint64_t t0 = nb_time_ns();
            nb_pool_run_n(pool, fns[k], sink, nth);
            double sec = (double)(nb_time_ns() - t0) * 1e-9;
            double gops = nth * (double)PEAK_ITERS * PEAK_CHAINS * k_peak_macs[k] * 2 / sec * 1e-9;
            if (gops > out[nth]) out[nth] = gops;
        }
    printf("%s zmm peak: 1 thread %.0f GOP/s, 2 threads %.0f GOP/s (1 MAC = 2 ops)\n",
           k_peak_names[k], out[1], out[2]);
#endif
}

/* ---------------------------------------------------------------- GEMM jobs */

#define MAX_KERNS 16 /* kernels list_kernels can name on one CPU */

enum kind { K_W4A8, K_W4A16 };

struct kern {
    const char *name;
    enum kind kind;
    nb_gemm_w4a8_fn w4a8;
    nb_gemm_w4a16_fn w4a16;
    enum peak_kind peak; /* the instruction whose zmm peak it is measured against */
};

struct gemm_job {
    const struct kern *k;
    const uint8_t *blob;
    int64_t n_out, n_in;
    int n_tok;
    float *y;
    const float *x;
    const int8_t *xq;
    const float *xd;
    const int32_t *xs;
    int64_t ldq, ldg;
    float *scratch[2];
};

static void gemm_worker(void *arg, int ith, int nth)
{
    struct gemm_job *j = arg;
    long r0, r1;
    nb_split_range((long)j->n_out, ith, nth, 16, &r0, &r1);
    if (r0 >= r1) return;
    if (j->k->kind == K_W4A8)
        j->k->w4a8(j->y, j->n_out, j->xq, j->xd, j->xs, j->ldq, j->ldg, j->blob, j->n_out, j->n_in,
                   g_group, j->n_tok, r0, r1);
    else
        j->k->w4a16(j->y, j->n_out, j->x, j->n_in, j->blob, j->n_out, j->n_in, g_group, j->n_tok,
                    r0, r1, j->scratch[ith]);
}

struct shape {
    const char *name;
    int64_t n_out, n_in;
};

struct mat {
    enum kind kind;
    int64_t bytes, copies;
    uint8_t *blobs; /* copies of one X16 matrix, each `bytes` long */
};

static void make_mat(struct mat *m, enum kind kind, const struct shape *s, int rotate)
{
    enum nb_wpath p = kind == K_W4A8 ? NB_WPATH_W4A8 : NB_WPATH_W4A16;
    struct nb_layout_planes pl;
    nb_layout_planes(p, g_group, s->n_out, s->n_in, &pl);
    uint8_t *rows = aligned_alloc(64, (size_t)pl.total);
    memset(rows, 0, (size_t)pl.total);
    for (int64_t i = 0; i < pl.size[0]; i++)
        rows[i] = (uint8_t)rnd();
    for (int64_t i = 0; i < pl.size[1] / 2; i++) {
        float d = 0.01f * gauss();
        nb_q_store_u16(rows + pl.offset[1] + 2 * i, nb_f32_to_bf16(d));
        if (p == NB_WPATH_W4A16)
            nb_q_store_u16(rows + pl.offset[2] + 2 * i, nb_f32_to_bf16(-8 * d));
    }
    m->kind = kind;
    m->bytes = pl.total;
    m->copies = rotate ? (ROTATE_BYTES + pl.total - 1) / pl.total : 1;
    if (m->copies < 2 && rotate) m->copies = 2;
    m->blobs = nb_huge_alloc((size_t)(m->copies * pl.total)); /* as a .nib's weights run */
    const char *env = getenv("NIBBLE_REPACK_ROWS");
    nb_repack_x16(p, g_group, rows, m->blobs, s->n_out, s->n_in, env ? atoll(env) : 0);
    for (int64_t c = 1; c < m->copies; c++)
        memcpy(m->blobs + c * pl.total, m->blobs, (size_t)pl.total);
    free(rows);
}

struct acts {
    int n_tok;
    float *x;
    int8_t *q;
    float *d;
    int32_t *s;
    int64_t ldg;
};

static void make_acts(struct acts *a, int n_tok, int64_t n_in)
{
    a->n_tok = n_tok;
    a->ldg = n_in / 32;
    a->x = malloc(sizeof(float) * (size_t)(n_tok * n_in));
    a->q = malloc((size_t)(n_tok * n_in));
    a->d = malloc(sizeof(float) * (size_t)(n_tok * a->ldg));
    a->s = malloc(sizeof(int32_t) * (size_t)(n_tok * a->ldg));
    for (int64_t i = 0; i < n_tok * n_in; i++)
        a->x[i] = gauss();
    for (int t = 0; t < n_tok; t++)
        nb_act_quant_q8_ref(a->x + t * n_in, n_in, g_group, a->q + t * n_in, a->d + t * a->ldg,
                            a->s + t * a->ldg);
}

static void free_acts(struct acts *a)
{
    free(a->x), free(a->q), free(a->d), free(a->s);
}

/* Max |fast - ref| / max|ref| over rows [0, 64) (w4a8: must be 0). */
static double check(const struct kern *k, const struct shape *s, const struct mat *m,
                    const struct acts *a, int n_tok)
{
    int64_t rows = 64;
    float *y0 = calloc((size_t)(n_tok * s->n_out), sizeof(float));
    float *y1 = calloc((size_t)(n_tok * s->n_out), sizeof(float));
    float *scr = malloc(sizeof(float) * (size_t)s->n_in);
    if (k->kind == K_W4A8) {
        nb_gemm_w4a8_x16_ref(y0, s->n_out, a->q, a->d, a->s, s->n_in, a->ldg, m->blobs, s->n_out,
                             s->n_in, g_group, n_tok, 0, rows);
        k->w4a8(y1, s->n_out, a->q, a->d, a->s, s->n_in, a->ldg, m->blobs, s->n_out, s->n_in,
                g_group, n_tok, 0, rows);
    } else {
        nb_gemm_w4a16_x16_ref(y0, s->n_out, a->x, s->n_in, m->blobs, s->n_out, s->n_in, g_group,
                              n_tok, 0, rows, scr);
        k->w4a16(y1, s->n_out, a->x, s->n_in, m->blobs, s->n_out, s->n_in, g_group, n_tok, 0, rows,
                 scr);
    }
    double err = 0, mx = 0;
    for (int t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < rows; r++) {
            double e = fabs((double)y0[t * s->n_out + r] - y1[t * s->n_out + r]);
            err = e > err ? e : err;
            mx = fabs(y0[t * s->n_out + r]) > mx ? fabs(y0[t * s->n_out + r]) : mx;
        }
    free(y0), free(y1), free(scr);
    return mx > 0 ? err / mx : err;
}

/* One timed pass: decode streams every copy once; prefill runs one matrix once. */
static double run_pass(struct nb_pool *pool, int nth, const struct kern *k, const struct shape *s,
                       const struct mat *m, const struct acts *a, float *y, float **scratch)
{
    struct gemm_job j = {k,
                         NULL,
                         s->n_out,
                         s->n_in,
                         a->n_tok,
                         y,
                         a->x,
                         a->q,
                         a->d,
                         a->s,
                         s->n_in,
                         a->ldg,
                         {scratch[0], scratch[1]}};
    uint64_t t0 = nb_time_ns();
    for (int64_t c = 0; c < m->copies; c++) {
        j.blob = m->blobs + c * m->bytes;
        nb_pool_run_n(pool, gemm_worker, &j, nth);
    }
    return (double)(nb_time_ns() - t0) * 1e-9;
}

/* The X16 kernels this CPU runs (at most 10), the reference first. */
static int list_kernels(struct kern *kerns, const struct nb_cpu *cpu)
{
    int nk = 0;
    kerns[nk++] = (struct kern){"w4a8 ref", K_W4A8, nb_gemm_w4a8_x16_ref, NULL, PEAK_VNNI};
#ifdef NB_HAVE_ARM
    kerns[nk++] = (struct kern){"w4a8 neon", K_W4A8, nb_gemm_w4a8_x16_neon, NULL, PEAK_VNNI};
    if (cpu->asimddp)
        kerns[nk++] =
            (struct kern){"w4a8 neon-dotprod", K_W4A8, nb_gemm_w4a8_x16_dotprod, NULL, PEAK_VNNI};
    if (cpu->asimddp && cpu->i8mm)
        kerns[nk++] = (struct kern){"w4a8 neon-i8mm", K_W4A8, nb_gemm_w4a8_x16_i8mm, NULL, PEAK_VNNI};
    kerns[nk++] = (struct kern){"w4a16 neon", K_W4A16, NULL, nb_gemm_w4a16_x16_neon, PEAK_FMA};
    if (cpu->bf16)
        kerns[nk++] =
            (struct kern){"w4a16 neon-bf16", K_W4A16, NULL, nb_gemm_w4a16_x16_neon_bf16, PEAK_BF16};
#endif
#ifdef NB_HAVE_X86
    if (cpu->avx512_vnni)
        kerns[nk++] = (struct kern){"w4a8 avx512vnni", K_W4A8, nb_gemm_w4a8_x16_avx512vnni, NULL,
                                    PEAK_VNNI};
    if (cpu->avx_vnni)
        kerns[nk++] = (struct kern){"w4a8 avxvnni", K_W4A8, nb_gemm_w4a8_x16_avxvnni, NULL, PEAK_VNNI};
    if (cpu->avx2 && cpu->fma)
        kerns[nk++] = (struct kern){"w4a8 avx2", K_W4A8, nb_gemm_w4a8_x16_avx2, NULL, PEAK_VNNI};
    if (cpu->avx512bw)
        kerns[nk++] = (struct kern){"w4a16 avx512", K_W4A16, NULL, nb_gemm_w4a16_x16_avx512, PEAK_FMA};
    if (cpu->avx512bw && cpu->avx512_vnni)
        kerns[nk++] = (struct kern){"w4a16 avx512vnni", K_W4A16, NULL,
                                    nb_gemm_w4a16_x16_avx512vnni, PEAK_FMA};
    if (cpu->avx512bw && cpu->avx512_bf16 && cpu->avx512_vnni)
        kerns[nk++] =
            (struct kern){"w4a16 avx512bf16", K_W4A16, NULL, nb_gemm_w4a16_x16_avx512bf16,
                          PEAK_BF16};
    /* the tile kernels where the CPU has them and Linux grants tile data (process-wide);
     * their rate is printed against the zmm instruction's peak, so above 100% is possible */
    if (cpu->amx_tile && cpu->amx_int8 && cpu->avx512_vnni && nb_amx_request_perm())
        kerns[nk++] = (struct kern){"w4a8 amx", K_W4A8, nb_gemm_w4a8_x16_amx, NULL, PEAK_VNNI};
    if (cpu->amx_tile && cpu->amx_bf16 && cpu->avx512_bf16 && nb_amx_request_perm())
        kerns[nk++] = (struct kern){"w4a16 amx", K_W4A16, NULL, nb_gemm_w4a16_x16_amx, PEAK_BF16};
#endif
    (void)cpu;
    return nk;
}

/* --insn NAME N_TOK REPS: only kernel NAME on the q/o shape (2048 x 2048), N_TOK tokens,
 * REPS calls on one thread, nothing else timed or printed but one line. Under qemu's
 * counting plugin (bench/arm_insn.sh) the difference between REPS and 2 REPS calls,
 * divided by REPS, is the kernel's instructions per call: set-up cancels out. A GGUF
 * block kernel's name (insn_kq) works too. */
static int insn_kq(const char *name, int n_tok, int reps);

/* --insn's matrix: 2048 x 2048, or NIBBLE_BENCH_ROWS=N output rows (a multiple of 16; e.g.
 * the gate/up shape's 6144, whose weights do not fit the L2); *cold: NIBBLE_BENCH_COLD=1,
 * each call reads the next of copies of the matrix that exceed the L3, so its weights come
 * from memory, as in a forward pass. */
static struct shape insn_shape(int *cold)
{
    const char *rows = getenv("NIBBLE_BENCH_ROWS"), *c = getenv("NIBBLE_BENCH_COLD");
    struct shape s = {"q/o 2048x2048", 2048, 2048};
    if (rows && atoi(rows) >= 16) s.n_out = atoi(rows) / 16 * 16;
    *cold = c && *c && strcmp(c, "0");
    return s;
}

static int insn_mode(const struct kern *kerns, int nk, const char *name, int n_tok, int reps)
{
    const struct kern *k = NULL;
    for (int i = 0; i < nk; i++)
        if (!strcmp(kerns[i].name, name)) k = &kerns[i];
    if (!k) return insn_kq(name, n_tok, reps);
    if (n_tok < 1 || n_tok > PREFILL_TOK || reps < 1) {
        fprintf(stderr, "bench_kernels: --insn: no kernel '%s' on this CPU, or a bad count\n",
                name);
        return 2;
    }
    int cold;
    const struct shape s = insn_shape(&cold);
    struct mat m;
    make_mat(&m, k->kind, &s, cold);
    struct acts a;
    make_acts(&a, n_tok, s.n_in);
    float *y = malloc(sizeof(float) * (size_t)(s.n_out * n_tok));
    float *scr = malloc(sizeof(float) * (size_t)s.n_in);
    struct gemm_job j = {k, m.blobs, s.n_out, s.n_in, n_tok, y, a.x, a.q, a.d, a.s, s.n_in, a.ldg,
                         {scr, scr}};
    /* NIBBLE_BENCH_SLICE=N: only the rows thread 0 of N would run (what one thread of an
     * N-thread GEMM does: its row slice against all the tokens) */
    const char *sl = getenv("NIBBLE_BENCH_SLICE");
    int nth = sl && atoi(sl) > 1 ? atoi(sl) : 1;
    for (int r = 0; r < reps; r++) {
        j.blob = m.blobs + (r % m.copies) * m.bytes;
        gemm_worker(&j, 0, nth);
    }
    printf("insn %s n_tok %d reps %d slice 1/%d y0 %g\n", name, n_tok, reps, nth, (double)y[0]);
    free(y), free(scr), nb_huge_free(m.blobs, (size_t)(m.copies * m.bytes));
    free_acts(&a);
    return 0;
}

/* ---------------------------------------------------------------- GGUF block formats */

struct kq_kern {
    const char *name;
    enum nb_wformat f;
    nb_gemm_kq_fn fn;
};

struct kq_job {
    nb_gemm_kq_fn fn;
    const uint8_t *blob;
    int64_t n_out, n_in, ldg;
    int n_tok;
    float *y;
    const int8_t *xq;
    const float *xd;
    const int32_t *xs;
};

static void kq_worker(void *arg, int ith, int nth)
{
    struct kq_job *j = arg;
    long r0, r1;
    nb_split_range((long)j->n_out, ith, nth, 16, &r0, &r1);
    if (r0 < r1)
        j->fn(j->y, j->n_out, j->xq, j->xd, j->xs, j->n_in, j->ldg, j->blob, j->n_out, j->n_in,
              j->n_tok, r0, r1);
}

/* The block kernels this CPU runs for Q4_K, Q6_K and Q8_0 (at most 12). */
static int list_kq(struct kq_kern *k, const struct nb_cpu *cpu, int with_q5)
{
    int n = 0;
#ifdef NB_HAVE_X86
#define KQ3(v, ok)                                                                                 \
    if (ok) {                                                                                      \
        k[n++] = (struct kq_kern){"q4_k " #v, NB_WF_Q4_K_X16, nb_gemm_q4_k_x16_##v};               \
        if (with_q5)                                                                               \
            k[n++] = (struct kq_kern){"q5_k " #v, NB_WF_Q5_K_X16, nb_gemm_q5_k_x16_##v};           \
        k[n++] = (struct kq_kern){"q6_k " #v, NB_WF_Q6_K_X16, nb_gemm_q6_k_x16_##v};               \
        k[n++] = (struct kq_kern){"q8_0 " #v, NB_WF_Q8_0_X16, nb_gemm_q8_0_x16_##v};               \
    }
    KQ3(avx512vnni, cpu->avx512_vnni && cpu->avx512bw)
    KQ3(avxvnni, cpu->avx_vnni && cpu->avx2)
    KQ3(avx2, cpu->avx2 && cpu->fma && cpu->f16c)
#undef KQ3
#endif
    (void)cpu, (void)k, (void)with_q5;
    return n;
}

/* Random blocks of f's rows (finite f16 scales) repacked into records: copies of them. */
static uint8_t *make_kq(enum nb_wformat f, const struct shape *s, int rotate, int64_t *bytes,
                        int64_t *copies)
{
    struct nb_block_info bi;
    struct nb_layout_planes pl;
    nb_wformat_block(f, &bi);
    nb_wformat_planes(f, 0, s->n_out, s->n_in, &pl);
    int64_t nb = s->n_out * (s->n_in / bi.elems);
    uint8_t *rows = malloc((size_t)(nb * bi.bytes));
    int d_at = f == NB_WF_Q6_K_X16 ? 208 : 0, dmin = f == NB_WF_Q4_K_X16 || f == NB_WF_Q5_K_X16;
    for (int64_t i = 0; i < nb * bi.bytes; i++) rows[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nb; b++) {
        nb_q_store_u16(rows + b * bi.bytes + d_at, nb_f32_to_f16(0.01f * gauss()));
        if (dmin) nb_q_store_u16(rows + b * bi.bytes + 2, nb_f32_to_f16(0.01f * gauss()));
    }
    *bytes = pl.total;
    *copies = rotate ? (ROTATE_BYTES + pl.total - 1) / pl.total : 1;
    uint8_t *blobs = nb_huge_alloc((size_t)(*copies * pl.total));
    nb_kq_repack_x16(f, rows, s->n_out, s->n_in, 0, s->n_out / 16, blobs);
    for (int64_t c = 1; c < *copies; c++) memcpy(blobs + c * pl.total, blobs, (size_t)pl.total);
    free(rows);
    return blobs;
}

/* Random activations of n_tok tokens, quantized both ways the block kernels take them: [0]
 * per 256 (Q8_K form: Q4_K, Q6_K), [1] per 32 (Q8_0's), ldg groups a token. */
struct kq_acts {
    int8_t *q[2];
    float *d[2];
    int32_t *s[2];
    int64_t ldg;
};

static void make_kq_acts(struct kq_acts *a, int n_tok, int64_t n_in)
{
    a->ldg = n_in / 16;
    float *x = malloc(sizeof(float) * (size_t)n_in);
    for (int f = 0; f < 2; f++) {
        a->q[f] = malloc((size_t)(n_tok * n_in));
        a->d[f] = malloc(sizeof(float) * (size_t)(n_tok * a->ldg));
        a->s[f] = malloc(sizeof(int32_t) * (size_t)(n_tok * a->ldg));
    }
    for (int t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < n_in; i++) x[i] = gauss();
        nb_act_quant_q8k(nb_act_quant_q8_ref, x, n_in, a->q[0] + t * n_in, a->d[0] + t * a->ldg,
                         a->s[0] + t * a->ldg);
        nb_act_quant_q8_ref(x, n_in, 32, a->q[1] + t * n_in, a->d[1] + t * a->ldg,
                            a->s[1] + t * a->ldg);
    }
    free(x);
}

static void free_kq_acts(struct kq_acts *a)
{
    for (int f = 0; f < 2; f++) free(a->q[f]), free(a->d[f]), free(a->s[f]);
}

/* --insn for a GGUF block kernel (NAME as bench_kq prints it, e.g. "q6_k avx512vnni"): the
 * q/o shape, N_TOK tokens (activations per 256, or per 32 for Q8_0), REPS calls on one
 * thread. 2 when this CPU has no such kernel. */
static int insn_kq(const char *name, int n_tok, int reps)
{
    struct kq_kern k[16];
    int nk = list_kq(k, nb_cpu_get(), 1), ki = -1;
    for (int i = 0; i < nk; i++)
        if (!strcmp(k[i].name, name)) ki = i;
    if (ki < 0 || n_tok < 1 || n_tok > PREFILL_TOK || reps < 1) {
        fprintf(stderr, "bench_kernels: --insn: no kernel '%s' on this CPU, or a bad count\n",
                name);
        return 2;
    }
    int cold;
    const struct shape s = insn_shape(&cold);
    const int f = k[ki].f == NB_WF_Q8_0_X16;
    struct kq_acts a;
    make_kq_acts(&a, n_tok, s.n_in);
    float *y = malloc(sizeof(float) * (size_t)(s.n_out * n_tok));
    int64_t bytes, copies;
    uint8_t *blob = make_kq(k[ki].f, &s, cold, &bytes, &copies);
    struct kq_job j = {k[ki].fn, blob, s.n_out, s.n_in, a.ldg, n_tok, y, a.q[f], a.d[f], a.s[f]};
    for (int r = 0; r < reps; r++) {
        j.blob = blob + (r % copies) * bytes;
        kq_worker(&j, 0, 1);
    }
    printf("insn %s n_tok %d reps %d y0 %g\n", name, n_tok, reps, (double)y[0]);
    free(y), nb_huge_free(blob, (size_t)(copies * bytes));
    free_kq_acts(&a);
    return 0;
}

static void bench_kq(struct nb_pool *pool, int passes, const double bw[3])
{
    struct kq_kern k[16];
    int nk = list_kq(k, nb_cpu_get(), 0);
    if (!nk) return;
    const struct shape s = {"gate/up 6144x2048", 6144, 2048};
    float *y = malloc(sizeof(float) * (size_t)(s.n_out * PREFILL_TOK));
    for (int mode = 0; mode < 2; mode++) {
        int n_tok = mode ? PREFILL_TOK : 1;
        printf("\n== GGUF block X16 kernels, %s (n_tok %d), %s, %d interleaved passes ==\n",
               mode ? "prefill" : "decode", n_tok, s.name, passes);
        struct kq_acts a;
        make_kq_acts(&a, n_tok, s.n_in);
        enum nb_wformat fs[3] = {NB_WF_Q4_K_X16, NB_WF_Q6_K_X16, NB_WF_Q8_0_X16};
        uint8_t *blob[3];
        int64_t bytes[3], copies[3];
        for (int i = 0; i < 3; i++) blob[i] = make_kq(fs[i], &s, !mode, &bytes[i], &copies[i]);
        struct result res[12][3];
        memset(res, 0, sizeof res);
        for (int pass = 0; pass < passes; pass++)
            for (int ki = 0; ki < nk; ki++) {
                int fi = k[ki].f == NB_WF_Q4_K_X16 ? 0 : k[ki].f == NB_WF_Q6_K_X16 ? 1 : 2;
                int b32 = fi == 2;
                struct kq_job j = {k[ki].fn, NULL, s.n_out, s.n_in, a.ldg, n_tok, y,
                                   a.q[b32], a.d[b32], a.s[b32]};
                for (int nth = 1; nth <= 2; nth++) {
                    uint64_t t0 = nb_time_ns();
                    for (int64_t c = 0; c < copies[fi]; c++) {
                        j.blob = blob[fi] + c * bytes[fi];
                        nb_pool_run_n(pool, kq_worker, &j, nth);
                    }
                    upd(&res[ki][nth], (double)(nb_time_ns() - t0) * 1e-9);
                }
            }
        for (int ki = 0; ki < nk; ki++) {
            int fi = k[ki].f == NB_WF_Q4_K_X16 ? 0 : k[ki].f == NB_WF_Q6_K_X16 ? 1 : 2;
            printf("%-18s %-16s", s.name, k[ki].name);
            for (int nth = 1; nth <= 2; nth++) {
                const struct result *r = &res[ki][nth];
                double sp = 100 * (r->worst / r->best - 1);
                if (mode == 0) {
                    double gbs = (double)(bytes[fi] * copies[fi]) / r->best * 1e-9;
                    printf("  %dT %6.1f GB/s (%3.0f%% of read) %6.1f us [+%3.0f%%]", nth, gbs,
                           bw[nth] > 0 ? 100 * gbs / bw[nth] : 0, r->best / copies[fi] * 1e6, sp);
                } else {
                    printf("  %dT %6.0f GOP/s [+%3.0f%%]", nth,
                           2.0 * s.n_out * s.n_in * n_tok / r->best * 1e-9, sp);
                }
            }
            printf("\n");
        }
        fflush(stdout);
        for (int i = 0; i < 3; i++) nb_huge_free(blob[i], (size_t)(copies[i] * bytes[i]));
        free_kq_acts(&a);
    }
    free(y);
}

int main(int argc, char **argv)
{
    const char *genv = getenv("NIBBLE_BENCH_GROUP");
    if (genv) {
        g_group = atoi(genv);
        if (g_group != 32 && g_group != 64 && g_group != 128) {
            fprintf(stderr, "bench_kernels: NIBBLE_BENCH_GROUP=%s is not 32, 64 or 128\n", genv);
            return 2;
        }
    }
    const struct nb_cpu *cpu = nb_cpu_get();
    struct kern kerns[MAX_KERNS];
    int nk = list_kernels(kerns, cpu);
    if (argc == 5 && !strcmp(argv[1], "--insn"))
        return insn_mode(kerns, nk, argv[2], atoi(argv[3]), atoi(argv[4]));
    int kq_only = argc > 1 && !strcmp(argv[1], "--kq");
    if (kq_only) argc--, argv++;
    int passes = argc > 1 ? atoi(argv[1]) : 5;
    int quick = getenv("NIBBLE_BENCH_QUICK") != NULL;
    printf("cpu flags: %s\n", nb_cpu_flags_str());
    struct nb_pool *pool;
    if (nb_pool_init(&pool, 2, 0)) return 1;

    /* read bandwidth: the same test as `nibble bench` (core/membw.c), 1 and 2 threads */
    double bw[3] = {0, 0, 0};
    for (int nth = 1; nth <= 2; nth++)
        bw[nth] = nb_measure_read_bw(nth, (size_t)(quick ? 256 : 1024) << 20, 5);
    printf("read bandwidth (best of 5 plain and 5 prefetched passes): 1 thread %.1f GB/s, "
           "2 threads %.1f GB/s\n", bw[1], bw[2]);
    if (kq_only) {
        bench_kq(pool, passes, bw);
        nb_pool_free(pool);
        return 0;
    }
    double peak[PEAK_COUNT][3];
    for (int k = 0; k < PEAK_COUNT; k++) measure_peak(pool, (enum peak_kind)k, peak[k]);

    static const struct shape shapes[] = {{"q/o 2048x2048", 2048, 2048},
                                          {"kv 1024x2048", 1024, 2048},
                                          {"gate/up 6144x2048", 6144, 2048},
                                          {"down 2048x6144", 2048, 6144},
                                          {"head 151936x2048", 151936, 2048}};
    int nshape = quick ? 3 : 5;

    float *scr[2] = {malloc(sizeof(float) * 8192), malloc(sizeof(float) * 8192)};
    float *y = malloc(sizeof(float) * (size_t)151936 * PREFILL_TOK);
    for (int mode = 0; mode < 2; mode++) { /* 0 decode, 1 prefill */
        int n_tok = mode ? PREFILL_TOK : 1;
        printf("\n== %s (n_tok %d, group %d, X16), %d interleaved passes: best [spread] ==\n",
               mode ? "prefill" : "decode", n_tok, g_group, passes);
        for (int si = 0; si < nshape; si++) {
            const struct shape *s = &shapes[si];
            if (mode && si == 4) continue; /* the head is decode-only (last rows only) */
            struct mat m8, m16;
            make_mat(&m8, K_W4A8, s, !mode);
            make_mat(&m16, K_W4A16, s, !mode);
            struct acts a, ac;
            make_acts(&a, n_tok, s->n_in);
            make_acts(&ac, 3, s->n_in);
            struct result res[MAX_KERNS][3];
            memset(res, 0, sizeof res);
            for (int ki = 0; ki < nk; ki++) {
                const struct mat *m = kerns[ki].kind == K_W4A8 ? &m8 : &m16;
                if (mode == 0 && si == 0) {
                    double e1 = check(&kerns[ki], s, m, &a, 1),
                           e3 = check(&kerns[ki], s, m, &ac, 3);
                    printf("check %-16s vs ref: max rel err %.2g (1 tok), %.2g (3 tok)\n",
                           kerns[ki].name, e1, e3);
                }
            }
            for (int pass = 0; pass < passes; pass++)
                for (int ki = 0; ki < nk; ki++) {
                    if (!strcmp(kerns[ki].name, "w4a8 ref") && (mode || si == 4)) continue;
                    const struct mat *m = kerns[ki].kind == K_W4A8 ? &m8 : &m16;
                    for (int nth = 1; nth <= 2; nth++)
                        upd(&res[ki][nth], run_pass(pool, nth, &kerns[ki], s, m, &a, y, scr));
                }
            for (int ki = 0; ki < nk; ki++) {
                if (res[ki][1].best == 0) continue;
                const struct mat *m = kerns[ki].kind == K_W4A8 ? &m8 : &m16;
                printf("%-18s %-16s", s->name, kerns[ki].name);
                for (int nth = 1; nth <= 2; nth++) {
                    const struct result *r = &res[ki][nth];
                    double sp = 100 * (r->worst / r->best - 1);
                    if (mode == 0) {
                        double gbs = (double)(m->bytes * m->copies) / r->best * 1e-9;
                        printf("  %dT %6.1f GB/s (%3.0f%% of read) %6.1f us [+%3.0f%%]", nth, gbs,
                               bw[nth] > 0 ? 100 * gbs / bw[nth] : 0,
                               r->best / (double)m->copies * 1e6, sp);
                    } else {
                        double gops = 2.0 * s->n_out * s->n_in * n_tok / r->best * 1e-9;
                        const double *pk = peak[kerns[ki].peak];
                        printf("  %dT %6.0f GOP/s (%3.0f%% of %s peak) [+%3.0f%%]", nth, gops,
                               pk[nth] > 0 ? 100 * gops / pk[nth] : 0,
                               k_peak_names[kerns[ki].peak], sp);
                    }
                }
                printf("\n");
            }
            fflush(stdout);
            nb_huge_free(m8.blobs, (size_t)(m8.copies * m8.bytes));
            nb_huge_free(m16.blobs, (size_t)(m16.copies * m16.bytes));
            free_acts(&a), free_acts(&ac);
        }
    }
    free(y), free(scr[0]), free(scr[1]);
    bench_kq(pool, passes, bw);
    nb_pool_free(pool);
    return 0;
}
