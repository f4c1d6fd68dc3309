/* nibble chat — interactive multi-turn chat. The conversation is rendered with the
 * model's chat template each turn (its own Jinja source when nibble's interpreter runs
 * it, as nibble serve does; else the built-in family it is recognised as); only the tokens
 * that differ from what the KV cache already holds are run, so earlier turns are not
 * recomputed. When the context fills, it shifts as nibble run's does (app/ctxshift.h),
 * keeping the conversation's start. Input (app/chat_input.h): at a terminal libedit's line
 * editing and history, Ctrl-C stops a reply (what was said stays in the conversation);
 * messages over several lines; /commands answered here, never sent (/help). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/chat_file.h"
#include "app/chat_input.h"
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
               "  --system TEXT, -sys TEXT             the system prompt (/set system changes it)\n"
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
               "  -cnv, -i, -if (--conversation, --interactive, --interactive-first)\n"
               "                                       accepted, as llama-cli's (chat always is)\n"
               "\n"
               "Reads one user message per line from standard input. A line ending in \\\n"
               "goes on onto the next; a line beginning with \"\"\" opens a message that the\n"
               "first line ending in \"\"\" closes. At a terminal: line editing and history\n"
               "(libedit; $XDG_STATE_HOME/nibble/chat_history, else\n"
               "~/.local/state/nibble/chat_history), the prompt on stdout, Ctrl-C stops a reply\n"
               "(what it said stays in the conversation) and at the prompt drops what was\n"
               "typed; a second Ctrl-C in a row, Ctrl-D or /bye quits (status 0).\n"
               "Commands, answered and never sent (a line beginning with // is sent with one /):\n"
               "  /help  /bye (/exit)  /clear (/reset)  /save FILE  /load FILE  /set system TEXT\n"
               "NAME: chatml, qwen3, llama3, llama2, gemma. The model's own template (GGUF\n"
               "tokenizer.chat_template, tokenizer_config.json's chat_template) is rendered as it\n"
               "is written when nibble's Jinja interpreter runs it, else as the built-in family\n"
               "it is recognised as; a model with none (or one nibble does not know) is chatted\n"
               "with in ChatML, said once, as nibble serve does.\n"
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
    return chat_input_interrupted(); /* Ctrl-C: the reply ends here */
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
 * template when it runs here, else nibble serve's rule (nb_chat_template_choose): the
 * built-in family the model's is recognised as, else ChatML, said once.
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
    const char *note = NULL;
    if (nb_chat_template_choose(tok, name, kind, &note) != NB_OK) {
        fprintf(stderr, "nibble chat: %s\n", nb_last_error());
        return 0;
    }
    t->name = note ? *kind : name; /* the fallback by its name: the model has none */
    if (note) fprintf(stderr, "nibble chat: %s: %s\n", model_path, note);
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
    struct nb_ctx *ctx;
    struct nb_sequence *seq; /* what the cache holds, every token of this conversation */
    struct nb_sampler *sampler;
    const struct nb_grammar *grammar; /* -j: every answer keeps to it (NULL: free) */
    const struct app_shift_opts *so;  /* --keep, --no-shift */
    struct nb_chat_msg msgs[MAX_TURNS];
    char *owned[MAX_TURNS]; /* the messages' texts after the system turn */
    char *system;           /* the system turn's text (msgs[0] when base_msgs is 1) */
    int n_msgs, base_msgs;  /* base_msgs: the system turn (0 or 1) */
    int n_ctx, n_keep, no_shift, n_predict, bos_id;
    struct chat_input in;
    FILE *say; /* where commands are answered: stdout at a terminal, else stderr */
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
    if (chat_input_interrupted())
        fprintf(stderr, "[stopped (Ctrl-C): the answer so far stays in the conversation]\n");
    c->owned[c->n_msgs] = out.text ? out.text : strdup("");
    c->msgs[c->n_msgs] = (struct nb_chat_msg){"assistant", c->owned[c->n_msgs]};
    c->n_msgs++;
    return NB_OK;
}

/* What a shift keeps of conversations with this system turn (NULL: none): their start.
 * 1 on success, 0 when said, -1 on a library failure. */
static int resolve_keep(struct chat *c, const char *system, int *n_keep)
{
    int32_t *start = NULL;
    int n_start = 0;
    if (conversation_start(&c->tpl, system, c->tok, &start, &n_start) != NB_OK) return -1;
    int ok = app_keep_resolve("chat", c->so, "the conversation's start", start, n_start,
                              c->bos_id, c->n_ctx, n_keep);
    free(start);
    return ok;
}

/* A new, empty sequence (the old one freed, its cache cleared) whose shifts keep n_keep. */
static enum nb_status new_sequence(struct chat *c, int n_keep)
{
    struct nb_sequence_params qp = nb_sequence_default_params();
    qp.n_ctx = c->n_ctx;
    qp.shift = !c->no_shift;
    qp.n_keep = c->n_keep = n_keep;
    nb_sequence_free(c->seq);
    c->seq = NULL;
    nb_ctx_clear_seq(c->ctx, qp.seq);
    return nb_sequence_init(&c->seq, c->ctx, &qp);
}

/* The context and the sequence for the conversation. 1 on success, 0 when said, -1 on a
 * library failure. */
static int start_chat(struct chat *c, const struct nb_model *model, struct nb_ctx_params *cp)
{
    int n_keep = 0;
    c->n_ctx = cp->n_ctx;
    c->no_shift = c->so->no_shift;
    int ok = resolve_keep(c, c->system, &n_keep);
    if (ok <= 0) return ok;
    if (nb_ctx_init(&c->ctx, model, cp) != NB_OK) return -1;
    return new_sequence(c, n_keep) == NB_OK ? 1 : -1;
}

/* A new system turn (NULL or "": none); the conversation starts over. 1 on success, 0
 * when said (the old one kept), -1 on a failure. */
static int set_system(struct chat *c, const char *text)
{
    int n_keep = 0, ok;
    char *copy = NULL;
    if (text && !*text) text = NULL;
    if (text ? c->system && !strcmp(text, c->system) : !c->system) {
        restart(c, NULL);
        nb_sequence_rewind(c->seq, 0); /* the same start: the cache keeps it */
        return 1;
    }
    if (text && !(copy = strdup(text))) return -1;
    if ((ok = resolve_keep(c, copy, &n_keep)) <= 0) {
        free(copy);
        return ok;
    }
    restart(c, NULL);
    free(c->system);
    c->system = copy;
    c->base_msgs = c->n_msgs = copy != NULL;
    if (copy) c->msgs[0] = (struct nb_chat_msg){"system", copy};
    return new_sequence(c, n_keep) == NB_OK ? 1 : -1;
}

/* /load FILE: its messages become the conversation (its system turn, or none, too). */
static int load(struct chat *c, const char *path)
{
    const char *roles[MAX_TURNS];
    char *texts[MAX_TURNS];
    int n = 0;
    if (!app_chat_load(path, MAX_TURNS - 2, roles, texts, &n)) return 1;
    int sys = n > 0 && !strcmp(roles[0], "system");
    int ok = set_system(c, sys ? texts[0] : NULL);
    if (sys) free(texts[0]);
    for (int i = sys; i < n; i++) {
        if (ok <= 0) {
            free(texts[i]);
            continue;
        }
        c->owned[c->n_msgs] = texts[i];
        c->msgs[c->n_msgs++] = (struct nb_chat_msg){roles[i], texts[i]};
    }
    if (ok > 0)
        fprintf(c->say, "[%d messages loaded from %s: the conversation goes on from them]\n", n,
                path);
    return ok < 0 ? -1 : 1;
}

static void help(FILE *f)
{
    fprintf(f, "  /help            this list\n"
               "  /bye, /exit      quit (so do Ctrl-D, and Ctrl-C twice at the prompt)\n"
               "  /clear, /reset   forget the conversation (the system prompt stays)\n"
               "  /save FILE       write the conversation to FILE as JSON messages\n"
               "  /load FILE       go on from a conversation /save wrote\n"
               "  /set system TEXT a new system prompt (none without TEXT); starts over\n"
               "  \"\"\"              a message over several lines, to a line ending in \"\"\"\n"
               "  a line ending in \\ goes on onto the next; // at the start sends one /\n"
               "  Ctrl-C           stops a reply (what it said stays in the conversation)\n");
}

/* A /command, answered here and never sent. 0 to quit, 1 to go on, -1 on a failure. */
static int command(struct chat *c, char *line)
{
    char *arg = line + strcspn(line, " \t");
    if (*arg) *arg++ = '\0';
    arg += strspn(arg, " \t");
    if (!strcmp(line, "/help") || !strcmp(line, "/?")) help(c->say);
    else if (!strcmp(line, "/bye") || !strcmp(line, "/exit") || !strcmp(line, "/quit")) return 0;
    else if (!strcmp(line, "/clear") || !strcmp(line, "/reset")) {
        restart(c, NULL);
        nb_sequence_rewind(c->seq, 0);
        fprintf(c->say, "[the conversation is forgotten]\n");
    } else if ((!strcmp(line, "/save") || !strcmp(line, "/load")) && !*arg)
        fprintf(c->say, "%s needs a file: %s FILE\n", line, line);
    else if (!strcmp(line, "/save")) {
        if (app_chat_save(arg, c->msgs, c->n_msgs))
            fprintf(c->say, "[%d message%s saved to %s]\n", c->n_msgs, c->n_msgs == 1 ? "" : "s",
                    arg);
    } else if (!strcmp(line, "/load")) return load(c, arg);
    else if (!strcmp(line, "/set") && !strncmp(arg, "system", 6) &&
             (!arg[6] || arg[6] == ' ' || arg[6] == '\t')) {
        arg += 6 + strspn(arg + 6, " \t");
        int ok = set_system(c, arg);
        if (ok > 0)
            fprintf(c->say, "[%s; the conversation starts over]\n",
                    *arg ? "a new system prompt" : "no system prompt");
        return ok < 0 ? -1 : 1;
    } else if (!strcmp(line, "/set")) fprintf(c->say, "/set system TEXT is the one setting\n");
    else
        fprintf(c->say, "unknown command %s, /help lists them (// sends a line beginning /)\n",
                line);
    return 1;
}

/* The conversation, message by message, until /bye or the end of input. 0 then; 1 when a
 * failure was said, -1 when not. */
static int chat_loop(struct chat *c)
{
    for (;;) {
        enum chat_in r = chat_input_read(&c->in);
        if (r != CHAT_IN_MSG) return 0;
        char *line = c->in.msg;
        /* a command: one line, '/' and a letter (or "/?"); "//..." sends "/..." */
        if (!c->in.block && line[0] == '/' &&
            ((line[1] >= 'a' && line[1] <= 'z') || (line[1] >= 'A' && line[1] <= 'Z') ||
             line[1] == '?')) {
            int k = command(c, line);
            if (k <= 0) return k;
            continue;
        }
        if (!c->in.block && line[0] == '/' && line[1] == '/') line++;
        if (c->in.tty && !line[0]) continue; /* Enter alone at a terminal sends nothing */
        if (c->n_msgs + 2 > MAX_TURNS) {
            restart(c, NULL);
            nb_sequence_rewind(c->seq, 0);
        }
        int fits = fits_alone(c, line);
        if (fits < 0) return -1;
        if (fits == 0) continue;
        enum nb_status st = turn(c, line);
        if (st == NB_ERR_NOMEM) return 1;
        if (st) return -1;
    }
}

int cmd_chat(int argc, char **argv)
{
    const char *cmd = "chat", *model_path = getenv("NIBBLE_MODEL"), *system = NULL;
    const char *tpl_name = NULL, *tpl_file = NULL, *path_name = NULL, *priority = NULL;
    struct app_grammar_opts gram = {0};
    struct nb_grammar *grammar = NULL;
    char *tpl_src = NULL;
    struct app_shift_opts so = {.keep = -1};
    struct chat c = {.n_predict = 256, .so = &so};
    int rc = 1, no_cache = 0, conversation = 0;
    char loaded[4096];
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct nb_model *model = NULL;
    struct nb_tokenizer *tok = NULL;
    const struct arg_opt opts[] = {
        OPTS_MODEL(&model_path, &path_name, &priority, &no_cache),
        OPT_STR("--system|-sys|--system-prompt", &system),
        OPT_STR("--chat-template", &tpl_name),
        OPT_STR("--chat-template-file", &tpl_file),
        OPT_INT("-n|--predict|--n-predict", &c.n_predict, -1, 1 << 20),
        /* llama-cli's conversation mode, which chat always is */
        OPT_FLAG("-cnv|--conversation|-i|--interactive|-if|--interactive-first", &conversation),
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
    c.bos_id = info.bos_id;
    if (system && *system && !(c.system = strdup(system))) goto fail;
    if (c.system) c.msgs[c.n_msgs++] = (struct nb_chat_msg){"system", c.system};
    c.base_msgs = c.n_msgs;
    /* The context is fixed here (the library's default when -c is not given) so that
     * each turn can be checked against it before it runs. */
    cp.n_ctx = app_ctx_size(&info, cp.n_ctx);
    if (!app_context_fits(cmd, model, &cp)) goto done;
    int started = start_chat(&c, model, &cp);
    if (started <= 0) {
        if (started < 0) goto fail;
        goto done;
    }
    if (nb_sampler_init(&c.sampler, &sp, info.n_vocab) != NB_OK) goto fail;
    if (!app_grammar_open(cmd, &gram, tok, info.n_vocab, &grammar)) goto done;
    c.grammar = grammar;
    chat_input_open(&c.in);
    c.say = c.in.tty ? stdout : stderr;
    fprintf(stderr, "nibble chat: %s, template %s; /help lists the commands, /bye quits\n",
            model_path, tpl_kind);
    int looped = chat_loop(&c);
    chat_input_close(&c.in);
    if (looped < 0) goto fail;
    rc = looped;
    goto done;
fail:
    fprintf(stderr, "nibble chat: %s\n", nb_last_error());
    rc = 1;
done:
    for (int i = 0; i < MAX_TURNS; i++) free(c.owned[i]);
    free(c.system);
    free(tpl_src);
    nb_sequence_free(c.seq);
    nb_sampler_free(c.sampler);
    nb_grammar_free(grammar);
    nb_ctx_free(c.ctx);
    nb_tokenizer_free(tok);
    nb_model_free(model);
    return rc;
}
