/* nibble chat — interactive multi-turn chat. The conversation is rendered with the
 * model's chat template each turn (its own Jinja source when nibble's interpreter runs
 * it, as nibble serve does; else the built-in family it is recognised as); only the tokens
 * that differ from what the KV cache already holds are run, so earlier turns are not
 * recomputed. When the context fills, it shifts as nibble run's does (app/ctxshift.h),
 * keeping the conversation's start. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/ctxshift.h"
#include "app/memory.h"
#include "app/text.h"
#include "nibble.h"

#define MAX_TURNS 256

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble chat -m MODEL [--system TEXT] [--chat-template NAME]\n"
               "                   [--chat-template-file F] [-n N]\n"
               "                   [model, context and sampler options of nibble run]\n"
               "\n"
               "  --chat-template NAME                 a built-in template instead of the model's\n"
               "  --chat-template-file F               the Jinja template in F instead of the model's\n"
               "  -n N                                 tokens per answer at most (default 256;\n"
               "                                       -1: until the end of the turn)\n"
               "  --path P, --priority P, --no-cache   the weight path, as for nibble run\n"
               "  -c, --ctx-size N, -t N, -b N         context, threads, batch\n"
               "  --kv-type T                          KV cache type, as for run\n"
               "  --keep N, --no-shift                 a full context, as for nibble run (below)\n"
               "  --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,\n"
               "  --presence-penalty, --frequency-penalty,\n"
               "  -s, --seed                           sampling, as for nibble run\n"
               "  -j, --json-schema S                  every answer is one JSON object that keeps\n"
               "                                       to the JSON Schema S (text or file), as for run\n"
               "  --grammar G, --grammar-file F        every answer keeps to a GBNF grammar, as for run\n"
               "\n"
               "Reads one user message per line from standard input; /reset starts over,\n"
               "/exit (or end of input) quits. NAME: chatml, qwen3, llama3, llama2, gemma.\n"
               "The model's own template (GGUF tokenizer.chat_template, tokenizer_config.json's\n"
               "chat_template) is rendered as it is written when nibble's Jinja interpreter\n"
               "runs it, else as the built-in family it is recognised as.\n"
               "\n"
               "When a turn or an answer does not fit the context, the oldest half of the\n"
               "conversation after its start is dropped and the chat goes on. The start kept\n"
               "(--keep -1, the default) is what every conversation begins with: BOS, the\n"
               "system turn (--system, or the template's own) and the first user header;\n"
               "--keep N keeps BOS and at most N tokens of that. --no-shift instead cuts an\n"
               "answer where the context is full and begins a conversation anew (earlier\n"
               "turns dropped) when a message does not fit beside it.\n");
}

struct turn_out {
    struct nb_text_out *out; /* the token -> text step */
    char *text;
    size_t len, cap;
};

static int on_token(int32_t id, void *user)
{
    struct turn_out *o = user;
    const char *t;
    size_t n;
    if (nb_text_out_feed(o->out, id, &t, &n) != NB_TEXT_MORE) return 1;
    fwrite(t, 1, n, stdout);
    fflush(stdout);
    if (o->len + n + 1 > o->cap) {
        size_t cap = (o->len + n + 1) * 2;
        char *nt = realloc(o->text, cap);
        if (!nt) return 1;
        o->text = nt;
        o->cap = cap;
    }
    memcpy(o->text + o->len, t, n);
    o->len += n;
    o->text[o->len] = '\0';
    return 0;
}

/* How conversations are rendered: a Jinja template (the model's own when source is NULL,
 * else source) or a built-in family by name (NULL: the one the model's is recognised as). */
struct chat_tpl {
    int jinja;
    const char *source;
    const char *name;
};

/* A conversation rendered with a Jinja template: the context {messages,
 * add_generation_prompt} as JSON, rendered into a malloc'd string. */
static enum nb_status render_jinja(const struct chat_tpl *t, const struct nb_tokenizer *tok,
                                   const struct nb_chat_msg *msgs, int n_msgs, char **text)
{
    enum nb_status st = NB_ERR_NOMEM;
    char *json = NULL, *buf = NULL;
    cJSON *ctx = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(ctx, "messages");
    *text = NULL;
    for (int i = 0; list && i < n_msgs; i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(list, m) || !cJSON_AddStringToObject(m, "role", msgs[i].role) ||
            !cJSON_AddStringToObject(m, "content", msgs[i].content))
            goto done;
    }
    if (!list || !cJSON_AddBoolToObject(ctx, "add_generation_prompt", 1) ||
        !(json = cJSON_PrintUnformatted(ctx)))
        goto done;
    size_t size = 4096, len = 0;
    for (;;) {
        char *nb = realloc(buf, size);
        if (!nb) goto done;
        buf = nb;
        st = nb_chat_template_render_json(tok, t->source, json, buf, size, &len);
        if (st != NB_ERR_RANGE || len + 1 <= size) break;
        size = len + 1;
    }
    if (st == NB_OK) {
        *text = buf;
        buf = NULL;
    }
done:
    if (st == NB_ERR_NOMEM) fprintf(stderr, "nibble chat: out of memory\n");
    free(buf);
    free(json);
    cJSON_Delete(ctx);
    return st;
}

/* The ids of a conversation rendered with the template, assistant header appended. */
static enum nb_status render_ids(const struct chat_tpl *tpl, const struct nb_chat_msg *msgs,
                                 int n_msgs, const struct nb_tokenizer *tok, int32_t **ids,
                                 int *n_ids)
{
    char *text = NULL;
    *ids = NULL;
    *n_ids = 0;
    enum nb_status st = tpl->jinja ? render_jinja(tpl, tok, msgs, n_msgs, &text)
                                   : app_chat_apply(tok, tpl->name, msgs, n_msgs, 1, &text);
    if (st == NB_OK) st = app_tokenize(tok, text, strlen(text), 0, 1, ids, n_ids);
    free(text);
    return st;
}

/* Which template renders the chat: --chat-template NAME (a built-in family),
 * --chat-template-file F (its Jinja source, which must run), else the model's own Jinja
 * template when it runs here, else the built-in family the model's is recognised as.
 * *kind: what to tell the user. 0 after printing why not. */
static int choose_template(const struct nb_tokenizer *tok, const char *model_path,
                           const char *name, const char *file, const char *file_src,
                           struct chat_tpl *t, const char **kind)
{
    static const struct nb_chat_msg probe[] = {{"user", "u"}};
    char *text = NULL;
    memset(t, 0, sizeof *t);
    if (name && file) {
        fprintf(stderr, "nibble chat: give --chat-template or --chat-template-file, not both\n");
        return 0;
    }
    if (!name) {
        t->jinja = 1;
        t->source = file_src;
        enum nb_status st = render_jinja(t, tok, probe, 1, &text);
        free(text);
        if (st == NB_OK) {
            *kind = file ? file : "the model's own (Jinja)";
            return 1;
        }
        if (file) {
            fprintf(stderr, "nibble chat: --chat-template-file %s: %s\n", file, nb_last_error());
            return 0;
        }
        memset(t, 0, sizeof *t);
        if (st != NB_ERR_NOT_FOUND)
            fprintf(stderr,
                    "nibble chat: the model's chat template does not run here (%s): the "
                    "built-in family it is recognised as renders the chat\n",
                    nb_last_error());
    }
    t->name = name;
    enum nb_status st = nb_chat_template_resolve(tok, name, kind);
    if (st == NB_ERR_NOT_FOUND) {
        fprintf(stderr, "nibble chat: %s has no chat template; choose one with --chat-template "
                        "NAME (chatml, qwen3, llama3, llama2, gemma) or --chat-template-file F\n",
                model_path);
        return 0;
    }
    if (st != NB_OK) {
        fprintf(stderr, "nibble chat: %s\n", nb_last_error());
        return 0;
    }
    return 1;
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* The tokens every conversation with this system turn begins with (what a shift keeps
 * with --keep -1): the ids two one-message conversations share, so it works for every
 * template, however it places the system turn (its own turn, or inside the first user
 * message) and whether the template adds one of its own. */
static enum nb_status conversation_start(const struct chat_tpl *tpl, const char *system,
                                         const struct nb_tokenizer *tok, int32_t **ids,
                                         int *n_start)
{
    struct nb_chat_msg a[2], b[2];
    int n = 0;
    int32_t *ib = NULL;
    int na = 0, nb = 0;
    if (system) {
        a[n] = b[n] = (struct nb_chat_msg){"system", system};
        n++;
    }
    a[n] = (struct nb_chat_msg){"user", "x"};
    b[n] = (struct nb_chat_msg){"user", "y"};
    n++;
    enum nb_status st = render_ids(tpl, a, n, tok, ids, &na);
    if (st == NB_OK) st = render_ids(tpl, b, n, tok, &ib, &nb);
    if (st == NB_OK) *n_start = common_prefix(*ids, na, ib, nb);
    free(ib);
    return st;
}

/* A conversation: the messages so far and the sequence its tokens run in. */
struct chat {
    struct chat_tpl tpl;
    const struct nb_tokenizer *tok;
    struct nb_sequence *seq; /* what the cache holds, every token of this conversation */
    struct nb_sampler *sampler;
    const struct nb_grammar *grammar; /* -j: every answer keeps to it (NULL: free) */
    struct nb_chat_msg msgs[MAX_TURNS];
    char *owned[MAX_TURNS];
    int n_msgs, base_msgs; /* base_msgs: the system turn (0 or 1) */
    int n_ctx, n_keep, no_shift, n_predict;
};

/* Forget every turn but the system one; keep[0] (may be NULL) becomes the first user turn. */
static void restart(struct chat *c, char *keep)
{
    for (int i = 0; i < MAX_TURNS; i++) free(c->owned[i]), c->owned[i] = NULL;
    c->n_msgs = c->base_msgs;
    if (!keep) return;
    c->owned[c->n_msgs] = keep;
    c->msgs[c->n_msgs++] = (struct nb_chat_msg){"user", keep};
}

/* Does the message fit the context on its own (with the system turn and the template)?
 * 1 yes; 0 no (said); -1 on a failure. */
static int fits_alone(struct chat *c, const char *line)
{
    struct nb_chat_msg alone[2];
    int n_alone = 0, n_ids = 0;
    int32_t *ids = NULL;
    if (c->base_msgs) alone[n_alone++] = c->msgs[0];
    alone[n_alone++] = (struct nb_chat_msg){"user", line};
    if (render_ids(&c->tpl, alone, n_alone, c->tok, &ids, &n_ids)) return -1;
    free(ids);
    if (n_ids < c->n_ctx) return 1;
    fprintf(stderr, "nibble chat: message not sent: it is %d tokens with the chat template, "
                    "the context holds %d (--ctx); send a shorter one\n", n_ids, c->n_ctx);
    return 0;
}

/* The conversation with the new message as ids, and how many of them the sequence
 * already holds: the longest prefix of what it has run (at least one token is run, for the
 * logits). After a shift the cache holds the conversation's start and its newest part; the
 * new tokens go after that. What does not fit even so starts a new conversation with this
 * message (it fits on its own: checked before). Without shift that is any conversation
 * longer than the context; with it, new tokens that do not fit beside the kept start
 * (they are more than this message when the template renders the last answer other than
 * it was generated, e.g. trimmed, so that it is run again). */
static enum nb_status render_turn(struct chat *c, int32_t **ids, int *n_ids, int *same)
{
    enum nb_status st = render_ids(&c->tpl, c->msgs, c->n_msgs, c->tok, ids, n_ids);
    if (st) return st;
    int n_seq;
    const int32_t *seq_ids = nb_sequence_ids(c->seq, &n_seq);
    *same = common_prefix(seq_ids, n_seq, *ids, *n_ids - 1);
    int kept = *same < c->n_keep ? *same : c->n_keep;
    if (c->no_shift ? *n_ids < c->n_ctx : kept + *n_ids - *same <= c->n_ctx) return NB_OK;
    free(*ids);
    *ids = NULL;
    char *msg = c->owned[c->n_msgs - 1];
    c->owned[c->n_msgs - 1] = NULL;
    restart(c, msg);
    fprintf(stderr, "[the conversation outgrew the context of %d tokens: earlier turns "
                    "dropped]\n", c->n_ctx);
    if ((st = render_ids(&c->tpl, c->msgs, c->n_msgs, c->tok, ids, n_ids))) return st;
    seq_ids = nb_sequence_ids(c->seq, &n_seq);
    *same = common_prefix(seq_ids, n_seq, *ids, *n_ids - 1); /* the start, still cached */
    return NB_OK;
}

/* One user message: rendered with the conversation, run, the answer streamed to stdout
 * and kept as the assistant's turn. NB_ERR_NOMEM when out of memory (said here). */
static enum nb_status turn(struct chat *c, const char *line)
{
    int32_t *ids = NULL;
    int n_ids = 0, same = 0;
    enum nb_status st;
    if (!(c->owned[c->n_msgs] = strdup(line))) {
        fprintf(stderr, "nibble chat: out of memory\n");
        return NB_ERR_NOMEM;
    }
    c->msgs[c->n_msgs] = (struct nb_chat_msg){"user", c->owned[c->n_msgs]};
    c->n_msgs++;
    if ((st = render_turn(c, &ids, &n_ids, &same))) return st;
    nb_sequence_rewind(c->seq, same);
    fprintf(stderr, "[%d cached tokens reused, %d new]\n", nb_sequence_cached(c->seq),
            n_ids - same + nb_sequence_pending(c->seq));
    struct turn_out out = {0};
    if ((st = nb_text_out_init(&out.out, c->tok, NULL))) {
        free(ids);
        return st;
    }
    struct nb_gen_stats gs;
    if ((st = nb_sampler_set_grammar(c->sampler, c->grammar))) { /* from its start again */
        free(ids);
        nb_text_out_free(out.out);
        return st;
    }
    st = nb_sequence_generate(c->seq, c->sampler, ids + same, n_ids - same, c->n_predict, 1,
                              on_token, &out, &gs);
    free(ids);
    const char *t;
    size_t n;
    if (st == NB_OK) {
        nb_text_out_flush(out.out, &t, &n);
        fwrite(t, 1, n, stdout);
    }
    printf("\n");
    fflush(stdout);
    nb_text_out_free(out.out);
    if (st) {
        free(out.text);
        return st;
    }
    if (gs.n_shifts)
        fprintf(stderr, "[the context of %d tokens was full: %d tokens dropped after the "
                        "first %d, the conversation goes on]\n", c->n_ctx, gs.n_dropped,
                c->n_keep);
    if (gs.stopped_by == NB_STOPPED_CONTEXT)
        fprintf(stderr, "[the context of %d tokens is full: the answer was cut]\n", c->n_ctx);
    c->owned[c->n_msgs] = out.text ? out.text : strdup("");
    c->msgs[c->n_msgs] = (struct nb_chat_msg){"assistant", c->owned[c->n_msgs]};
    c->n_msgs++;
    return NB_OK;
}

/* The context and the sequence for the conversation; n_keep: its start (what a shift
 * keeps). 1 on success, 0 when said, -1 on a library failure. */
static int start_chat(struct chat *c, const struct nb_model *model, struct nb_ctx_params *cp,
                      const struct app_shift_opts *so, const char *system, int bos_id,
                      struct nb_ctx **ctx)
{
    int32_t *start = NULL;
    int n_start = 0;
    if (conversation_start(&c->tpl, system, c->tok, &start, &n_start) != NB_OK) return -1;
    int ok = app_keep_resolve("chat", so, "the conversation's start", start, n_start, bos_id,
                              cp->n_ctx, &c->n_keep);
    free(start);
    if (!ok) return 0;
    if (nb_ctx_init(ctx, model, cp) != NB_OK) return -1;
    struct nb_sequence_params qp = nb_sequence_default_params();
    qp.n_ctx = c->n_ctx = cp->n_ctx;
    qp.shift = !(c->no_shift = so->no_shift);
    qp.n_keep = c->n_keep;
    return nb_sequence_init(&c->seq, *ctx, &qp) == NB_OK ? 1 : -1;
}

int cmd_chat(int argc, char **argv)
{
    const char *cmd = "chat", *model_path = getenv("NIBBLE_MODEL"), *system = NULL;
    const char *tpl_name = NULL, *tpl_file = NULL, *path_name = NULL, *priority = NULL;
    struct app_grammar_opts gram = {0};
    struct nb_grammar *grammar = NULL;
    char *tpl_src = NULL;
    struct chat c = {.n_predict = 256};
    int rc = 1, no_cache = 0;
    char loaded[4096];
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct nb_model *model = NULL;
    struct nb_ctx *ctx = NULL;
    struct nb_tokenizer *tok = NULL;
    struct app_shift_opts so = {.keep = -1};
    char *line = NULL;
    size_t line_cap = 0;
    const struct arg_opt opts[] = {
        OPTS_MODEL(&model_path, &path_name, &priority, &no_cache),
        OPT_STR("--system", &system),
        OPT_STR("--chat-template", &tpl_name),
        OPT_STR("--chat-template-file", &tpl_file),
        OPT_INT("-n|--predict|--n-predict", &c.n_predict, -1, 1 << 20),
        OPTS_CONTEXT(&cp, 16),
        OPTS_SHIFT(&so),
        OPTS_SAMPLER(&sp),
        OPTS_GRAMMAR(&gram),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    if (!model_path) {
        fprintf(stderr, "nibble chat: give a model with -m\n");
        return 1;
    }
    const char *tpl_kind = NULL;
    size_t tpl_len = 0;
    if (tpl_file && !app_read_all(cmd, "--chat-template-file", tpl_file, (size_t)16 << 20,
                                  &tpl_src, &tpl_len))
        return 1;
    /* the same road as run: --path auto by default, quantized once into the cache */
    if (!app_open_model(cmd, model_path, path_name, priority, cp.n_threads, !no_cache, &model,
                        loaded, sizeof loaded))
        goto done;
    if (nb_tokenizer_from_model(&tok, model) != NB_OK) goto fail;
    c.tok = tok;
    if (!choose_template(tok, model_path, tpl_name, tpl_file, tpl_src, &c.tpl, &tpl_kind))
        goto done;
    struct nb_model_info info;
    nb_model_get_info(model, &info);
    /* The context is fixed here (the library's default when -c is not given) so that
     * each turn can be checked against it before it runs. */
    cp.n_ctx = app_ctx_size(&info, cp.n_ctx);
    if (!app_context_fits(cmd, model, &cp)) goto done;
    int started = start_chat(&c, model, &cp, &so, system, info.bos_id, &ctx);
    if (started <= 0) {
        if (started < 0) goto fail;
        goto done;
    }
    if (nb_sampler_init(&c.sampler, &sp, info.n_vocab) != NB_OK) goto fail;
    if (!app_grammar_open(cmd, &gram, tok, info.n_vocab, &grammar)) goto done;
    c.grammar = grammar;
    if (system) c.msgs[c.n_msgs++] = (struct nb_chat_msg){"system", system};
    c.base_msgs = c.n_msgs;
    int interactive = isatty(0);
    fprintf(stderr, "nibble chat: %s, template %s; /reset, /exit\n", model_path, tpl_kind);
    for (;;) {
        if (interactive) fprintf(stderr, "> ");
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset") || c.n_msgs + 2 > MAX_TURNS) {
            restart(&c, NULL);
            nb_sequence_rewind(c.seq, 0);
            if (!strcmp(line, "/reset")) continue;
        }
        int fits = fits_alone(&c, line);
        if (fits < 0) goto fail;
        if (fits == 0) continue;
        enum nb_status st = turn(&c, line);
        if (st == NB_ERR_NOMEM) goto done;
        if (st) goto fail;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "nibble chat: %s\n", nb_last_error());
    rc = 1;
done:
    for (int i = 0; i < MAX_TURNS; i++) free(c.owned[i]);
    free(tpl_src);
    nb_sequence_free(c.seq);
    free(line);
    nb_sampler_free(c.sampler);
    nb_grammar_free(grammar);
    nb_ctx_free(ctx);
    nb_tokenizer_free(tok);
    nb_model_free(model);
    return rc;
}
