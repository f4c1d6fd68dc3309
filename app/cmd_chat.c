/* nibble chat — interactive multi-turn chat. The conversation is rendered with the
 * model's chat template each turn; only the tokens that differ from what the KV cache
 * already holds are run, so earlier turns are not recomputed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/text.h"
#include "nibble.h"

#define MAX_TURNS 256

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble chat -m MODEL [--system TEXT] [--chat-template NAME] [-n N]\n"
               "                   [model, context and sampler options of nibble run]\n"
               "\n"
               "  --path P, --priority P, --no-cache   the weight path, as for nibble run\n"
               "  -c, --ctx-size N, -t N, -b N         context, threads, batch\n"
               "  --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,\n"
               "  -s, --seed                           sampling, as for nibble run\n"
               "\n"
               "Reads one user message per line from standard input; /reset starts over,\n"
               "/exit (or end of input) quits. NAME: chatml, qwen3, llama3, llama2, gemma.\n");
}

struct turn_out {
    const struct nb_tokenizer *tok;
    struct nb_detokenizer *detok;
    char *text;
    size_t len, cap;
    int32_t *gen; /* generated ids */
    int n_gen, cap_gen;
};

static int on_token(int32_t id, void *user)
{
    struct turn_out *o = user;
    if (nb_tokenizer_is_eog(o->tok, id)) return 1;
    if (o->n_gen == o->cap_gen) {
        int cap = o->cap_gen ? 2 * o->cap_gen : 64;
        int32_t *g = realloc(o->gen, sizeof *g * (size_t)cap);
        if (!g) return 1;
        o->gen = g;
        o->cap_gen = cap;
    }
    o->gen[o->n_gen++] = id;
    const char *t;
    size_t n;
    if (nb_detokenizer_feed(o->detok, id, &t, &n) != NB_OK) return 1;
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

/* The ids of a conversation rendered with the template, assistant header appended. */
static enum nb_status render_ids(const char *tpl, const struct nb_chat_msg *msgs, int n_msgs,
                                 const struct nb_tokenizer *tok, int32_t **ids, int *n_ids)
{
    char *text = NULL;
    *ids = NULL;
    *n_ids = 0;
    enum nb_status st = app_chat_apply(tok, tpl, msgs, n_msgs, 1, &text);
    if (st == NB_OK) st = app_tokenize(tok, text, strlen(text), 0, 1, ids, n_ids);
    free(text);
    return st;
}

int cmd_chat(int argc, char **argv)
{
    const char *cmd = "chat", *model_path = getenv("NIBBLE_MODEL"), *system = NULL;
    const char *tpl_name = NULL, *path_name = NULL, *priority = NULL;
    int n_predict = 256, rc = 1, no_cache = 0;
    char loaded[4096];
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct nb_model *model = NULL;
    struct nb_ctx *ctx = NULL;
    struct nb_sampler *sampler = NULL;
    struct nb_tokenizer *tok = NULL;
    struct nb_chat_msg msgs[MAX_TURNS];
    char *owned[MAX_TURNS] = {0};
    int n_msgs = 0;
    int32_t *cached = NULL; /* the ids the cache holds */
    int n_cached = 0;
    char *line = NULL;
    size_t line_cap = 0;
    const struct arg_opt opts[] = {
        OPTS_MODEL(&model_path, &path_name, &priority, &no_cache),
        OPT_STR("--system", &system),
        OPT_STR("--chat-template", &tpl_name),
        OPT_INT("-n|--predict|--n-predict", &n_predict, 1, 1 << 20),
        OPTS_CONTEXT(&cp, 16),
        OPTS_SAMPLER(&sp),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    if (!model_path) {
        fprintf(stderr, "nibble chat: give a model with -m\n");
        return 1;
    }
    const char *tpl_kind = NULL;
    /* the same road as run: --path auto by default, quantized once into the cache */
    if (!app_open_model(cmd, model_path, path_name, priority, cp.n_threads, !no_cache, &model,
                        loaded, sizeof loaded))
        goto done;
    if (nb_tokenizer_load(&tok, model_path) != NB_OK) goto fail;
    enum nb_status tst = nb_chat_template_resolve(tok, tpl_name, &tpl_kind);
    if (tst == NB_ERR_NOT_FOUND) {
        fprintf(stderr, "nibble chat: %s has no chat template; choose one with --chat-template "
                        "NAME (chatml, qwen3, llama3, llama2, gemma)\n", model_path);
        goto done;
    } else if (tst != NB_OK) {
        goto fail;
    }
    struct nb_model_info info;
    nb_model_get_info(model, &info);
    /* The context is fixed here (the library's default when -c is not given) so that
     * each turn can be checked against it before it runs. */
    if (cp.n_ctx <= 0)
        cp.n_ctx = info.n_ctx_train > 0 && info.n_ctx_train < 4096 ? info.n_ctx_train : 4096;
    if (nb_ctx_init(&ctx, model, &cp) != NB_OK) goto fail;
    if (nb_sampler_init(&sampler, &sp, info.n_vocab) != NB_OK) goto fail;
    if (system) msgs[n_msgs++] = (struct nb_chat_msg){"system", system};
    int base_msgs = n_msgs, interactive = isatty(0);
    fprintf(stderr, "nibble chat: %s, template %s; /reset, /exit\n", model_path,
            tpl_kind);
    for (;;) {
        if (interactive) fprintf(stderr, "> ");
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (!strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset") || n_msgs + 2 > MAX_TURNS) {
            for (int i = 0; i < MAX_TURNS; i++) free(owned[i]), owned[i] = NULL;
            n_msgs = base_msgs;
            nb_ctx_clear_seq(ctx, 0);
            n_cached = 0;
            if (!strcmp(line, "/reset")) continue;
        }
        int32_t *ids = NULL;
        int n_ids = 0;
        enum nb_status st;
        /* A message that does not fit the context even on its own (with the system turn
         * and the template) is refused; the conversation goes on without it. */
        msgs[n_msgs] = (struct nb_chat_msg){"user", line};
        struct nb_chat_msg alone[2];
        int n_alone = 0;
        if (base_msgs) alone[n_alone++] = msgs[0];
        alone[n_alone++] = msgs[n_msgs];
        if ((st = render_ids(tpl_name, alone, n_alone, tok, &ids, &n_ids))) goto fail;
        free(ids);
        ids = NULL;
        if (n_ids >= cp.n_ctx) {
            fprintf(stderr,
                    "nibble chat: message not sent: it is %d tokens with the chat "
                    "template, the context holds %d (--ctx); send a shorter one\n",
                    n_ids, cp.n_ctx);
            continue;
        }
        if (!(owned[n_msgs] = strdup(line))) {
            fprintf(stderr, "nibble chat: out of memory\n");
            goto done;
        }
        msgs[n_msgs] = (struct nb_chat_msg){"user", owned[n_msgs]};
        n_msgs++;
        if ((st = render_ids(tpl_name, msgs, n_msgs, tok, &ids, &n_ids))) goto fail;
        if (n_ids >= cp.n_ctx) {
            /* the whole conversation no longer fits: start a new one with this message */
            free(ids);
            ids = NULL;
            char *msg = owned[n_msgs - 1];
            owned[n_msgs - 1] = NULL;
            for (int i = 0; i < MAX_TURNS; i++)
                free(owned[i]), owned[i] = NULL;
            n_msgs = base_msgs;
            owned[n_msgs] = msg;
            msgs[n_msgs] = (struct nb_chat_msg){"user", msg};
            n_msgs++;
            nb_ctx_clear_seq(ctx, 0);
            n_cached = 0;
            fprintf(stderr,
                    "[the conversation outgrew the context of %d tokens: earlier turns "
                    "dropped]\n",
                    cp.n_ctx);
            if ((st = render_ids(tpl_name, msgs, n_msgs, tok, &ids, &n_ids))) goto fail;
        }
        /* keep the longest cached prefix; run the rest */
        int keep = 0;
        while (keep < n_cached && keep < n_ids - 1 && cached[keep] == ids[keep]) keep++;
        if (nb_ctx_truncate_seq(ctx, 0, keep) != NB_OK) {
            nb_ctx_clear_seq(ctx, 0);
            keep = 0;
        }
        fprintf(stderr, "[%d cached tokens reused, %d new]\n", keep, n_ids - keep);
        struct turn_out out = {.tok = tok};
        if (nb_detokenizer_init(&out.detok, tok, 0) != NB_OK) goto fail;
        struct nb_gen_stats gs;
        /* the answer stops where the context is full: after the prompt's n_ids tokens,
         * n more need n - 1 decode steps */
        int room = cp.n_ctx - n_ids + 1, turn_predict = n_predict < room ? n_predict : room;
        st = nb_generate(ctx, 0, sampler, ids + keep, n_ids - keep, turn_predict, 1, on_token, &out,
                         &gs);
        const char *t;
        size_t n;
        if (st == NB_OK && nb_detokenizer_flush(out.detok, &t, &n) == NB_OK) fwrite(t, 1, n, stdout);
        printf("\n");
        fflush(stdout);
        nb_detokenizer_free(out.detok);
        if (st == NB_OK && turn_predict < n_predict && gs.n_gen == turn_predict)
            fprintf(stderr, "[the context of %d tokens is full: the answer was cut]\n", cp.n_ctx);
        /* the cache now holds the prompt and the generated tokens but the last */
        free(cached);
        cached = realloc(ids, sizeof *ids * (size_t)(n_ids + out.n_gen + 1));
        if (!cached) {
            free(ids);
            free(out.gen);
            free(out.text);
            goto fail;
        }
        if (out.n_gen) memcpy(cached + n_ids, out.gen, sizeof *ids * (size_t)out.n_gen);
        n_cached = nb_ctx_seq_len(ctx, 0);
        if (n_cached > n_ids + out.n_gen) n_cached = n_ids + out.n_gen;
        free(out.gen);
        if (st) {
            free(out.text);
            goto fail;
        }
        owned[n_msgs] = out.text ? out.text : strdup("");
        msgs[n_msgs] = (struct nb_chat_msg){"assistant", owned[n_msgs]};
        n_msgs++;
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "nibble chat: %s\n", nb_last_error());
    rc = 1;
done:
    for (int i = 0; i < MAX_TURNS; i++) free(owned[i]);
    free(cached);
    free(line);
    nb_sampler_free(sampler);
    nb_ctx_free(ctx);
    nb_tokenizer_free(tok);
    nb_model_free(model);
    return rc;
}
