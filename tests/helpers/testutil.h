/* tests/helpers/testutil.h — shared helpers for the cmocka tests. */
#ifndef NB_TESTUTIL_H
#define NB_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

/* $NIBBLE_MODELS_DIR/<rel> if that exists, else NULL (the test should skip()). */
const char *tu_model_path(const char *rel);
/* Parse a JSON file; fails the test on error. */
cJSON *tu_load_json(const char *path);
/* Copy a JSON array of numbers into a new malloc'd array; *n gets the count. */
int32_t *tu_json_ids(const cJSON *arr, int *n);
float *tu_json_floats(const cJSON *arr, int *n);
/* max |a - b| over n values. */
double tu_max_abs_diff(const float *a, const float *b, int n);
/* Collects generated ids (an nb_token_cb). */
struct tu_collect {
    int32_t ids[64];
    int n;
};
int tu_collect_cb(int32_t tok, void *user);

/* A fresh temporary folder for a test group: tu_dir is set by tu_dir_setup and removed
 * with everything in it by tu_dir_teardown (cmocka_run_group_tests(tests, tu_dir_setup,
 * tu_dir_teardown)). */
extern char *tu_dir;
int tu_dir_setup(void **state);
int tu_dir_teardown(void **state);

/* A seeded random stream for test data (splitmix64; normal values by Box-Muller):
 * the same numbers on every machine for a given starting state. */
uint64_t tu_rand_u64(uint64_t *state);
double tu_rand_unit(uint64_t *state); /* [0, 1) */
float tu_rand_gauss(uint64_t *state); /* N(0, 1) */

/* A model against golden outputs ({"cases": [{prompt, greedy, last_logits, mid_logits,
 * mid_logits_pos}]}): one prefill per prompt gives the logits at mid_logits_pos and at
 * the last position (each within `tol` of the golden ones), then the greedy ids must
 * match exactly; n_threads threads, prefill chunks of n_batch, a context of n_ctx.
 * Fails the test naming `name`; returns the largest logit difference seen. */
double tu_check_golden(const char *model_path, const cJSON *golden, const char *name,
                       int n_threads, int n_batch, int n_ctx, double tol);

/* NIBBLE_ISA, read as the CLI reads it (app/env.c): the kernel level capped before the
 * first kernel runs, so ctest can run a model test again at a lower level (the *_avx2
 * tests in CMakeLists.txt). Unset or empty: nothing. An unknown name: 1 (after a message
 * on stderr); else 0, and the level the table got (nb_isa()) is printed on stderr. */
int tu_isa_from_env(void);

/* Copy a file (make it writable); flip one byte `from_end` bytes before its end. */
void tu_copy_file(const char *from, const char *to);
void tu_flip_byte(const char *path, long from_end);

/* How many entries of `dir` end in `suffix`. */
int tu_count_files(const char *dir, const char *suffix);

/* A fresh empty directory under $TMPDIR (removed by tu_rmtree). */
char *tu_mkdtemp(void);
void tu_rmtree(const char *path);

/* The internal calls that take an opened source (formats/source.h), from a path: the
 * source is opened, used and dropped. Each returns the call's status. */
struct nb_quantize_opts;
struct nb_quantize_result;
struct nb_cache_entry;
struct nb_tokenizer;
int tu_quantize_file(const char *src, const struct nb_quantize_opts *o, const char *out,
                     struct nb_quantize_result *r);
int tu_cache_get(const char *src, const struct nb_quantize_opts *o, const char *dir,
                 struct nb_cache_entry *e);
int tu_source_hash(const char *src, uint64_t *h);
int tu_tokenizer_load_source(struct nb_tokenizer **t, const char *src);
/* nb_model_load_source on a verified cache entry's nib (taken over) */
struct nb_model;
struct nb_nib;
int tu_model_load_nib(struct nb_model **m, struct nb_nib *nib);

#endif
