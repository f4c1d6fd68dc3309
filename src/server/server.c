/* server/server.c — nibble.h's nb_server_*: parameters, the context, start and stop.
 *
 * Stopping: nb_server_stop (async-signal-safe) writes a byte to a pipe; a watcher thread
 * reads it, marks the server stopping, stops accepting connections and wakes the engine,
 * which answers its queue 503 and lets the running requests finish (drain_s at most).
 * nb_server_run then stops the daemon (its connection threads end with their requests).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/params.h"
#include "server/server.h"
#include "nibble_server.h"

struct nb_server_params nb_server_default_params(void)
{
    struct nb_server_params p = {0};
    p.size = sizeof p;
    p.model_name = "nibble";
    p.host = "127.0.0.1";
    p.port = 8080;
    p.n_slots = 4;
    p.ctx = nb_ctx_default_params();
    p.n_predict = -1;
    p.max_body = 1 << 20;
    p.timeout_s = 600;
    p.max_queue = 64;
    p.max_connections = 1024;
    p.drain_s = 30;
    p.read_timeout_s = 10;
    p.max_conn_per_ip = 512;
    p.prefix_cache = 1;
    return p;
}

static const double k_ttft_bounds[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double k_itl_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};

/* The built-in family: nibble chat's rule (nb_chat_template_pick): the one named, else the
 * tokenizer's own, else ChatML, said once (not when the model's Jinja template runs:
 * then it is only a fallback). */
static enum nb_status pick_template(struct nb_server *s)
{
    const char *name = s->p.chat_template, *note = NULL;
    enum nb_status st = nb_chat_template_pick(
        name, name ? NULL : nb_tokenizer_chat_template(s->m.tok), &s->m.tpl, &note);
    if (st == NB_OK && note && !s->m.jinja) NB_LOGW("serve: %s", note);
    return st;
}

/* The Jinja template chat requests render through (s->m.jinja): the source given
 * (--chat-template-file; an error if it does not parse), else the model's own unless a
 * built-in family was named; one that does not parse leaves the built-in family. */
static enum nb_status pick_jinja(struct nb_server *s)
{
    const char *src = s->p.chat_template_source;
    if (src) {
        enum nb_status st = nb_jinja_parse(src, strlen(src), &s->m.jinja);
        if (st) return nb_wrap_error(st, "serve: the chat template file: ");
        NB_LOGI("serve: chat requests render the template file given");
        return NB_OK;
    }
    if (s->p.chat_template) return NB_OK;
    const char *own = nb_tokenizer_chat_template(s->m.tok);
    if (!own) return NB_OK;
    if (nb_jinja_parse(own, strlen(own), &s->m.jinja) != NB_OK) {
        NB_LOGW("serve: the model's chat template does not run here (%s): chat requests use "
                "a built-in template",
                nb_last_error());
        s->m.jinja = NULL;
        return NB_OK;
    }
    NB_LOGI("serve: chat requests render the model's own chat template");
    return NB_OK;
}

static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= size) n = size - 1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

/* What the requests read of the model: its tokenizer, chat template (Jinja or a built-in
 * family), whether it reasons in <think>, bos/eos texts, the vocabulary's bytes. */
static enum nb_status model_side(struct nb_server *s)
{
    enum nb_status st;
    const struct nb_server_params *p = &s->p;
    struct nb_model_info info;
    nb_model_get_info(p->model, &info);
    s->m.tok = p->tok;
    if ((st = pick_jinja(s))) return st;
    if ((st = pick_template(s))) return st;
    {
        /* a template that thinks in <think>: its answers' reasoning split off */
        const char *src = !s->m.jinja                 ? NULL
                          : s->p.chat_template_source ? s->p.chat_template_source
                                                      : nb_tokenizer_chat_template(s->m.tok);
        s->m.reasoning = !s->p.reasoning_inline &&
                         (src ? strstr(src, "<think>") != NULL : s->m.tpl.kind == NB_CHAT_QWEN3);
    }
    int bos = nb_tokenizer_bos(p->tok), eos = nb_tokenizer_eos(p->tok);
    s->m.bos_text = bos >= 0 ? nb_token_piece(p->tok, bos) : "";
    s->m.eos_text = eos >= 0 ? nb_token_piece(p->tok, eos) : "";
    s->m.n_vocab = info.n_vocab;
    s->m.sp = nb_sampler_default_params();
    if ((st = nb_params_in(&s->m.sp, sizeof s->m.sp, p->sampler, "serve: sampler params")))
        return st;
    s->p.sampler = &s->m.sp;
    if (nb_tokenizer_n_vocab(p->tok) > info.n_vocab)
        return nb_set_error(NB_ERR_INVALID_ARG, "serve: the tokenizer has %d tokens, the model %d",
                            nb_tokenizer_n_vocab(p->tok), info.n_vocab);
    if ((st = nb_vocab_bytes_init(&s->vb, p->tok, info.n_vocab))) return st;
    s->m.vb = &s->vb;
    return NB_OK;
}

enum nb_status nb_server_init(struct nb_server **out, const struct nb_server_params *params)
{
    enum nb_status st = NB_OK;
    struct nb_server *s = calloc(1, sizeof *s);
    *out = NULL;
    if (!s) return nb_set_error(NB_ERR_NOMEM, "serve: out of memory");
    s->p = nb_server_default_params();
    s->listen_fd = -1;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->engine_cv, NULL);
    if ((st = nb_params_in(&s->p, sizeof s->p, params, "serve params"))) goto fail;
    const struct nb_server_params *p = &s->p;
    if (!p->model || !p->tok) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "serve: a model and its tokenizer are needed");
        goto fail;
    }
    if (p->n_slots < 1 || p->n_slots > 256 || p->port < 0 || p->port > 65535 || p->max_body < 1 ||
        !(p->timeout_s > 0) || p->max_queue < 0 || p->max_connections < 1 || p->drain_s < 0 ||
        !(p->read_timeout_s >= 0) || p->max_conn_per_ip < 0) {
        st = nb_set_error(NB_ERR_INVALID_ARG,
                          "serve: a parameter is out of range (slots "
                          "1..256: %d, port 0..65535: %d, max_body >= 1, timeout > 0, "
                          "max_queue >= 0, max_connections >= 1, drain >= 0, read_timeout >= 0, "
                          "max_conn_per_ip >= 0)",
                          p->n_slots, p->port);
        goto fail;
    }
    if (p->lookup < 0 || p->lookup > SRV_MAX_DRAFT) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "serve: lookup is %d: it must be 0..%d", p->lookup,
                          SRV_MAX_DRAFT);
        goto fail;
    }
    if (p->api_key && strlen(p->api_key) >= sizeof s->api_key) {
        st = nb_set_error(NB_ERR_INVALID_ARG, "serve: the API key is longer than %zu bytes",
                          sizeof s->api_key - 1);
        goto fail;
    }
    copy_str(s->model_name, sizeof s->model_name, p->model_name ? p->model_name : "nibble");
    s->created = (int64_t)time(NULL);
    copy_str(s->host, sizeof s->host, p->host ? p->host : "127.0.0.1");
    copy_str(s->api_key, sizeof s->api_key, p->api_key);
    s->p.model_name = s->model_name;
    s->p.host = s->host;
    s->p.api_key = s->api_key;

    if ((st = model_side(s))) goto fail;

    struct nb_ctx_params cp = p->ctx;
    cp.n_seq = p->n_slots;
    /* 0: every slot can fill its context, a step never runs out of blocks; fewer: the
     * engine lets prompts wait for blocks (sched.c make_room) */
    cp.n_ctx_total = p->ctx.n_ctx_total > 0 ? p->ctx.n_ctx_total : 0;
    if ((st = nb_ctx_init(&s->ctx, p->model, &cp))) goto fail;
    s->n_ctx = nb_ctx_n_ctx(s->ctx);
    if (cp.n_ctx_total > 0 && cp.n_ctx_total < s->n_ctx) {
        st = nb_set_error(NB_ERR_INVALID_ARG,
                          "serve: a KV pool of %lld tokens cannot hold one full context (%d): "
                          "give at least that",
                          (long long)cp.n_ctx_total, s->n_ctx);
        goto fail;
    }
    s->m.n_ctx = s->n_ctx;
    struct nb_model_info mi;
    nb_model_get_info(p->model, &mi);
    s->n_embd = s->m.n_embd = mi.n_embd;
    s->p.ctx.n_batch = nb_ctx_n_batch(s->ctx);
    if (!(s->slots = calloc((size_t)p->n_slots, sizeof *s->slots))) {
        st = nb_set_error(NB_ERR_NOMEM, "serve: out of memory");
        goto fail;
    }
    srv_hist_init(&s->met.ttft, k_ttft_bounds, sizeof k_ttft_bounds / sizeof k_ttft_bounds[0]);
    srv_hist_init(&s->met.itl, k_itl_bounds, sizeof k_itl_bounds / sizeof k_itl_bounds[0]);
    nb_ctx_kv_usage(s->ctx, &s->met.kv);
    if (pipe2(s->stop_pipe, O_CLOEXEC)) {
        st = nb_set_error(NB_ERR_IO, "serve: pipe: %s", strerror(errno));
        goto fail;
    }
    s->accepting = 1;
    if ((st = srv_http_start(s))) goto fail;
    *out = s;
    return NB_OK;
fail:
    nb_server_free(s);
    return st;
}

int nb_server_port(const struct nb_server *s)
{
    return s ? s->port : 0;
}

enum nb_status nb_server_set_pooling(struct nb_server *s, enum nb_pooling pooling)
{
    if (!s || (int)pooling < NB_POOLING_MEAN || (int)pooling > NB_POOLING_CLS)
        return nb_set_error(NB_ERR_INVALID_ARG, "serve: unknown pooling %d", (int)pooling);
    s->pooling = pooling; /* read by the engine, which has not started (before run) */
    return NB_OK;
}

enum nb_status nb_server_set_request_log(struct nb_server *s,
                                         void (*cb)(const struct nb_server_request_info *r,
                                                    void *user),
                                         void *user)
{
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "serve: no server");
    s->log_info = cb; /* read by the HTTP threads: set before requests come (before run) */
    s->log_info_user = user;
    return NB_OK;
}

/* Waits for nb_server_stop's byte, then starts the drain. The daemon keeps accepting
 * while it drains: a new request gets a prompt 503 (server_shutting_down) and /health
 * says "shutting down", where a quiesced listener left new connections waiting in the
 * kernel's backlog until the reset at the end. */
static void *watcher(void *arg)
{
    struct nb_server *s = arg;
    char c;
    while (read(s->stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->engine_cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

enum nb_status nb_server_run(struct nb_server *s)
{
    if (!s) return nb_set_error(NB_ERR_INVALID_ARG, "serve: no server");
    /* the connection threads must not take the signals the program handles */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&s->watcher, NULL, watcher, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) return nb_set_error(NB_ERR_INTERNAL, "serve: cannot start a thread: %s", strerror(rc));
    s->watcher_started = 1;
    enum nb_status st = srv_engine_run(s);
    nb_server_stop(s); /* an engine failure stops the watcher too */
    pthread_join(s->watcher, NULL);
    s->watcher_started = 0;
    srv_engine_abort(s); /* what an engine failure left */
    /* every job is done: let the connections send the rest of their answers (the end of
     * a stream) before the daemon closes them, 5 s at most */
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&s->mu);
        int n = s->n_answering;
        pthread_mutex_unlock(&s->mu);
        if (n == 0) break;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    srv_http_stop(s);
    return st;
}

void nb_server_stop(struct nb_server *s)
{
    if (!s || s->stop_pipe[1] < 0) return;
    int saved = errno;
    ssize_t w = write(s->stop_pipe[1], "x", 1);
    (void)w;
    errno = saved;
}

void nb_server_free(struct nb_server *s)
{
    if (!s) return;
    if (s->watcher_started) { /* nb_server_run is not running here: it joins its own */
        nb_server_stop(s);
        pthread_join(s->watcher, NULL);
    }
    if (s->mhd) {
        srv_engine_abort(s);
        srv_http_quiesce(s);
        srv_http_stop(s);
    }
    srv_engine_abort(s);
    nb_ctx_free(s->ctx);
    nb_vocab_bytes_free(&s->vb);
    free(s->slots);
    nb_jinja_free(s->m.jinja);
    if (s->stop_pipe[0] >= 0) close(s->stop_pipe[0]);
    if (s->stop_pipe[1] >= 0) close(s->stop_pipe[1]);
    pthread_cond_destroy(&s->engine_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
