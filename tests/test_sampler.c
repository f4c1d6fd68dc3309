/* test_sampler — greedy, seeded sampling, filters and the repetition penalty. */
#include "helpers/testutil.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

static struct nb_sampler *make(float temp, int top_k, float top_p, float min_p, float rep,
                               uint64_t seed, int n_vocab)
{
    struct nb_sampler_params p = nb_sampler_default_params();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = rep;
    p.seed = seed;
    struct nb_sampler *s = NULL;
    assert_int_equal(nb_sampler_init(&s, &p, n_vocab), NB_OK);
    return s;
}

static void test_greedy(void **state)
{
    struct nb_sampler *s = make(0, 40, 0.95f, 0.05f, 1, 1, 5);
    float l[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
    assert_int_equal(nb_sampler_sample(s, l), 1); /* tie: the lower id */
    nb_sampler_free(s);
}

static void test_seeded_repeatable(void **state)
{
    float base[50];
    for (int i = 0; i < 50; i++) base[i] = sinf((float)i) * 2;
    int32_t a[64], b[64], c[64];
    struct nb_sampler *s1 = make(1.0f, 0, 1.0f, 0, 1, 42, 50);
    struct nb_sampler *s2 = make(1.0f, 0, 1.0f, 0, 1, 42, 50);
    struct nb_sampler *s3 = make(1.0f, 0, 1.0f, 0, 1, 43, 50);
    for (int i = 0; i < 64; i++) {
        float l[50];
        memcpy(l, base, sizeof l);
        a[i] = nb_sampler_sample(s1, l);
        memcpy(l, base, sizeof l);
        b[i] = nb_sampler_sample(s2, l);
        memcpy(l, base, sizeof l);
        c[i] = nb_sampler_sample(s3, l);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
    nb_sampler_free(s1);
    nb_sampler_free(s2);
    nb_sampler_free(s3);
}

static void test_distribution(void **state)
{
    struct nb_sampler *s = make(1.0f, 0, 1.0f, 0, 1, 7, 3);
    int count[3] = {0};
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        float l[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
        count[nb_sampler_sample(s, l)]++;
    }
    assert_true(fabs(count[0] / (double)N - 0.5) < 0.02);
    assert_true(fabs(count[1] / (double)N - 0.3) < 0.02);
    assert_true(fabs(count[2] / (double)N - 0.2) < 0.02);
    nb_sampler_free(s);
}

static void test_filters(void **state)
{
    float base[4] = {1.0f, 3.0f, 2.9f, 0.5f};
    struct nb_sampler *k1 = make(1.5f, 1, 1.0f, 0, 1, 3, 4);     /* top-k 1 */
    struct nb_sampler *p0 = make(1.5f, 0, 0.01f, 0, 1, 3, 4);    /* tiny top-p */
    struct nb_sampler *m1 = make(1.5f, 0, 1.0f, 1.0f, 1, 3, 4);  /* min-p 1 */
    struct nb_sampler *k2 = make(1.0f, 2, 1.0f, 0, 1, 3, 4);     /* top-k 2: ids 1, 2 */
    int seen2 = 0;
    for (int i = 0; i < 200; i++) {
        float l[4];
        memcpy(l, base, sizeof l);
        assert_int_equal(nb_sampler_sample(k1, l), 1);
        memcpy(l, base, sizeof l);
        assert_int_equal(nb_sampler_sample(p0, l), 1);
        memcpy(l, base, sizeof l);
        assert_int_equal(nb_sampler_sample(m1, l), 1);
        memcpy(l, base, sizeof l);
        int t = nb_sampler_sample(k2, l);
        assert_true(t == 1 || t == 2);
        seen2 |= t == 2;
    }
    assert_true(seen2);
    nb_sampler_free(k1);
    nb_sampler_free(p0);
    nb_sampler_free(m1);
    nb_sampler_free(k2);
}

static void test_repeat_penalty(void **state)
{
    struct nb_sampler *s = make(0, 0, 1.0f, 0, 2.0f, 1, 3);
    nb_sampler_accept(s, 0);
    float l[3] = {2.0f, 1.5f, -1.0f};
    assert_int_equal(nb_sampler_sample(s, l), 1); /* 2.0 / 2 = 1.0 < 1.5 */
    assert_true(fabsf(l[0] - 1.0f) < 1e-6f);
    nb_sampler_free(s);
}

/* OpenAI's penalties over the window: presence once per token seen, frequency per
 * occurrence (token 0 seen twice, token 1 once). */
static void test_presence_frequency(void **state)
{
    struct nb_sampler_params p = nb_sampler_default_params();
    p.temperature = 0;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    struct nb_sampler *s = NULL;
    assert_int_equal(nb_sampler_init(&s, &p, 3), NB_OK);
    nb_sampler_accept(s, 0);
    nb_sampler_accept(s, 1);
    nb_sampler_accept(s, 0);
    float l[3] = {2.0f, 1.5f, 1.2f};
    assert_int_equal(nb_sampler_sample(s, l), 2); /* 2 - 0.5 - 0.5 = 1.0, 1.5 - 0.75 = 0.75 */
    assert_true(fabsf(l[0] - 1.0f) < 1e-6f);
    assert_true(fabsf(l[1] - 0.75f) < 1e-6f);
    assert_true(fabsf(l[2] - 1.2f) < 1e-6f);
    nb_sampler_free(s);
    p.presence_penalty = 2.5f; /* OpenAI's range is [-2, 2] */
    assert_int_equal(nb_sampler_init(&s, &p, 3), NB_ERR_INVALID_ARG);
}

/* logit_bias: added before everything else; -inf bans; replaced by the next call; errors. */
static void test_logit_bias(void **state)
{
    (void)state;
    struct nb_sampler *s = make(0, 40, 0.95f, 0.05f, 1, 1, 5);
    const int32_t ids[2] = {1, 4};
    const float ban[2] = {-INFINITY, 0.5f};
    assert_int_equal(nb_sampler_set_logit_bias(s, ids, ban, 2), NB_OK);
    float l[5] = {0.1f, 2.0f, -1.0f, 1.8f, 1.9f};
    assert_int_equal(nb_sampler_sample(s, l), 4); /* 1 banned, 4: 1.9 + 0.5 */
    float l2[5] = {0.1f, 2.0f, -1.0f, 1.8f, 1.9f};
    assert_int_equal(nb_sampler_set_logit_bias(s, NULL, NULL, 0), NB_OK);
    assert_int_equal(nb_sampler_sample(s, l2), 1); /* none again */
    /* sampled at temperature 1: a banned token never comes */
    nb_sampler_free(s);
    s = make(1.0f, 0, 1.0f, 0, 1, 7, 5);
    const int32_t one[1] = {3};
    const float minf[1] = {-INFINITY};
    assert_int_equal(nb_sampler_set_logit_bias(s, one, minf, 1), NB_OK);
    for (int i = 0; i < 200; i++) {
        float x[5] = {0, 0, 0, 3, 0};
        assert_int_not_equal(nb_sampler_sample(s, x), 3);
    }
    const int32_t out[1] = {5};
    const float b1[1] = {1};
    assert_int_equal(nb_sampler_set_logit_bias(s, out, b1, 1), NB_ERR_INVALID_ARG);
    const float pinf[1] = {INFINITY};
    assert_int_equal(nb_sampler_set_logit_bias(s, one, pinf, 1), NB_ERR_INVALID_ARG);
    nb_sampler_free(s);
}

/* top-k by heap selection must keep exactly the first k of a full sort, ties (equal
 * logits: lower id first) included: top_k = n - 1 with the one excluded token hopeless
 * (probability 0 either way) draws exactly what the full-sort path (top_k = n) draws. */
static void test_top_k_select(void **state)
{
    enum { N = 1000 };
    float base[N];
    for (int i = 0; i < N; i++) base[i] = (float)((i * 7919) % 13) * 0.25f; /* many ties */
    base[517] = -1e30f;
    for (int k = 0; k < 3; k++) {
        float top_p = k == 0 ? 1.0f : k == 1 ? 0.5f : 1.0f, min_p = k == 2 ? 0.3f : 0;
        struct nb_sampler *heap = make(1.0f, N - 1, top_p, min_p, 1, 7 + k, N);
        struct nb_sampler *full = make(1.0f, N, top_p, min_p, 1, 7 + k, N);
        for (int step = 0; step < 200; step++) {
            float l1[N], l2[N];
            memcpy(l1, base, sizeof l1);
            memcpy(l2, base, sizeof l2);
            assert_int_equal(nb_sampler_sample(heap, l1), nb_sampler_sample(full, l2));
        }
        nb_sampler_free(heap);
        nb_sampler_free(full);
    }
    /* small k: the k best, ties by id: k = 3 over {5,5,5,5} keeps ids 0, 1, 2 */
    struct nb_sampler *s = make(1.0f, 3, 1.0f, 0, 1, 1, 4);
    int count[4] = {0};
    for (int i = 0; i < 300; i++) {
        float l[4] = {5, 5, 5, 5};
        count[nb_sampler_sample(s, l)]++;
    }
    assert_int_equal(count[3], 0);
    assert_true(count[0] > 50 && count[1] > 50 && count[2] > 50);
    nb_sampler_free(s);
}

/* A vocabulary of 151,936 (Qwen's): top-k through the chunk maxima must keep exactly the
 * k best, ties by id, and greedy must give the first index of the maximum. */
static int desc_then_id(const void *a, const void *b)
{
    const float *x = *(const float *const *)a, *y = *(const float *const *)b;
    if (*x != *y) return *x < *y ? 1 : -1;
    return x < y ? -1 : x > y;
}

static void test_large_vocab(void **state)
{
    enum { N = 151936, K = 40 };
    float *base = malloc(sizeof *base * N), *l = malloc(sizeof *l * N);
    const float **ord = malloc(sizeof *ord * N);
    assert_non_null(base);
    assert_non_null(l);
    assert_non_null(ord);
    uint64_t rng = 11;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) /* round 1: many ties; round 2: few distinct values */
            base[i] = round == 0   ? (float)tu_rand_unit(&rng) * 20 - 10
                      : round == 1 ? (float)((i * 7919) % 13) * 0.25f
                                   : (float)((i * 31) % 3);
        for (int i = 0; i < N; i++) ord[i] = &base[i];
        qsort(ord, N, sizeof *ord, desc_then_id);
        struct nb_sampler *s = make(1.0f, K, 1.0f, 0, 1, 5 + (uint64_t)round, N);
        int seen[K] = {0}, hits = 0;
        for (int step = 0; step < 400; step++) {
            memcpy(l, base, sizeof *l * N);
            int32_t t = nb_sampler_sample(s, l);
            int rank = -1;
            for (int r = 0; r < K; r++)
                if (ord[r] == &base[t]) rank = r;
            if (rank < 0) fail_msg("round %d: token %d is not among the %d best", round, t, K);
            hits += !seen[rank]++;
        }
        if (round > 0) assert_true(hits > K / 2); /* the tied best drawn alike */
        nb_sampler_free(s);
        /* greedy: the first index of the maximum */
        s = make(0, K, 1.0f, 0, 1, 1, N);
        memcpy(l, base, sizeof *l * N);
        assert_int_equal(nb_sampler_sample(s, l), (int32_t)(ord[0] - base));
        memcpy(l, base, sizeof *l * N);
        l[0] = NAN; /* a running comparison never leaves a NaN first element */
        assert_int_equal(nb_sampler_sample(s, l), 0);
        nb_sampler_free(s);
    }
    free(base);
    free(l);
    free(ord);
}

static void test_bad_params(void **state)
{
    struct nb_sampler_params p = nb_sampler_default_params();
    struct nb_sampler *s = NULL;
    p.temperature = -1;
    assert_int_equal(nb_sampler_init(&s, &p, 10), NB_ERR_INVALID_ARG);
    p = nb_sampler_default_params();
    p.repeat_penalty = 0;
    assert_int_equal(nb_sampler_init(&s, &p, 10), NB_ERR_INVALID_ARG);
    p = nb_sampler_default_params();
    assert_int_equal(nb_sampler_init(&s, &p, 0), NB_ERR_INVALID_ARG);
    assert_null(s);
    /* versioned: a size of 0 is refused, an older, shorter struct gets the defaults after
     * it (here: all but the temperature) */
    p.size = 0;
    assert_int_equal(nb_sampler_init(&s, &p, 10), NB_ERR_INVALID_ARG);
    p = nb_sampler_default_params();
    p.size = offsetof(struct nb_sampler_params, top_k);
    p.temperature = 0;
    p.repeat_penalty = 0; /* past size: not read (it would be refused) */
    assert_int_equal(nb_sampler_init(&s, &p, 10), NB_OK);
    nb_sampler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),      cmocka_unit_test(test_seeded_repeatable),
        cmocka_unit_test(test_distribution), cmocka_unit_test(test_filters),
        cmocka_unit_test(test_repeat_penalty), cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_presence_frequency), cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_top_k_select),
        cmocka_unit_test(test_large_vocab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
