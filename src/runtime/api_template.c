/* runtime/api_template.c — nibble.h's nb_chat_template_render_json: a chat template's
 * Jinja source rendered over a JSON context (tokenizer/jinja.h), with the tokenizer's
 * bos/eos texts and add_generation_prompt filled in where the context leaves them out. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "runtime/api.h"
#include "tokenizer/jinja.h"
#include "tokenizer/tokenizer.h"

/* The text of a special token of the tokenizer ("" when it has none). */
static const char *token_text(const struct nb_tokenizer *tok, int id)
{
    return tok && id >= 0 ? nb_token_piece(tok, id) : "";
}

enum nb_status nb_chat_template_render_json(const struct nb_tokenizer *tok, const char *source,
                                            const char *context_json, char *buf, size_t size,
                                            size_t *len)
{
    enum nb_status st = NB_OK;
    struct nb_jinja *t = NULL;
    cJSON *ctx = NULL;
    char *text = NULL;
    size_t n = 0;
    if (!source) {
        if (!tok)
            return nb_set_error(NB_ERR_INVALID_ARG,
                                "chat template: give the template's source or a tokenizer");
        source = nb_tokenizer_chat_template(tok);
        if (!source)
            return nb_set_error(NB_ERR_NOT_FOUND, "the tokenizer (%s) has no chat template",
                                nb_tokenizer_desc(tok));
    }
    ctx = context_json ? cJSON_Parse(context_json) : cJSON_CreateObject();
    if (!ctx || !cJSON_IsObject(ctx)) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "chat template: the context is not a JSON object%s",
                          ctx ? "" : " (it does not parse)");
        goto fail;
    }
    const char *bos = token_text(tok, tok ? nb_tokenizer_bos(tok) : -1);
    const char *eos = token_text(tok, tok ? nb_tokenizer_eos(tok) : -1);
    if ((!cJSON_GetObjectItemCaseSensitive(ctx, "bos_token") &&
         !cJSON_AddStringToObject(ctx, "bos_token", bos)) ||
        (!cJSON_GetObjectItemCaseSensitive(ctx, "eos_token") &&
         !cJSON_AddStringToObject(ctx, "eos_token", eos)) ||
        (!cJSON_GetObjectItemCaseSensitive(ctx, "add_generation_prompt") &&
         !cJSON_AddTrueToObject(ctx, "add_generation_prompt"))) {
        st = nb_set_error(NB_ERR_NOMEM, "chat template: out of memory");
        goto fail;
    }
    if ((st = nb_jinja_parse(source, strlen(source), &t))) goto fail;
    if ((st = nb_jinja_render(t, ctx, &text, &n, NULL))) goto fail;
    if (len) *len = n;
    if (n + 1 > size || !buf) {
        st = nb_set_error(NB_ERR_RANGE,
                          "chat template: %zu bytes and a NUL do not fit the %zu given", n, size);
        goto fail;
    }
    memcpy(buf, text, n + 1);
fail:
    free(text);
    nb_jinja_free(t);
    cJSON_Delete(ctx);
    return st;
}
