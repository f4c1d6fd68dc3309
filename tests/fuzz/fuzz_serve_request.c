/* tests/fuzz/fuzz_serve_request.c — libFuzzer entry: arbitrary bytes as the body of a
 * nibble serve request (srv_parse_request), read as a completion and as a chat, with a
 * small SentencePiece vocabulary built in memory (<unk>, <s>, </s>, the 256 byte tokens
 * and a few words), so the parser's checks, the chat renderer's marks and the marked
 * tokenization all run; with tools and response_format, their checks and the tool
 * renderers too. A refused body must come with a 4xx/5xx and a message, and its error
 * object must print; an accepted one must hold ids of the vocabulary. An accepted body
 * with a constraint (tool_choice required, json_object) then has the body's bytes fed to
 * it as if generated, and the token mask computed where they stop; and the bytes are
 * parsed as a model's answer for tool calls in both formats. A "grammar" (GBNF) is walked
 * the same way. The body is also read as an embeddings request (srv_parse_embed): its
 * inputs must be ids of the vocabulary, each 1..n_ctx long. Seeds:
 * tests/fuzz/corpus/serve_request/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nb_tokenizer *g_tok;
static struct nb_vocab_bytes g_vb;
static float *g_logits;

/* A llama2.c tokenizer.bin in memory: max length, then score, length, bytes per token. */
static struct nb_tokenizer *make_tokenizer(void)
{
    static const char *const words[] = {" the", " and", " God", "In", " beginning", "<|im_start|>"};
    size_t cap = 64 * 1024, n = 4;
    uint8_t *b = calloc(1, cap);
    struct nb_tokenizer *t = NULL;
    if (!b) return NULL;
    int32_t max_len = 16;
    memcpy(b, &max_len, 4);
    char piece[32];
    for (int id = 0; id < 3 + 256 + 6; id++) {
        if (id == 0)
            snprintf(piece, sizeof piece, "<unk>");
        else if (id == 1)
            snprintf(piece, sizeof piece, "\n<s>\n");
        else if (id == 2)
            snprintf(piece, sizeof piece, "\n</s>\n");
        else if (id < 259)
            snprintf(piece, sizeof piece, "<0x%02X>", id - 3);
        else
            snprintf(piece, sizeof piece, "%s", words[id - 259]);
        float score = id < 259 ? 0.0f : -(float)id;
        int32_t len = (int32_t)strlen(piece);
        memcpy(b + n, &score, 4);
        memcpy(b + n + 4, &len, 4);
        memcpy(b + n + 8, piece, (size_t)len);
        n += 8 + (size_t)len;
    }
    if (nb_tokenizer_load_llama2c_mem(&t, b, n, "fuzz tokenizer", 0) != NB_OK) t = NULL;
    free(b);
    return t;
}

/* The body's bytes as the output of a constrained request: fed while taken; the mask
 * where they stop must agree with the one-token check. */
static void run_constraint(const struct srv_request *r, const uint8_t *data, size_t size)
{
    /* from the first '<' (a call's wrapper after the body), else from the start */
    const uint8_t *lt = memchr(data, '<', size);
    if (lt) {
        size -= (size_t)(lt - data);
        data = lt;
    }
    struct nb_cons c;
    nb_cons_start(r->grammar, &c);
    for (size_t i = 0; i < size; i++) {
        struct nb_cons t = c;
        if (!nb_cons_feed(r->grammar, &t, (const char *)data + i, 1)) break;
        c = t;
        if (i == size / 2) c.closing = 1; /* the second half in closing mode */
    }
    if (nb_cons_cost(r->grammar, &c) < 0) abort();
    for (int i = 0; i < g_vb.n_vocab; i++)
        g_logits[i] = 0;
    int n = nb_cons_mask(r->grammar, &g_vb, &c, 1, g_logits);
    for (int i = 0; i < g_vb.n_vocab; i++) {
        if ((g_logits[i] == 0) != nb_cons_allows(r->grammar, &g_vb, &c, i, 1)) abort();
        n -= g_logits[i] == 0;
    }
    if (n != 0) abort();
}

/* The body's bytes as the output of a request's GBNF grammar: fed while taken; the mask
 * where they stop must agree with the one-token check. */
static void run_gbnf(const struct srv_request *r, const uint8_t *data, size_t size)
{
    struct nb_gbstate *c = malloc(sizeof *c), *t = malloc(sizeof *t);
    if (!c || !t) abort();
    nb_gb_start(r->gbnf, c);
    for (size_t i = 0; i < size; i++) {
        memcpy(t, c, sizeof *t);
        if (!nb_gb_feed(r->gbnf, t, (const char *)data + i, 1)) break;
        memcpy(c, t, sizeof *c);
    }
    for (int i = 0; i < g_vb.n_vocab; i++)
        g_logits[i] = 0;
    nb_gb_mask(r->gbnf, &g_vb, c, 0, g_logits);
    for (int i = 0; i < g_vb.n_vocab; i++)
        if ((g_logits[i] == 0) != (nb_gb_allows(r->gbnf, &g_vb, c, i, 0) != 0)) abort();
    free(c);
    free(t);
}

/* A refused body: a 4xx/5xx with a message, and an error object that prints. */
static void check_refused(const struct srv_error *e)
{
    if (e->status < 400 || !e->message[0]) abort();
    char *json = srv_json_error(e);
    if (!json) abort();
    free(json);
}

/* The body as an embeddings request: accepted inputs are ids, each 1..n_ctx long. */
static void run_embed(const struct srv_model *m, const uint8_t *data, size_t size)
{
    struct srv_request r;
    struct srv_error e = {0};
    if (srv_parse_embed(m, (const char *)data, size, &r, &e) == 0) {
        if (r.n_inputs < 1 || r.n_inputs > SRV_MAX_EMBED_INPUTS) abort();
        for (int k = 0; k < r.n_inputs; k++) {
            int n = r.emb_off[k + 1] - r.emb_off[k];
            if (n < 1 || n > m->n_ctx) abort();
        }
        for (int i = 0; i < r.n_prompt; i++)
            if (r.prompt[i] < 0 || r.prompt[i] >= m->n_vocab) abort();
        srv_request_free(&r);
    } else {
        check_refused(&e);
    }
}

/* The bytes as a model's answer: calls to "f" or "get_weather" in either format. */
static void run_tool_parse(const uint8_t *data, size_t size)
{
    char *names[] = {"f", "get_weather"};
    for (int f = SRV_FMT_HERMES; f <= SRV_FMT_LLAMA3; f++) {
        struct srv_tool_call *calls = NULL;
        char *content = NULL;
        int n = 0;
        if (srv_tool_calls_parse((const char *)data, size, (enum srv_tool_format)f, names, 2,
                                 &calls, &n, &content))
            abort();
        for (int i = 0; i < n; i++)
            if (!calls[i].name || !calls[i].arguments || calls[i].arguments[0] != '{') abort();
        if (srv_tool_text_safe((const char *)data, size, (enum srv_tool_format)f) > size) abort();
        srv_tool_calls_free(calls, n);
        free(content);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_tok && !(g_tok = make_tokenizer())) abort();
    if (!g_logits) {
        if (nb_vocab_bytes_init(&g_vb, g_tok, nb_tokenizer_n_vocab(g_tok)) != NB_OK) abort();
        if (!(g_logits = malloc(sizeof *g_logits * (size_t)g_vb.n_vocab))) abort();
    }
    run_tool_parse(data, size);
    struct srv_model m = {0};
    m.tok = g_tok;
    m.vb = &g_vb;
    m.bos_text = "<s>";
    m.eos_text = "</s>";
    m.n_vocab = nb_tokenizer_n_vocab(g_tok);
    m.n_ctx = 8192; /* a tools' system block fits */
    m.sp = nb_sampler_default_params();
    /* the template from the first byte, so every renderer is reached */
    static const char *const names[] = {"chatml", "qwen3", "llama3", "llama2", "gemma"};
    if (nb_chat_template_by_name(names[size ? data[0] % 5 : 0], &m.tpl) != NB_OK) abort();
    for (int kind = SRV_COMPLETION; kind <= SRV_CHAT; kind++) {
        struct srv_request r;
        struct srv_error e = {0};
        if (srv_parse_request(&m, (enum srv_kind)kind, (const char *)data, size, &r, &e) == 0) {
            if (r.n_prompt <= 0 || r.n_prompt >= m.n_ctx) abort();
            if (r.n_choices < 1 || r.n_choices > SRV_MAX_CHOICES) abort(); /* "n" */
            for (int i = 0; i < r.n_prompt; i++)
                if (r.prompt[i] < 0 || r.prompt[i] >= m.n_vocab) abort();
            if (r.grammar) run_constraint(&r, data, size);
            if (r.gbnf) run_gbnf(&r, data, size);
            srv_request_free(&r);
        } else {
            check_refused(&e);
        }
    }
    run_embed(&m, data, size);
    return 0;
}
