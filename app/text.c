/* app/text.c — malloc'd results over nibble.h's caller-buffer calls (text.h). */
#include "app/text.h"

#include "app/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double app_time_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int app_read_all(const char *cmd, const char *what, const char *path, size_t max, char **buf,
                 size_t *n)
{
    int in = !strcmp(path, "-");
    const char *name = in ? "standard input" : path;
    FILE *f = in ? stdin : fopen(path, "rb");
    size_t len = 0, cap = 4096;
    char *b = NULL;
    *buf = NULL;
    if (!f) {
        fprintf(stderr, "nibble %s: %s: %s: %s\n", cmd, what, name, strerror(errno));
        return 0;
    }
    for (;;) {
        if (len + 1 >= cap || !b) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                fprintf(stderr, "nibble %s: %s: %s: out of memory\n", cmd, what, name);
                goto fail;
            }
            b = nb;
        }
        size_t got = fread(b + len, 1, cap - len - 1, f);
        len += got;
        if (len > max) {
            fprintf(stderr, "nibble %s: %s: %s is larger than %zu bytes\n", cmd, what, name, max);
            goto fail;
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        fprintf(stderr, "nibble %s: %s: %s: cannot read: %s\n", cmd, what, name, strerror(errno));
        goto fail;
    }
    if (!in) fclose(f);
    b[len] = '\0';
    *buf = b;
    *n = len;
    return 1;
fail:
    if (!in) fclose(f);
    free(b);
    return 0;
}

enum nb_status app_tokenize(const struct nb_tokenizer *tok, const char *text, size_t len,
                            int add_special, int parse_special, int32_t **ids, int *n_ids)
{
    /* a guess that fits most texts (about one id per 3 bytes, plus BOS/EOS), then the
     * size the library says it needs */
    int n = (int)(len < (1u << 28) ? len / 3 + 8 : 1u << 26), need = 0;
    *ids = NULL;
    *n_ids = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *b = malloc(sizeof *b * (size_t)(n ? n : 1));
        if (!b) return NB_ERR_NOMEM;
        enum nb_status st = nb_tokenize_text(tok, text, len, add_special, parse_special, b, n,
                                             &need);
        if (st == NB_OK) {
            *ids = b;
            *n_ids = need;
            return NB_OK;
        }
        free(b);
        if (st != NB_ERR_RANGE) return st;
        n = need;
    }
    return NB_ERR_INTERNAL;
}

/* Call fill(buf, size, &len) with a buffer that grows to the length it reports. */
#define GROW_CALL(call_with_buf_size_len)                                                  \
    do {                                                                                   \
        size_t size = 256, len = 0;                                                        \
        for (int attempt = 0; attempt < 2; attempt++) {                                    \
            char *buf = malloc(size);                                                      \
            if (!buf) return NB_ERR_NOMEM;                                                 \
            enum nb_status st = call_with_buf_size_len;                                    \
            if (st == NB_OK) {                                                             \
                *out = buf;                                                                \
                if (out_len) *out_len = len;                                               \
                return NB_OK;                                                              \
            }                                                                              \
            free(buf);                                                                     \
            if (st != NB_ERR_RANGE) return st;                                             \
            size = len + 1;                                                                \
        }                                                                                  \
        return NB_ERR_INTERNAL;                                                            \
    } while (0)

enum nb_status app_detokenize(const struct nb_tokenizer *tok, const int32_t *ids, int n_ids,
                              int special, char **text, size_t *text_len)
{
    char **out = text;
    size_t *out_len = text_len;
    GROW_CALL(nb_detokenize_text(tok, ids, n_ids, special, buf, size, &len));
}

enum nb_status app_chat_apply(const struct nb_tokenizer *tok, const char *name,
                              const struct nb_chat_msg *msgs, int n_msgs, int add_assistant,
                              char **text)
{
    char **out = text;
    size_t *out_len = NULL;
    GROW_CALL(nb_chat_apply(tok, name, msgs, n_msgs, add_assistant, buf, size, &len));
}

const char *app_grammar_flag(const struct app_grammar_opts *g)
{
    return g->schema ? "--json-schema" : g->gbnf ? "--grammar" : g->gbnf_file ? "--grammar-file" : NULL;
}

int app_grammar_open(const char *cmd, const struct app_grammar_opts *g,
                     const struct nb_tokenizer *tok, int n_vocab, struct nb_grammar **out)
{
    *out = NULL;
    const char *flag = app_grammar_flag(g);
    if (!flag) return 1;
    if (!!g->schema + !!g->gbnf + !!g->gbnf_file > 1) {
        fprintf(stderr, "nibble %s: give one of --json-schema, --grammar and --grammar-file\n", cmd);
        return 0;
    }
    if (!tok) {
        fprintf(stderr, "nibble %s: %s needs the model's tokenizer\n", cmd, flag);
        return 0;
    }
    const char *text = g->schema ? g->schema : g->gbnf, *p = text, *file = g->gbnf_file;
    char *buf = NULL;
    size_t len = text ? strlen(text) : 0;
    while (g->schema && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    if (g->schema && *p != '{') file = g->schema; /* not a JSON object: the file that holds one */
    if (file) {
        if (!app_read_all(cmd, flag, file, 16u << 20, &buf, &len)) return 0;
        text = buf;
    }
    enum nb_status st = g->schema ? nb_grammar_from_json_schema(out, tok, n_vocab, text, len)
                                  : nb_grammar_from_gbnf(out, tok, n_vocab, text, len);
    if (st) fprintf(stderr, "nibble %s: %s%s%s: %s\n", cmd, flag, file ? " " : "",
                    file ? file : "", nb_last_error());
    free(buf);
    return st == NB_OK;
}
