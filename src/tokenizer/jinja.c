/* tokenizer/jinja.c — the Jinja subset of jinja.h.
 *
 * Placeholder until the interpreter lands (issue 16): every template is refused as
 * unsupported, so callers fall back to the built-in template families.
 */
#include "core/error.h"
#include "tokenizer/jinja.h"

enum nb_status nb_jinja_parse(const char *src, size_t len, struct nb_jinja **out)
{
    (void)src;
    (void)len;
    *out = NULL;
    return nb_set_error(NB_ERR_UNSUPPORTED, "Jinja chat templates are not interpreted yet");
}

void nb_jinja_free(struct nb_jinja *t) { (void)t; }

enum nb_status nb_jinja_render(const struct nb_jinja *t, const cJSON *ctx, char **out,
                               size_t *out_len, uint8_t **marks)
{
    (void)t;
    (void)ctx;
    *out = NULL;
    *out_len = 0;
    if (marks) *marks = NULL;
    return nb_set_error(NB_ERR_UNSUPPORTED, "Jinja chat templates are not interpreted yet");
}
