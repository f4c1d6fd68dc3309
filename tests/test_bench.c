/* test_bench — passes really interleave (A B A B, not A A B B), and the statistics. */
#include "helpers/testutil.h"

#include <math.h>
#include <string.h>

#include "eval/bench.h"
#include "nibble_eval.h"

struct log {
    int order[64][3];
    int n;
};

static enum nb_status fake_build(int model, int test, int pass, void *user)
{
    struct log *l = user;
    l->order[l->n][0] = model;
    l->order[l->n][1] = test;
    l->order[l->n][2] = pass;
    l->n++;
    return NB_OK;
}

static void test_interleave(void **state)
{
    struct log l = {.n = 0};
    assert_int_equal(nb_bench_interleave(2, 2, 3, fake_build, &l), NB_OK);
    assert_int_equal(l.n, 12);
    /* pass 0: A pp, A tg, B pp, B tg; then pass 1 ... */
    for (int i = 0; i < 12; i++) {
        assert_int_equal(l.order[i][2], i / 4);
        assert_int_equal(l.order[i][0], (i / 2) % 2);
        assert_int_equal(l.order[i][1], i % 2);
    }
    /* consecutive runs of the same model never span a pass boundary */
    for (int i = 1; i < 12; i++)
        if (l.order[i][0] == l.order[i - 1][0]) assert_int_equal(l.order[i][2], l.order[i - 1][2]);
}

static enum nb_status failing(int model, int test, int pass, void *user)
{
    int *calls = user;
    (*calls)++;
    return model == 1 ? NB_ERR_INTERNAL : NB_OK;
}

static void test_interleave_stops_on_error(void **state)
{
    int calls = 0;
    assert_int_equal(nb_bench_interleave(3, 1, 4, failing, &calls), NB_ERR_INTERNAL);
    assert_int_equal(calls, 2);
}

static void test_stats(void **state)
{
    double x[5] = {10, 12, 11, 9, 13};
    struct nb_stats s = {.size = sizeof s};
    nb_stats_of(x, 5, &s);
    assert_true(fabs(s.mean - 11) < 1e-12);
    assert_true(fabs(s.median - 11) < 1e-12);
    assert_true(fabs(s.best - 13) < 1e-12);
    assert_true(fabs(s.worst - 9) < 1e-12);
    assert_true(fabs(s.stddev - sqrt(2.5)) < 1e-12);
    assert_true(fabs(s.spread_pct - 100.0 * 4 / 13) < 1e-9);
    double y[2] = {4, 2};
    nb_stats_of(y, 2, &s);
    assert_true(fabs(s.median - 3) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interleave),
        cmocka_unit_test(test_interleave_stops_on_error),
        cmocka_unit_test(test_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
