/* nibble serve — an OpenAI-compatible HTTP server over one model (docs/serve.md).
 * This file reads the options, opens the model as nibble run does and hands both to
 * nb_server_*; SIGTERM and SIGINT drain the server and end it with status 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/auto_path.h"
#include "app/commands.h"
#include "app/env.h"
#include "app/log.h"
#include "app/memory.h"
#include "app/text.h"
#include "nibble.h"
#include "nibble_server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nibble serve -m MODEL [options]\n"
            "\n"
            "Serves MODEL over HTTP with OpenAI's API: POST /v1/chat/completions,\n"
            "POST /v1/completions, GET /v1/models, GET /health, GET /metrics (docs/serve.md).\n"
            "Requests are decoded together, one batched step for all (continuous batching).\n"
            "\n"
            "  -m, --model PATH        model, as for nibble run (default: $NIBBLE_MODEL)\n"
            "      --path P, --priority P, --no-cache\n"
            "                          the weight path, as for nibble run\n"
            "      --host H            address to listen on (default 127.0.0.1: this machine\n"
            "                          only; 0.0.0.0 for every interface)\n"
            "      --port N            port (default 8080; 0: any free one, printed)\n"
            "  -np, --parallel N       requests decoded together (slots; default 4)\n"
            "  -c, --ctx-size N        context of each slot in tokens (default: min(model, 4096))\n"
            "  -t, --threads N         threads (default: all cores)\n"
            "  -b, --batch-size N      tokens per step: decodes plus a prefill chunk (default 512)\n"
            "      --kv-type T         KV cache type: f16 (default), f32, bf16, q8_0\n"
            "  -n, --n-predict N       tokens a request without max_tokens gets at most\n"
            "                          (default -1: until its context is full)\n"
            "      --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,\n"
            "      --presence-penalty, --frequency-penalty,\n"
            "  -s, --seed              sampling defaults for the fields a request omits, as for\n"
            "                          nibble run (default greedy)\n"
            "      --chat-template NAME  chatml, qwen3, llama3, llama2, gemma (default: the\n"
            "                          model's own, else chatml)\n"
            "      --chat-template-file F  render chat requests with the Jinja template in F\n"
            "                          (default: the model's own when it parses; see\n"
            "                          docs/chat-templates.md)\n"
            "      --reasoning-format F  deepseek (default; auto is the same): a thinking\n"
            "                          template's <think>...</think> goes to the message's\n"
            "                          reasoning_content; none: it stays in the content\n"
            "      --alias NAME        the model id /v1/models shows (default: the file's name)\n"
            "      --api-key KEY       require 'Authorization: Bearer KEY' (default:\n"
            "                          $NIBBLE_API_KEY; none when neither is set)\n"
            "      --max-body BYTES    larger request bodies get 413 (default 1048576)\n"
            "      --timeout S         a request waiting or running longer ends (default 600)\n"
            "      --queue N           requests waiting for a slot at most; more get 503\n"
            "                          with Retry-After (default 64)\n"
            "      --drain S           on SIGTERM/SIGINT, running requests get S seconds to\n"
            "                          finish (default 30)\n"
            "      --log-disable       no line per request on stderr (method, path, status,\n"
            "                          time, client, tokens: logged by default)\n"
            "      --read-timeout S    a connection must send its whole request within S\n"
            "                          seconds of opening (or of its previous request's end),\n"
            "                          else it is closed: slow clients (default 10; 0: none)\n"
            "      --max-conn-per-ip N open connections from one address at most (default\n"
            "                          512 of 1024 in all; 0: no limit)\n"
            "      --no-prefix-cache   prefill every prompt whole (default: a prompt that starts\n"
            "                          like a cached sequence reuses its KV)\n"
            "      --lookup N          prompt-lookup speculative decoding: up to N draft\n"
            "                          tokens a step copied from a request's own prompt and\n"
            "                          output, verified in the batched step (0..16; default 0:\n"
            "                          off); the same tokens as without (docs/speculative.md)\n"
            "      --pooling P         how POST /v1/embeddings pools a text's hidden states:\n"
            "                          mean (default), last or cls (its first token)\n"
            "      --kv-tokens N       tokens the KV pool holds for all slots together (default\n"
            "                          0: slots x context); fewer: prompts wait for blocks, and a\n"
            "                          request that finds none mid-generation ends ('length')\n"
            "Every --option VALUE may also be written --option=VALUE.\n");
}

static struct nb_server *g_server;

static void on_signal(int sig)
{
    (void)sig;
    nb_server_stop(g_server); /* async-signal-safe */
}

/* The model's name for /v1/models: its file or folder name. */
static const char *base_name(const char *path, char *buf, size_t size)
{
    snprintf(buf, size, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    const char *slash = strrchr(buf, '/');
    return slash ? slash + 1 : buf;
}

/* A request's log line (the server's, one per request) on stderr. */
static void log_line(const char *line, void *user)
{
    (void)user;
    fprintf(stderr, "nibble serve: %s\n", line);
}

/* --log-format json: the request's fields apart (as vLLM's and llama-server's are
 * parsed), beside the text line as "msg". */
static void log_fields(const struct nb_server_request_info *r, void *user)
{
    (void)user;
    char f[2048], e[6 * 96 + 1];
    size_t k = 0;
#define STR(key, v)                                                                      \
    do {                                                                                 \
        if (!(v)) {                                                                      \
            k += (size_t)snprintf(f + k, sizeof f - k, ",\"" key "\":null");             \
        } else {                                                                         \
            size_t n_ = strlen(v);                                                       \
            e[app_json_escape(e, v, n_ < 96 ? n_ : 96)] = '\0';                           \
            k += (size_t)snprintf(f + k, sizeof f - k, ",\"" key "\":\"%s\"", e);        \
        }                                                                                \
    } while (0)
    k += (size_t)snprintf(f + k, sizeof f - k, ",\"event\":\"request\"");
    STR("method", r->method);
    STR("path", r->path);
    k += (size_t)snprintf(f + k, sizeof f - k, ",\"status\":%d,\"seconds\":%.3f", r->status,
                          r->seconds);
    STR("client", r->client);
    STR("id", r->id);
    if (r->prompt_tokens >= 0)
        k += (size_t)snprintf(f + k, sizeof f - k,
                              ",\"prompt_tokens\":%d,\"completion_tokens\":%d,\"n\":%d",
                              r->prompt_tokens, r->completion_tokens, r->n_choices);
    STR("finish", r->finish);
    STR("termination", r->termination);
#undef STR
    app_log_fields("serve", f, "%s", r->line);
}

/* What the command line asks for. */
struct serve_args {
    const char *model_path, *path_name, *priority, *alias, *api_key, *template_file;
    const char *pooling; /* of /v1/embeddings */
    int no_cache, log_disable;
    struct nb_server_params sp;
    struct nb_sampler_params sampler; /* sp.sampler points here */
};

/* --max-body BYTES into *max_body: 0 (reported) when it is not a number in 1..2^34. */
static int parse_max_body(const char *arg, int64_t *max_body)
{
    uint64_t v;
    if (!arg_u64("serve", "--max-body", arg, &v)) return 0;
    if (v < 1 || v > ((uint64_t)1 << 34)) {
        fprintf(stderr, "nibble serve: --max-body: '%s' is not in 1..17179869184\n", arg);
        return 0;
    }
    *max_body = (int64_t)v;
    return 1;
}

/* Parse argv into a: 1 to go on, 0 when done (help printed: *rc 0), -1 on an error. */
static int parse_args(int argc, char **argv, struct serve_args *a, int *rc)
{
    struct nb_server_params *sp = &a->sp;
    const char *max_body_arg = NULL, *reasoning = "deepseek";
    float timeout = (float)sp->timeout_s, drain = (float)sp->drain_s;
    float read_timeout = (float)sp->read_timeout_s;
    int no_prefix_cache = 0, kv_tokens = 0;
    const struct arg_opt opts[] = {
        OPTS_MODEL(&a->model_path, &a->path_name, &a->priority, &a->no_cache),
        OPTS_CONTEXT(&sp->ctx, 16),
        OPTS_SAMPLER(&a->sampler),
        OPT_INT("-n|--predict|--n-predict", &sp->n_predict, -1, 1 << 24),
        OPT_STR("--host", &sp->host),
        OPT_INT("--port", &sp->port, 0, 65535),
        OPT_INT("-np|--parallel", &sp->n_slots, 1, 256),
        OPT_STR("--chat-template", &sp->chat_template),
        OPT_STR("--chat-template-file", &a->template_file),
        OPT_CHOICE("--reasoning-format", &reasoning, "deepseek|auto|none"),
        OPT_STR("-a|--alias", &a->alias),
        OPT_STR("--api-key", &a->api_key),
        OPT_STR("--max-body", &max_body_arg),
        OPT_FLOAT("--timeout", &timeout, 0.001, 1e7),
        OPT_INT("--queue", &sp->max_queue, 0, 1 << 20),
        OPT_FLOAT("--drain", &drain, 0, 1e7),
        OPT_FLOAT("--read-timeout", &read_timeout, 0, 1e7),
        OPT_INT("--max-conn-per-ip", &sp->max_conn_per_ip, 0, 1 << 20),
        OPT_FLAG("--no-prefix-cache", &no_prefix_cache),
        OPT_INT("--kv-tokens", &kv_tokens, 0, 1 << 30),
        OPT_INT("--lookup", &sp->lookup, 0, 16),
        OPT_CHOICE("--pooling", &a->pooling, "mean|last|cls"),
        OPT_FLAG("--log-disable", &a->log_disable),
        OPT_END};
    int r = arg_parse("serve", opts, argc, argv, usage);
    if (r == 0) *rc = 0;
    if (r <= 0) return r < 0 ? -1 : 0;
    if (max_body_arg && !parse_max_body(max_body_arg, &sp->max_body)) return -1;
    if (a->api_key && !*a->api_key) { /* an empty key would serve everyone: say so, do not */
        fprintf(stderr, "nibble serve: --api-key is empty: give a key, or leave the option "
                        "out to serve without one\n");
        return -1;
    }
    sp->timeout_s = timeout;
    sp->reasoning_inline = !strcmp(reasoning, "none");
    sp->drain_s = drain;
    sp->read_timeout_s = read_timeout;
    sp->prefix_cache = !no_prefix_cache;
    if (!a->log_disable) sp->log_request = log_line;
    sp->ctx.n_ctx_total = kv_tokens;
    if (!a->model_path) {
        fprintf(stderr, "nibble serve: no model: give one with -m MODEL (or set NIBBLE_MODEL)\n");
        return -1;
    }
    if (sp->chat_template && nb_chat_template_resolve(NULL, sp->chat_template, NULL) != NB_OK) {
        fprintf(stderr, "nibble serve: --chat-template: %s\n", nb_last_error());
        return -1;
    }
    return 1;
}

/* The model and its tokenizer, opened as nibble run does, and the context of a slot
 * (*cp, also into a->sp.ctx.n_ctx): 0 on an error reported. */
static int open_model(struct serve_args *a, struct nb_model **model, struct nb_tokenizer **tok,
                      struct nb_model_info *info, struct nb_ctx_params *cp)
{
    const char *cmd = "serve";
    char loaded[4096];
    if (!app_open_model(cmd, a->model_path, a->path_name, a->priority, a->sp.ctx.n_threads,
                        !a->no_cache, model, loaded, sizeof loaded))
        return 0;
    if (nb_tokenizer_from_model(tok, *model) != NB_OK) {
        fprintf(stderr, "nibble serve: %s: the server needs the model's tokenizer: %s\n",
                a->model_path, nb_last_error());
        return 0;
    }
    nb_model_get_info(*model, info);
    *cp = a->sp.ctx;
    cp->n_ctx = a->sp.ctx.n_ctx > 0 ? a->sp.ctx.n_ctx
                : info->n_ctx_train > 0 && info->n_ctx_train < 4096 ? info->n_ctx_train : 4096;
    cp->n_seq = a->sp.n_slots;
    if (!app_context_fits(cmd, *model, cp)) return 0;
    a->sp.ctx.n_ctx = cp->n_ctx;
    return 1;
}

/* Serve until SIGTERM or SIGINT drains the server: 0 then, 1 on an error (reported). */
static int run_server(struct nb_server *srv, const struct serve_args *a,
                      const struct nb_tokenizer *tok, const struct nb_model_info *info, int n_ctx)
{
    const struct nb_server_params *sp = &a->sp;
    g_server = srv;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *kind = NULL;
    if (nb_chat_template_choose(tok, sp->chat_template, &kind, NULL) != NB_OK) kind = "chatml";
    fprintf(stderr, "nibble serve: %s: %s, %d slots of %d tokens, chat template %s%s%s\n",
            sp->model_name, info->arch, sp->n_slots, n_ctx,
            a->template_file ? a->template_file : kind, a->template_file ? " (Jinja)" : "",
            a->api_key && *a->api_key ? ", API key required" : "");
    /* the line scripts wait for (the port is the one bound when --port 0) */
    fprintf(stderr, "nibble serve: listening on http://%s:%d\n", sp->host, nb_server_port(srv));
    fflush(stderr);
    if (nb_server_run(srv) != NB_OK) {
        fprintf(stderr, "nibble serve: %s\n", nb_last_error());
        return 1;
    }
    fprintf(stderr, "nibble serve: stopped\n");
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    char *template_src = NULL;
    char name_buf[4096];
    int rc = 1;
    struct serve_args a = {.model_path = getenv("NIBBLE_MODEL"), .api_key = app_env_api_key(),
                           .pooling = "mean", .sp = nb_server_default_params(),
                           .sampler = nb_sampler_default_params()};
    struct nb_model *model = NULL;
    struct nb_tokenizer *tok = NULL;
    struct nb_server *srv = NULL;
    if (parse_args(argc, argv, &a, &rc) <= 0) return rc;
    a.sp.sampler = &a.sampler;

    if (a.template_file) {
        size_t n = 0;
        if (!app_read_all("serve", "--chat-template-file", a.template_file, (size_t)16 << 20,
                          &template_src, &n))
            return 1;
        a.sp.chat_template_source = template_src;
    }

    struct nb_model_info info;
    struct nb_ctx_params cp;
    if (!open_model(&a, &model, &tok, &info, &cp)) goto done;
    a.sp.model = model;
    a.sp.tok = tok;
    a.sp.api_key = a.api_key;
    a.sp.model_name = a.alias ? a.alias : base_name(a.model_path, name_buf, sizeof name_buf);
    if (nb_server_init(&srv, &a.sp) != NB_OK) {
        fprintf(stderr, "nibble serve: %s\n", nb_last_error());
        goto done;
    }
    nb_server_set_pooling(srv, (enum nb_pooling)nb_pooling_parse(a.pooling));
    if (a.sp.log_request && app_log_json()) nb_server_set_request_log(srv, log_fields, NULL);
    rc = run_server(srv, &a, tok, &info, cp.n_ctx);
done:
    g_server = NULL;
    nb_server_free(srv);
    nb_tokenizer_free(tok);
    nb_model_free(model);
    free(template_src);
    return rc;
}
