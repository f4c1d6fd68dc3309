/* server/embed.c — POST /v1/embeddings (as llama-server's --embedding): the request's
 * inputs (a string, strings, token ids, arrays of them) tokenized as completions are (BOS
 * as the tokenizer adds it), each run by the engine in its slot's sequence (nb_embed, one
 * input a step), and the answer: OpenAI's list of unit vectors, as floats or base64. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/server.h"

/* ---------------------------------------------------------------- the request */

/* ids[0..n) as the next input: into r->prompt, its end into r->emb_off. */
static int add_input(struct srv_request *r, const int32_t *ids, int n, struct srv_error *e)
{
    int at = r->emb_off[r->n_inputs];
    int32_t *p = realloc(r->prompt, sizeof *p * (size_t)(at + n));
    if (!p) return srv_fail(e, 500, NULL, NULL, "out of memory");
    r->prompt = p;
    memcpy(p + at, ids, sizeof *p * (size_t)n);
    r->n_prompt = at + n;
    r->emb_off[++r->n_inputs] = at + n;
    return 0;
}

/* Input i: a string (tokenized) or an array of token ids; empty or past the context: 400. */
static int parse_input(const struct srv_model *m, const cJSON *in, int i, struct srv_request *r,
                       struct srv_error *e)
{
    int32_t *ids = NULL;
    int n = 0, rc = 0;
    if (cJSON_IsString(in)) {
        size_t len = strlen(in->valuestring);
        if (!len) return srv_fail(e, 400, "input", "invalid_value", "input %d is an empty string", i);
        enum nb_status ts = nb_tokenize_max(m->tok, in->valuestring, len, 1, 1, m->n_ctx, &ids, &n);
        if (ts == NB_ERR_RANGE)
            return srv_fail(e, 400, "input", "context_length_exceeded",
                            "input %d is more than %d tokens: this server's context is %d tokens",
                            i, m->n_ctx, m->n_ctx);
        if (ts != NB_OK)
            return srv_fail(e, 400, "input", "invalid_value", "input %d: %s", i, nb_last_error());
    } else {
        n = cJSON_GetArraySize(in);
        if (n > m->n_ctx) n = m->n_ctx + 1; /* refused below: the count is enough */
        if (n && !(ids = malloc(sizeof *ids * (size_t)n)))
            return srv_fail(e, 500, NULL, NULL, "out of memory");
        int k = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, in)
        {
            if (k == n) break;
            if (!cJSON_IsNumber(it) || floor(it->valuedouble) != it->valuedouble ||
                it->valuedouble < 0 || it->valuedouble >= m->n_vocab) {
                free(ids);
                return srv_fail(e, 400, "input", "invalid_value",
                                "input %d: token ids must be integers in [0, %d)", i, m->n_vocab);
            }
            ids[k++] = (int32_t)it->valuedouble;
        }
    }
    if (n == 0)
        rc = srv_fail(e, 400, "input", "invalid_value", "input %d is empty", i);
    else if (n > m->n_ctx)
        rc = srv_fail(e, 400, "input", "context_length_exceeded",
                      "input %d is %s%d tokens: this server's context is %d tokens", i,
                      cJSON_IsString(in) ? "" : "more than ", cJSON_IsString(in) ? n : m->n_ctx,
                      m->n_ctx);
    else
        rc = add_input(r, ids, n, e);
    free(ids);
    return rc;
}

/* 'input': a string, an array of strings, of token ids, or of arrays of token ids. */
static int parse_inputs(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                        struct srv_error *e)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
    if (!in || cJSON_IsNull(in))
        return srv_fail(e, 400, "input", "missing_required_parameter", "'input' is required");
    if (!cJSON_IsString(in) && !cJSON_IsArray(in))
        return srv_fail(e, 400, "input", "invalid_type", "'input' must be a string, an array of "
                        "strings, an array of token ids or an array of such arrays");
    int one = cJSON_IsString(in) || cJSON_IsNumber(cJSON_GetArrayItem(in, 0));
    int n = one ? 1 : cJSON_GetArraySize(in);
    if (n == 0) return srv_fail(e, 400, "input", "invalid_value", "'input' is an empty array");
    if (n > SRV_MAX_EMBED_INPUTS)
        return srv_fail(e, 400, "input", "invalid_value", "'input' has %d inputs: at most %d "
                        "are taken in one request", n, SRV_MAX_EMBED_INPUTS);
    if (!(r->emb_off = calloc((size_t)n + 1, sizeof *r->emb_off)))
        return srv_fail(e, 500, NULL, NULL, "out of memory");
    if (one) return parse_input(m, in, 0, r, e);
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, in)
    {
        if (!cJSON_IsString(it) && !cJSON_IsArray(it))
            return srv_fail(e, 400, "input", "invalid_type", "input %d must be a string or an "
                            "array of token ids", i);
        if (parse_input(m, it, i++, r, e)) return -1;
    }
    return 0;
}

/* encoding_format, dimensions (only the model's own: no truncation) */
static int parse_format(const struct srv_model *m, const cJSON *o, struct srv_request *r,
                        struct srv_error *e)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "encoding_format");
    if (f && !cJSON_IsNull(f)) {
        if (!cJSON_IsString(f) ||
            (strcmp(f->valuestring, "float") && strcmp(f->valuestring, "base64")))
            return srv_fail(e, 400, "encoding_format", "invalid_value",
                            "'encoding_format' must be \"float\" or \"base64\"");
        r->base64 = !strcmp(f->valuestring, "base64");
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "dimensions");
    if (d && !cJSON_IsNull(d) && (!cJSON_IsNumber(d) || d->valuedouble != m->n_embd))
        return srv_fail(e, 400, "dimensions", "invalid_value",
                        "'dimensions': this model's embeddings have %d (no other is made)",
                        m->n_embd);
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (mo && !cJSON_IsNull(mo) && !cJSON_IsString(mo))
        return srv_fail(e, 400, "model", "invalid_type", "'model' must be a string");
    return 0;
}

int srv_parse_embed(const struct srv_model *m, const char *body, size_t len, struct srv_request *r,
                    struct srv_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = SRV_EMBED;
    r->sp = m->sp; /* the job's sampler is made, never used */
    r->max_tokens = -1;
    cJSON *o = srv_parse_body(body, len, e);
    if (!o) return -1;
    int rc = parse_format(m, o, r, e) || parse_inputs(m, o, r, e) ? -1 : 0;
    cJSON_Delete(o);
    if (rc) srv_request_free(r);
    return rc;
}

/* ---------------------------------------------------------------- the engine's part */

void srv_embed_step(struct nb_server *s, struct srv_job *j)
{
    const struct srv_request *r = &j->req;
    if (!j->emb && !(j->emb = malloc(sizeof *j->emb * (size_t)r->n_inputs * (size_t)s->n_embd))) {
        srv_fail(&j->err, 500, NULL, NULL, "out of memory");
        return;
    }
    int i = j->emb_done, a = r->emb_off[i];
    enum nb_status st = nb_embed(s->ctx, j->slot, r->prompt + a, r->emb_off[i + 1] - a,
                                 s->pooling, j->emb + (size_t)i * (size_t)s->n_embd);
    if (st == NB_ERR_RANGE) /* a KV pool short of blocks now (--kv-tokens) */
        srv_fail(&j->err, 503, NULL, "server_busy", "embeddings: %s; retry later", nb_last_error());
    else if (st)
        srv_fail(&j->err, 500, NULL, NULL, "embeddings: %s", nb_last_error());
    else
        j->emb_done++;
}

/* ---------------------------------------------------------------- the answer */

/* n floats as base64 of their little-endian bytes (OpenAI's encoding_format "base64"). */
static char *base64_f32(const float *x, int n)
{
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t nb = 4 * (size_t)n, o = 0;
    unsigned char *b = malloc(nb ? nb : 1);
    char *out = malloc((nb + 2) / 3 * 4 + 1);
    if (!b || !out) {
        free(b);
        free(out);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int q = 0; q < 4; q++) b[4 * i + q] = (unsigned char)(u >> (8 * q));
    }
    for (size_t i = 0; i < nb; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < nb ? b[i + 2] : 0);
        out[o++] = k[v >> 18 & 63];
        out[o++] = k[v >> 12 & 63];
        out[o++] = i + 1 < nb ? k[v >> 6 & 63] : '=';
        out[o++] = i + 2 < nb ? k[v & 63] : '=';
    }
    out[o] = '\0';
    free(b);
    return out;
}

/* n floats as a JSON array, each in 9 significant digits: read back as a float it is the
 * same float (cJSON's numbers are doubles, 17 digits, or 15 only nearly equal). */
static char *floats_json(const float *x, int n)
{
    size_t cap = 18 * (size_t)n + 3, o = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
    t[o++] = '[';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(t + o, cap - o, "%s%.9g", i ? "," : "", isfinite(x[i]) ? x[i] : 0.0f);
    snprintf(t + o, cap - o, "]");
    return t;
}

char *srv_json_embed(const struct nb_server *s, const struct srv_job *j)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    int ok = o && data;
    for (int i = 0; ok && i < j->emb_done; i++) {
        const float *v = j->emb + (size_t)i * (size_t)s->n_embd;
        cJSON *d = cJSON_CreateObject(), *vec = NULL;
        if (j->req.base64) {
            char *b = base64_f32(v, s->n_embd);
            vec = b ? cJSON_CreateString(b) : NULL;
            free(b);
        } else {
            char *t = floats_json(v, s->n_embd);
            vec = t ? cJSON_CreateRaw(t) : NULL;
            free(t);
        }
        ok = d && vec && cJSON_AddItemToArray(data, d);
        if (!ok) {
            cJSON_Delete(d);
            cJSON_Delete(vec);
            break;
        }
        cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", i);
        cJSON_AddItemToObject(d, "embedding", vec);
    }
    cJSON_AddStringToObject(o, "model", s->model_name);
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", j->req.n_prompt);
    cJSON_AddNumberToObject(u, "total_tokens", j->req.n_prompt);
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return text;
}
