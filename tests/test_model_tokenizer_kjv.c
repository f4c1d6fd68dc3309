/* tests/test_model_tokenizer_kjv.c — kjv-7m's tokenizer-golden.json (ids and pieces the
 * SentencePiece library gives) from all three sources of the same vocabulary: the GGUF
 * metadata, llama2.c's kjv-7m.tok.bin and the Hugging Face hf/tokenizer.model. Also the
 * round trip back to the text, and the streaming detokenizer one id at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "formats/gguf.h"
#include "helpers/testutil.h"
#include "tokenizer/tokenizer.h"

static void check_golden(struct nb_tokenizer *tok, const char *src)
{
    const char *gp = tu_model_path("kjv-7m/tokenizer-golden.json");
    assert_non_null(gp);
    cJSON *g = tu_load_json(gp);
    int n_cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(g, "cases")->child; c; c = c->next, n_cases++) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        int n_want, n_got;
        int32_t *want = tu_json_ids(cJSON_GetObjectItem(c, "ids"), &n_want), *got = NULL;
        assert_int_equal(nb_tokenize(tok, text, strlen(text), 1, 1, &got, &n_got), NB_OK);
        if (n_got != n_want || memcmp(got, want, (size_t)n_got * sizeof *got)) {
            fprintf(stderr, "%s: \"%s\":\n  want", src, text);
            for (int i = 0; i < n_want; i++)
                fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n  got ");
            for (int i = 0; i < n_got; i++)
                fprintf(stderr, " %d", got[i]);
            fprintf(stderr, "\n");
            fail();
        }
        int i = 0;
        for (const cJSON *p = cJSON_GetObjectItem(c, "pieces")->child; p; p = p->next, i++)
            assert_string_equal(nb_token_piece(tok, got[i]), p->valuestring);
        /* Round trip, whole and streamed one id at a time. */
        char *back = NULL;
        size_t blen;
        assert_int_equal(nb_detokenize(tok, got, n_got, 0, &back, &blen), NB_OK);
        assert_string_equal(back, text);
        free(back);
        struct nb_detok d;
        nb_detok_init(&d, tok, 0);
        char acc[1024] = "";
        size_t alen = 0;
        for (int k = 0; k <= n_got; k++) {
            const char *s;
            size_t sl;
            assert_int_equal(k < n_got ? nb_detok_feed(&d, got[k], &s, &sl)
                                       : nb_detok_flush(&d, &s, &sl),
                             NB_OK);
            assert_true(alen + sl < sizeof acc);
            memcpy(acc + alen, s, sl);
            alen += sl;
            acc[alen] = '\0';
        }
        nb_detok_free(&d);
        assert_string_equal(acc, text);
        free(want);
        free(got);
    }
    assert_true(n_cases >= 10);
    assert_int_equal(nb_tokenizer_bos(tok), 1);
    assert_int_equal(nb_tokenizer_eos(tok), 2);
    assert_true(nb_tokenizer_is_eog(tok, 2));
    assert_false(nb_tokenizer_is_eog(tok, 1));
    assert_true(nb_tokenizer_adds_bos(tok));
    assert_int_equal(nb_tokenizer_n_vocab(tok), 4096);
    cJSON_Delete(g);
}

static void test_gguf(void **state)
{
    (void)state;
    const char *p = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    if (!p) skip();
    struct nb_gguf *g = NULL;
    struct nb_tokenizer *tok = NULL;
    assert_int_equal(nb_gguf_open(&g, p), NB_OK);
    if (nb_tokenizer_load_gguf(&tok, g) != NB_OK) fail_msg("%s", nb_last_error());
    nb_gguf_free(g); /* the tokenizer keeps copies */
    check_golden(tok, "gguf");
    nb_tokenizer_free(tok);
}

static void test_llama2c(void **state)
{
    (void)state;
    const char *p = tu_model_path("kjv-7m/kjv-7m.tok.bin");
    if (!p) skip();
    struct nb_tokenizer *tok = NULL;
    if (nb_tokenizer_load_llama2c(&tok, p, 4096) != NB_OK) fail_msg("%s", nb_last_error());
    check_golden(tok, "llama2c");
    nb_tokenizer_free(tok);
    /* Found from the checkpoint's path too. */
    const char *m = tu_model_path("kjv-7m/kjv-7m.bin");
    assert_int_equal(nb_tokenizer_load(&tok, m), NB_OK);
    check_golden(tok, "llama2c (for model)");
    nb_tokenizer_free(tok);
    /* The checkpoint says 4096; a larger count is an error naming the file. */
    p = tu_model_path("kjv-7m/kjv-7m.tok.bin");
    assert_int_equal(nb_tokenizer_load_llama2c(&tok, p, 5000), NB_ERR_FORMAT);
    assert_non_null(strstr(nb_last_error(), "kjv-7m.tok.bin"));
}

static void test_hf_tokenizer_model(void **state)
{
    (void)state;
    const char *p = tu_model_path("kjv-7m/hf");
    if (!p) skip();
    struct nb_tokenizer *tok = NULL;
    if (nb_tokenizer_load_hf(&tok, p) != NB_OK) fail_msg("%s", nb_last_error());
    check_golden(tok, "hf/tokenizer.model");
    nb_tokenizer_free(tok);
    const char *q = tu_model_path("kjv-7m/tok.model");
    assert_int_equal(nb_tokenizer_load(&tok, q), NB_OK);
    check_golden(tok, "tok.model");
    nb_tokenizer_free(tok);
}

/* The prompts of reference.json tokenize to the ids llama.cpp and PyTorch were given. */
static void test_reference_prompts(void **state)
{
    (void)state;
    const char *rp = tu_model_path("kjv-7m/reference.json");
    if (!rp) skip();
    cJSON *r = tu_load_json(rp);
    const char *mp = tu_model_path("kjv-7m/kjv-7m-f32.gguf");
    struct nb_tokenizer *tok = NULL;
    assert_int_equal(nb_tokenizer_load(&tok, mp), NB_OK);
    const cJSON *cases = cJSON_GetObjectItem(r, "cases");
    int checked = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) {
        const cJSON *text = cJSON_GetObjectItem(c, "text");
        const cJSON *ids = cJSON_GetObjectItem(c, "prompt");
        if (!cJSON_IsString(text) || !cJSON_IsArray(ids)) continue;
        int n_want, n_got;
        int32_t *want = tu_json_ids(ids, &n_want), *got = NULL;
        assert_int_equal(
            nb_tokenize(tok, text->valuestring, strlen(text->valuestring), 1, 1, &got, &n_got),
            NB_OK);
        assert_int_equal(n_got, n_want);
        assert_memory_equal(got, want, (size_t)n_got * sizeof *got);
        free(want);
        free(got);
        checked++;
    }
    assert_true(checked >= 8);
    nb_tokenizer_free(tok);
    cJSON_Delete(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf),
        cmocka_unit_test(test_llama2c),
        cmocka_unit_test(test_hf_tokenizer_model),
        cmocka_unit_test(test_reference_prompts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
