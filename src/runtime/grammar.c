/* runtime/grammar.c — nibble.h's grammar: a JSON Schema compiled (runtime/schema.c) into
 * the one-element grammar "one JSON object that keeps to it", or a GBNF text compiled
 * (runtime/gbnf.c), for a vocabulary, which a sampler's constraint stage then keeps its
 * draws to (runtime/sampler.c). */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "nibble.h"
#include "runtime/constrain.h"
#include "runtime/gbnf.h"

void nb_grammar_free(struct nb_grammar *g)
{
    if (!g) return;
    nb_gram_free(&g->gram); /* before the schema it borrows */
    nb_schema_free(g->schema);
    nb_gbnf_free(g->gbnf);
    nb_vocab_bytes_free(&g->vb);
    free(g);
}

enum nb_status nb_grammar_from_json_schema(struct nb_grammar **out, const struct nb_tokenizer *tok,
                                           int n_vocab, const char *schema, size_t len)
{
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "json schema: out is NULL");
    *out = NULL;
    if (!tok || n_vocab <= 0 || !schema)
        return nb_set_error(NB_ERR_INVALID_ARG, "json schema: no tokenizer, vocabulary or text");
    const char *end = NULL;
    cJSON *js = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
    if (!js) {
        size_t at = end && end >= schema ? (size_t)(end - schema) : 0;
        return nb_set_error(NB_ERR_FORMAT, "json schema: not valid JSON (at byte %zu of %zu)",
                            at, len);
    }
    enum nb_status st = NB_OK;
    struct nb_grammar *g = calloc(1, sizeof *g);
    if (!g) {
        st = nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
        goto done;
    }
    if (!cJSON_IsObject(js)) {
        st = nb_set_error(NB_ERR_UNSUPPORTED, "json schema: a schema is a JSON object, not %s",
                          cJSON_IsBool(js) ? "true/false" : "this value");
        goto done;
    }
    /* refuses a root that allows no object: the output is one JSON object */
    if ((st = nb_schema_compile(js, &g->schema))) goto done;
    const struct nb_schema *one = g->schema;
    if (nb_gram_schema(&g->gram, &one, 1)) {
        st = nb_set_error(NB_ERR_NOMEM, "json schema: out of memory");
        goto done;
    }
    if ((st = nb_vocab_bytes_init(&g->vb, tok, n_vocab))) goto done;
done:
    cJSON_Delete(js);
    if (st) {
        nb_grammar_free(g);
        return st;
    }
    *out = g;
    return NB_OK;
}

enum nb_status nb_grammar_from_gbnf(struct nb_grammar **out, const struct nb_tokenizer *tok,
                                    int n_vocab, const char *text, size_t len)
{
    if (!out) return nb_set_error(NB_ERR_INVALID_ARG, "grammar: out is NULL");
    *out = NULL;
    if (!tok || n_vocab <= 0 || !text)
        return nb_set_error(NB_ERR_INVALID_ARG, "grammar: no tokenizer, vocabulary or text");
    struct nb_grammar *g = calloc(1, sizeof *g);
    if (!g) return nb_set_error(NB_ERR_NOMEM, "grammar: out of memory");
    enum nb_status st = nb_gbnf_compile(text, len, &g->gbnf);
    if (!st) st = nb_vocab_bytes_init(&g->vb, tok, n_vocab);
    if (st) {
        nb_grammar_free(g);
        return st;
    }
    *out = g;
    return NB_OK;
}
