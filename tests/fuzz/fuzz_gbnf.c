/* Fuzz target: a GBNF grammar compiled (runtime/gbnf.c) and its recogniser walked over
 * bytes. Input: the grammar's text, a NUL, then bytes fed one at a time (those refused are
 * skipped). Checked: a grammar is compiled or refused with a message and nothing made;
 * the fewest bytes that complete the output are 0 exactly when it is complete; and the
 * token mask over a small vocabulary equals the token-by-token checks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/constrain.h"
#include "runtime/gbnf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const k_toks[] = {"a", "b", "(", ")", "\"", " ", "ab", "{\"", "1", "\xc3",
                                     "\xa9", "\xc3\xa9", "x", "</s>"};
#define N_TOK ((int)(sizeof k_toks / sizeof k_toks[0]))

static void check_mask(const struct nb_gbnf *g, const struct nb_vocab_bytes *v,
                       const struct nb_gbstate *c)
{
    float logits[N_TOK];
    for (int i = 0; i < N_TOK; i++) logits[i] = 0;
    nb_gb_mask(g, v, c, 0, logits);
    for (int i = 0; i < N_TOK; i++)
        if ((isinf(logits[i]) == 0) != (nb_gb_allows(g, v, c, i, 0) != 0)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    struct nb_gbnf *g = NULL;
    if (nb_gbnf_compile((const char *)data, n, &g) != NB_OK) {
        if (g || !nb_last_error()[0]) abort(); /* refused: nothing made, and a message */
        return 0;
    }
    static struct nb_vocab_bytes v;
    static uint32_t off[N_TOK + 1];
    static char bytes[64];
    static uint8_t kind[N_TOK];
    if (!v.n_vocab) {
        uint32_t at = 0;
        for (int i = 0; i < N_TOK; i++) {
            off[i] = at;
            memcpy(bytes + at, k_toks[i], strlen(k_toks[i]));
            at += (uint32_t)strlen(k_toks[i]);
            kind[i] = i == N_TOK - 1 ? NB_VTOK_EOG : NB_VTOK_TEXT;
        }
        off[N_TOK] = at;
        v = (struct nb_vocab_bytes){N_TOK, off, bytes, kind, NULL, NULL};
        if (nb_vocab_bytes_classify(&v) != NB_OK) abort();
    }
    struct nb_gbstate *c = malloc(sizeof *c), *t = malloc(sizeof *t);
    if (!c || !t) abort();
    nb_gb_start(g, c);
    size_t fed = 0;
    for (size_t i = n + 1; i <= size; i++) {
        if (c->n && (nb_gb_cost(g, c) == 0) != nb_gb_complete(g, c)) abort();
        if (fed < 8) check_mask(g, &v, c);
        if (i == size) break;
        memcpy(t, c, sizeof *t);
        if (nb_gb_feed(g, t, (const char *)data + i, 1)) memcpy(c, t, sizeof *c), fed++;
    }
    free(c);
    free(t);
    nb_gbnf_free(g);
    return 0;
}
