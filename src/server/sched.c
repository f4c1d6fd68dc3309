/* server/sched.c — the engine: continuous batching over the sequences of one context.
 *
 * Each slot is one sequence of the context (nb_ctx_params.n_seq = n_slots). A step:
 *   1. under the lock: drop what was cancelled or ran out of time, answer the queue 503
 *      when stopping, admit queued jobs into free slots (the free slot whose cached tokens
 *      share the longest prefix with the prompt);
 *   2. one batch: the last token of every decoding job (one each), then prompt tokens of
 *      jobs still prefilling, at most a chunk's budget (n_batch minus the decoders) in all,
 *      so a long prompt stalls the running streams for one chunk at most;
 *   3. one nb_decode over it: the weights are read once for every stream;
 *   4. per output row, the job's own sampler; its text through the detokenizer and the
 *      stop strings; end of generation, max_tokens and a full context finish it;
 *   5. under the lock: the new text appended, the waiting connections signalled.
 * An embeddings job (embed.c) takes a slot too but no part in the batch: before each step
 * it runs one of its inputs alone (nb_embed on its slot's sequence: run_embeds).
 * Nothing but this thread touches the context; KV usage is copied out for /metrics.
 *
 * Prefix sharing (prefix_cache, as llama-server's cache_prompt): a slot keeps its
 * sequence's KV when its job ends (cleared lazily, when it is reused), and the engine
 * knows the token at every cached position of every slot. When a job starts its prefill,
 * its sequence becomes the longest prefix of its prompt that some slot holds: its own
 * slot's cache truncated to it, or, when another slot (running or free) holds one longer
 * by a block or more, a fork of that slot (nb_ctx_fork_seq: the blocks are shared, copied
 * on write), and only the rest is prefilled. At least the prompt's last token is always
 * run: it gives the logits of the first generated token. A job whose prompt shares a
 * longer prefix with the prompt of a job still prefilling it waits for those steps, so N
 * requests with one system prompt arriving together prefill it once, not N times.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/timer.h"
#include "runtime/sequence.h"
#include "server/server.h"

/* ---------------------------------------------------------------- jobs */

/* A job's own state for its request (j->req set): its sampler, detokenizer and stop
 * matcher, its place in the grammars. 0, or -1 when out of memory. */
static int job_setup(struct nb_server *s, struct srv_job *j)
{
    struct nb_text_out_params tp = {sizeof tp, srv_request_parses_tools(&j->req), 0,
                                    (const char *const *)j->req.stops, j->req.n_stops};
    if (nb_sampler_init(&j->sampler, &j->req.sp, s->m.n_vocab) != NB_OK ||
        nb_sampler_set_logit_bias(j->sampler, j->req.bias_id, j->req.bias, j->req.n_bias) ||
        nb_text_out_init(&j->out, s->m.tok, &tp) != NB_OK)
        return -1;
    if (j->req.grammar) nb_cons_start(j->req.grammar, &j->cons);
    if (j->req.gbnf) {
        if (!(j->gbs = malloc(sizeof *j->gbs))) return -1;
        nb_gb_start(j->req.gbnf, j->gbs);
    }
    if (!j->req.grammar && j->req.tool_choice == SRV_TC_AUTO && srv_request_parses_tools(&j->req)) {
        if (!(j->auto_g = calloc(1, sizeof *j->auto_g)) ||
            srv_tool_grammar_schema(j->auto_g, j->req.tool_format, j->req.tools,
                                    (const struct nb_schema *const *)j->req.tool_schemas,
                                    j->req.n_tools))
            return -1;
    }
    return 0;
}

static struct srv_job *job_alloc(void)
{
    struct srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->refs = 1;
    j->fd = -1;
    j->slot = -1;
    j->max_tokens = -1; /* set when its prefill starts */
    j->state = JOB_QUEUED;
    return j;
}

/* The request's number (its id, and its seed when it has none given). */
static uint64_t next_number(struct nb_server *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t k = ++s->n_jobs;
    pthread_mutex_unlock(&s->mu);
    return k;
}

struct srv_job *srv_job_new(struct nb_server *s, struct srv_request *r)
{
    struct srv_job *j = job_alloc();
    if (!j) return NULL;
    j->req = *r;
    memset(r, 0, sizeof *r);
    uint64_t k = next_number(s);
    snprintf(j->id, sizeof j->id, "%s-%llx%06llx",
             j->req.kind == SRV_CHAT ? "chatcmpl" : j->req.kind == SRV_EMBED ? "embd" : "cmpl",
             (unsigned long long)time(NULL), (unsigned long long)k);
    j->created = (int64_t)time(NULL);
    /* without a seed, each request its own: the server's seed and the request's number */
    if (!j->req.seed_given) j->req.sp.seed = s->m.sp.seed + k * 0x9e3779b97f4a7c15ull;
    if (job_setup(s, j)) {
        srv_job_release(s, j);
        return NULL;
    }
    return j;
}

struct srv_job *srv_job_choice(struct nb_server *s, struct srv_job *first, int index)
{
    struct srv_job *j = job_alloc();
    if (!j) return NULL;
    j->req = first->req; /* shared: first outlives it (the reference taken here) */
    j->first = first;
    pthread_mutex_lock(&s->mu);
    first->refs++;
    pthread_mutex_unlock(&s->mu);
    memcpy(j->id, first->id, sizeof j->id);
    j->created = first->created;
    j->index = index;
    /* choice i of a seeded request samples as the request with seed + i would */
    uint64_t k = next_number(s);
    j->req.sp.seed = j->req.seed_given ? first->req.sp.seed + (uint64_t)index
                                       : s->m.sp.seed + k * 0x9e3779b97f4a7c15ull;
    if (job_setup(s, j)) {
        pthread_mutex_lock(&s->mu);
        srv_job_release(s, j);
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    return j;
}

/* What a job holds of its own (its request and itself are srv_job_release's). */
static void job_free(struct srv_job *j)
{
    nb_sampler_free(j->sampler);
    nb_text_out_free(j->out);
    nb_gram_free(j->auto_g);
    free(j->auto_g);
    free(j->gbs);
    free(j->text);
    free(j->lps);
    free(j->emb);
}

void srv_job_release(struct nb_server *s, struct srv_job *j)
{
    if (!j || --j->refs > 0) return;
    struct srv_job *first = j->first;
    job_free(j);
    if (!first) srv_request_free(&j->req);
    free(j);
    srv_job_release(s, first); /* a choice's job: its request's with the first */
}

static void job_done(struct nb_server *s, struct srv_job *j, const char *finish);

/* Under mu: the job has news (text, done, cancelled) for its connection. */
static void job_wake(struct srv_job *j)
{
    if (j->wake) j->wake(j->wake_arg);
}

/* Under mu, when the queue looks full: jobs whose client has gone count for nothing. Queued
 * ones leave the queue now; running ones are cancelled (the engine frees their slot at its
 * next step) and not counted. Without this a client that aborts keeps its place until the
 * waiting thread's next poll (200 ms), and a submit-and-abort loop is refused (issue 35
 * item 7). Returns the jobs that hold a place. */
/* Under mu: the queued jobs `leaves` picks leave the queue (done), the rest keep their order. */
static void sweep_queue(struct nb_server *s, int (*leaves)(struct srv_job *j, void *arg),
                        void *arg)
{
    struct srv_job **pp = &s->q_head, *last = NULL;
    while (*pp) {
        struct srv_job *j = *pp;
        if (!leaves(j, arg)) {
            last = j;
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        s->n_queued--;
        job_done(s, j, NULL);
    }
    s->q_tail = last;
}

static int client_gone(struct srv_job *j, void *arg)
{
    (void)arg;
    if (!j->cancel && srv_peer_gone(j->fd)) j->cancel = 1;
    return j->cancel;
}

static int live_jobs(struct nb_server *s)
{
    sweep_queue(s, client_gone, NULL);
    int n = s->n_queued;
    for (int i = 0; i < s->p.n_slots; i++) {
        struct srv_job *j = s->slots[i];
        if (!j) continue;
        if (!j->cancel && srv_peer_gone(j->fd)) {
            j->cancel = 1;
            pthread_cond_signal(&s->engine_cv);
        }
        n += !j->cancel;
    }
    return n;
}

int srv_submit(struct nb_server *s, struct srv_job *const *jobs, int n)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    const int limit = s->p.n_slots + s->p.max_queue;
    if (!s->accepting || s->stopping) {
        rc = -2;
    } else if (s->n_queued + s->n_running + n > limit && live_jobs(s) + n > limit) {
        /* every slot taken (or about to be, by those queued) and max_queue waiting: a
         * request's choices are all taken or none */
        rc = -1;
    } else {
        double now = nb_time_s();
        for (int i = 0; i < n; i++) {
            struct srv_job *j = jobs[i];
            j->t_submit = now;
            j->deadline = j->t_submit + s->p.timeout_s;
            j->refs++;
            j->next = NULL;
            if (s->q_tail)
                s->q_tail->next = j;
            else
                s->q_head = j;
            s->q_tail = j;
            s->n_queued++;
        }
        pthread_cond_signal(&s->engine_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---------------------------------------------------------------- finishing (under mu) */

static void append_text(struct srv_job *j, const char *t, size_t n)
{
    if (!n) return;
    if (j->text_len + n + 1 > j->text_cap) {
        size_t cap = j->text_cap ? j->text_cap : 256;
        while (cap < j->text_len + n + 1)
            cap *= 2;
        char *p = realloc(j->text, cap);
        if (!p) { /* out of memory: the job ends with an error */
            if (!j->err.status) srv_fail(&j->err, 500, NULL, NULL, "out of memory");
            return;
        }
        j->text = p;
        j->text_cap = cap;
    }
    memcpy(j->text + j->text_len, t, n);
    j->text_len += n;
    j->text[j->text_len] = '\0';
}

static void append_logprob(struct srv_job *j, const struct srv_logprob *l)
{
    if (j->n_lps == j->lps_cap) {
        int cap = j->lps_cap ? 2 * j->lps_cap : 64;
        struct srv_logprob *p = realloc(j->lps, sizeof *p * (size_t)cap);
        if (!p) {
            if (!j->err.status) srv_fail(&j->err, 500, NULL, NULL, "out of memory");
            return;
        }
        j->lps = p;
        j->lps_cap = cap;
    }
    j->lps[j->n_lps++] = *l;
}

/* The job leaves the engine: its sequence is cleared, its slot freed, the connection
 * woken; the engine's reference dropped. */
static void job_done(struct nb_server *s, struct srv_job *j, const char *finish)
{
    if (j->state == JOB_DONE) return;
    if (j->slot >= 0) {
        /* with prefix sharing the sequence stays cached for a later prompt that starts
         * like it (cleared when its slot is reused) */
        if (!s->p.prefix_cache) nb_ctx_clear_seq(s->ctx, j->slot);
        s->slots[j->slot] = NULL;
        s->n_running--;
        j->slot = -1;
    }
    if (!j->err.status) j->finish = finish;
    j->state = JOB_DONE;
    job_wake(j);
    srv_job_release(s, j);
}

/* n bytes of text into the step's buffer of the job's row (cut at cap: a row holds a
 * token's text and what the stop matcher held back, at most a few hundred bytes). */
static void put_text(char *buf, size_t *n, size_t cap, const char *t, size_t len)
{
    size_t k = len < cap - *n ? len : cap - *n;
    memcpy(buf + *n, t, k);
    *n += k;
}

/* What the detokenizer and the stop matcher still hold, at a finish that was no stop
 * string (as nibble run prints it at the end). */
static void flush_text(struct srv_job *j, char *buf, size_t *n, size_t cap)
{
    const char *t;
    size_t len;
    nb_text_out_flush(j->out, &t, &len);
    put_text(buf, n, cap, t, len);
}

void srv_logprob_of(const float *x, int n_vocab, int32_t tok, int n_top, struct srv_logprob *out)
{
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++)
        mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++)
        sum += exp((double)x[i] - mx);
    double lse = mx + log(sum);
    out->tok = tok;
    out->lp = (float)(x[tok] - lse);
    /* the n_top largest, best first (ties: the lower id), by insertion */
    if (n_top > SRV_MAX_TOP_LOGPROBS) n_top = SRV_MAX_TOP_LOGPROBS;
    int n = 0;
    for (int i = 0; i < n_vocab && n_top > 0; i++) {
        if (n == n_top && x[i] <= x[out->top_tok[n - 1]]) continue;
        int k = n < n_top ? n++ : n - 1;
        while (k > 0 && x[out->top_tok[k - 1]] < x[i]) {
            out->top_tok[k] = out->top_tok[k - 1];
            k--;
        }
        out->top_tok[k] = i;
    }
    out->n_top = n;
    for (int k = 0; k < n; k++)
        out->top_lp[k] = (float)(x[out->top_tok[k]] - lse);
}

/* ---------------------------------------------------------------- prefix sharing */

/* Each slot's sequence (engine only): the library's nb_sequence of context sequence i,
 * which keeps the tokens its cache holds (a finished job's stay, for the next prompt that
 * shares them) and puts, draws and settles each step (runtime/sequence.h). */
struct cache {
    struct nb_sequence **seq; /* [n_slots] */
    int block;        /* tokens of a KV block: a fork must save at least one */
    uint64_t *used;   /* [n_slots]: when the slot last took a job (least recently used first) */
    uint8_t *started; /* [n_slots]: its job has looked for its prefix and begun prefilling */
    uint64_t clock;
};

/* The tokens a and b have in common from the start, at most n. */
static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb, int n)
{
    int m = na < nb ? na : nb, i = 0;
    if (m > n) m = n;
    while (i < m && a[i] == b[i])
        i++;
    return i;
}

/* Of slot i's cached tokens, those that start job j's prompt (at most its n_prompt - 1). */
static int slot_prefix(const struct cache *c, int i, const struct srv_job *j)
{
    int n, held = nb_sequence_cached(c->seq[i]);
    const int32_t *ids = nb_sequence_ids(c->seq[i], &n);
    return common_prefix(ids, held < n ? held : n, j->req.prompt, j->req.n_prompt,
                         j->req.n_prompt - 1);
}

/* The free slot for job j: the one whose cache shares the longest prefix with its prompt
 * (ties and none: the least recently used); -1 when every slot runs. */
static int pick_slot(struct nb_server *s, const struct cache *c, const struct srv_job *j)
{
    int best = -1, best_n = -1;
    for (int i = 0; i < s->p.n_slots; i++) {
        if (s->slots[i]) continue;
        if (!s->p.prefix_cache) return i;
        int n = slot_prefix(c, i, j);
        if (n > best_n || (n == best_n && c->used[i] < c->used[best])) {
            best = i;
            best_n = n;
        }
    }
    return best;
}

/* At the start of job j's prefill: its sequence becomes the longest cached prefix of its
 * prompt (its own slot's, or a fork of another slot holding a block more) followed by the
 * rest of the prompt to run, j->n_past and j->n_cached that prefix's length. 1: wait
 * instead (a job still prefilling will hold a longer prefix after this step). Engine
 * thread, outside the lock: run[] are the running jobs. */
static int take_prefix(struct nb_server *s, struct cache *c, struct srv_job *j,
                       struct srv_job *const *run, int n_run)
{
    int me = j->slot, n = 0, src = -1;
    if (s->p.prefix_cache) {
        n = slot_prefix(c, me, j);
        int own = n;
        for (int i = 0; i < s->p.n_slots; i++) {
            if (i == me) continue;
            int m = slot_prefix(c, i, j);
            if (m > n && m - own >= c->block) {
                n = m;
                src = i;
            }
        }
        for (int k = 0; k < n_run; k++) {
            const struct srv_job *o = run[k];
            if (o == j || !c->started[o->slot]) continue;
            int will = common_prefix(o->req.prompt, o->req.n_prompt, j->req.prompt, j->req.n_prompt,
                                     j->req.n_prompt - 1);
            if (will >= n + c->block && nb_sequence_cached(c->seq[o->slot]) < will) return 1;
        }
    }
    struct nb_sequence *q = c->seq[me];
    if (src < 0 || nb_sequence_adopt(q, c->seq[src], n) != NB_OK)
        nb_sequence_rewind(q, src < 0 ? n : 0); /* its own prefix; a failed fork: none */
    int held;
    nb_sequence_ids(q, &held);
    /* the rest of the prompt (room reserved for a full context: cannot fail) */
    if (nb_sequence_append(q, j->req.prompt + held, j->req.n_prompt - held) != NB_OK)
        srv_fail(&j->err, 500, NULL, NULL, "serve: %s", nb_last_error());
    j->n_past = j->n_cached = nb_sequence_cached(q);
    c->started[me] = 1;
    return 0;
}

/* ---------------------------------------------------------------- a short KV pool */

/* With a KV pool smaller than slots x context (--kv-tokens), a step found no blocks for
 * its batch (nb_decode took none and ran nothing). The prefill of the failed step is
 * undone, then room is made for the next try, the least disruptive way first: a free
 * slot's cached sequence is dropped (the least recently used); else the prefill chunk is
 * halved (*cap; 0: decoders only), so a prompt waits for blocks; else the youngest
 * decoding job is ended ("length"); else the youngest prefilling job gives its blocks back
 * and starts its prefill again later. Engine thread, under the lock. */
static void make_room(struct nb_server *s, struct cache *c, struct srv_job *const *run, int n_run,
                      int n_dec, int n_pre, int *cap)
{
    int lru = -1;
    for (int i = 0; i < s->p.n_slots; i++)
        if (!s->slots[i] && nb_sequence_cached(c->seq[i]) > 0 &&
            (lru < 0 || c->used[i] < c->used[lru]))
            lru = i;
    if (lru >= 0) {
        nb_sequence_rewind(c->seq[lru], 0);
        return;
    }
    if (n_pre > 1 || (n_pre == 1 && n_dec > 0)) {
        *cap = n_pre / 2;
        return;
    }
    struct srv_job *young = NULL; /* the youngest decoder, else the youngest prefilling */
    for (int pass = 0; pass < 2 && !young; pass++)
        for (int k = 0; k < n_run; k++) {
            struct srv_job *j = run[k];
            if ((j->n_past >= j->req.n_prompt) != (pass == 0)) continue;
            if (!young || c->used[j->slot] > c->used[young->slot]) young = j;
        }
    if (!young) return;
    int slot = young->slot;
    if (young->n_past >= young->req.n_prompt) {
        NB_LOGW("serve: %s: the KV pool is full (--kv-tokens): ended as 'length' after %d tokens",
                young->id, young->n_gen);
        char t[4096];
        size_t n = 0;
        flush_text(young, t, &n, sizeof t);
        append_text(young, t, n);
        job_done(s, young, "length");
    } else {
        young->n_past = young->n_cached = 0;
        c->started[slot] = 0;
    }
    nb_sequence_rewind(c->seq[slot], 0);
}

/* ---------------------------------------------------------------- the loop */

struct step {
    struct nb_seq_batch in;   /* the batch: room for n_batch + rows tokens */
    struct srv_job **put;     /* [n_slots]: the jobs that put tokens into it */
    int n_put;
    struct srv_job **out_job; /* [rows]: the job of each logits row */
    int *draft_i;             /* [rows]: 0 the job's own token, i its i-th draft (--lookup) */
    uint8_t *taken;           /* [rows]: a token was drawn from the row */
    int rows;                 /* n_slots + the drafts a step may hold */
    float *logits;            /* [rows * n_vocab] */
    /* per output row: its text (a token is at most a few hundred bytes, the held-back
     * text of the stop matcher at most its longest string), finish, whether a token was
     * counted (not EOG) and its logprobs */
    char *texts; /* [rows * text_cap] */
    size_t text_cap, *text_n;
    const char **finish;
    int *gained;
    struct srv_logprob *row_lp;
    float *raw, *work; /* [n_vocab]: a row before the sampler's changes; constrained copy */
    int n_out, n_dec, n_drafted; /* this step: output rows, decoder tokens, drafts */
};



/* A queued job that is cancelled, waited past its deadline, or meets the drain: it leaves
 * the queue (503 unless cancelled). */
struct expiry {
    double now;
    int draining;
};

static int expired(struct srv_job *j, void *arg)
{
    const struct expiry *x = arg;
    if (j->cancel) return 1;
    if (!(x->now > j->deadline || x->draining)) return 0;
    srv_fail(&j->err, 503, NULL, x->draining ? "server_shutting_down" : "timeout",
             x->draining ? "the server is shutting down"
                         : "no slot became free within the request timeout");
    return 1;
}

/* Drop cancelled and expired jobs, fail the queue when stopping, admit into free slots. */
static void admit(struct nb_server *s, struct cache *c, double now, int draining,
                  double drain_deadline)
{
    for (int i = 0; i < s->p.n_slots; i++) {
        struct srv_job *j = s->slots[i];
        if (!j) continue;
        if (j->cancel)
            job_done(s, j, "stop");
        else if (j->err.status && j->n_past < j->req.n_prompt) /* failed before its rows */
            job_done(s, j, NULL);
        else if (j->req.kind == SRV_EMBED &&
                 (now > j->deadline || (draining && now > drain_deadline))) {
            srv_fail(&j->err, 503, NULL, draining ? "server_shutting_down" : "timeout",
                     "the embeddings were cut by %s", draining ? "the shutdown" : "the timeout");
            job_done(s, j, NULL);
        } else if (now > j->deadline || (draining && now > drain_deadline)) {
            NB_LOGW("serve: %s: %s after %d tokens: finished as 'length'", j->id,
                    now > j->deadline ? "timed out" : "cut by the shutdown", j->n_gen);
            job_done(s, j, "length");
        }
    }
    struct expiry x = {now, draining};
    sweep_queue(s, expired, &x);
    int i;
    while (s->q_head && (i = pick_slot(s, c, s->q_head)) >= 0) {
        struct srv_job *j = s->q_head;
        s->q_head = j->next;
        if (!s->q_head) s->q_tail = NULL;
        s->n_queued--;
        j->next = NULL;
        j->slot = i;
        j->state = JOB_RUNNING;
        j->n_past = 0;
        s->slots[i] = j;
        j->seq = c->seq[i];
        s->n_running++;
        c->used[i] = ++c->clock;
        c->started[i] = 0; /* its sequence is set when its prefill starts (take_prefix) */
    }
}

/* The grammar the job's next token must keep to, or NULL: the request's, or with
 * tool_choice auto the call's while the model is writing one. */
static const struct nb_gram *job_grammar(const struct srv_job *j)
{
    return j->req.grammar ? j->req.grammar : j->auto_on ? j->auto_g : NULL;
}

/* tool_choice auto, the grammar off: does the output with `b` now begin a call (Hermes:
 * "<tool_call>" written, maybe split over tokens; Llama 3: the answer opens with '{')?
 * Then the grammar goes on, fed with the call's bytes so far; when they do not fit it (the
 * model wrote the call its own way), it stays off and the parser reads what comes. */
static void auto_begin(struct srv_job *j, const char *b, size_t n)
{
    static const size_t keep_max = sizeof "<tool_call>" - 2;
    char buf[512];
    size_t k = (size_t)j->tail_n, add = n < sizeof buf - k ? n : sizeof buf - k;
    memcpy(buf, j->tail, k);
    memcpy(buf + k, b, add);
    k += add;
    long from = srv_tool_call_start(buf, k, j->req.tool_format, !j->any_text);
    for (size_t i = 0; i < k && !j->any_text; i++)
        j->any_text = !(buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r');
    /* keep what may be the start of a wrapper split over tokens */
    size_t keep = k < keep_max ? k : keep_max;
    memmove(j->tail, buf + k - keep, keep);
    j->tail_n = (int)keep;
    if (from < 0) return;
    struct nb_cons c;
    nb_cons_start(j->auto_g, &c);
    if (!nb_cons_feed(j->auto_g, &c, buf + from, k - (size_t)from)) return;
    j->cons = c;
    j->auto_on = !nb_cons_complete(j->auto_g, &c);
    j->tail_n = 0;
}

/* The next token of a job whose output is constrained (job_grammar): the library's
 * constraint stage (nb_cons_sample) with the job's state, special tokens allowed where
 * the request parses tool calls. A token is allowed only if the output can still close in
 * the tokens left before max_tokens, one kept for the end of generation. `row` is the raw
 * logits (modified), `work` room for a copy. -1: no token continues the output. */
static int32_t sample_constrained(struct nb_server *s, struct srv_job *j, float *row, float *work)
{
    if (j->gbs) {
        j->gbs->budget = j->max_tokens - j->n_gen - 1;
        return nb_gb_sample(j->sampler, j->req.gbnf, s->m.vb, j->gbs, 0, row, work);
    }
    j->cons.budget = j->max_tokens - j->n_gen - 1;
    return nb_cons_sample(j->sampler, job_grammar(j), s->m.vb, &j->cons,
                          srv_request_parses_tools(&j->req), row, work);
}

/* One token sampled for job j: its text added, and whether it ends the job. Runs outside
 * the lock; the text goes to buf (appended under the lock by the caller). */
static const char *take_token(struct nb_server *s, struct srv_job *j, int32_t tok, char *buf,
                              size_t *n, size_t cap)
{
    if (nb_tokenizer_is_eog(s->m.tok, tok)) {
        nb_sequence_take(j->seq, tok, 0);
        flush_text(j, buf, n, cap);
        return "stop";
    }
    if (tok < 0) { /* sample_constrained found nothing */
        srv_fail(&j->err, 500, NULL, NULL,
                 "constrained decoding: no token of the vocabulary continues the output");
        return "stop";
    }
    const struct nb_vocab_bytes *v = s->m.vb;
    const char *tb = v->bytes + v->off[tok];
    size_t tn = v->off[tok + 1] - v->off[tok];
    if (j->gbs) {
        nb_gb_feed(j->req.gbnf, j->gbs, tb, tn);
    } else if (job_grammar(j)) {
        nb_cons_feed(job_grammar(j), &j->cons, tb, tn);
        /* auto: the call is complete, free text again (more calls, or words) */
        if (j->auto_on && nb_cons_complete(j->auto_g, &j->cons)) j->auto_on = 0;
    } else if (j->auto_g) {
        auto_begin(j, tb, tn);
    }
    nb_sampler_accept(j->sampler, tok);
    j->n_gen++;
    if (nb_sequence_take(j->seq, tok, 1) != NB_OK) { /* room reserved: not expected */
        srv_fail(&j->err, 500, NULL, NULL, "serve: %s", nb_last_error());
        return "stop";
    }
    const char *t;
    size_t len;
    enum nb_text_event ev = nb_text_out_feed(j->out, tok, &t, &len);
    if (ev == NB_TEXT_ERROR) {
        srv_fail(&j->err, 500, NULL, NULL, "detokenizer: %s", nb_last_error());
        return "stop";
    }
    put_text(buf, n, cap, t, len);
    if (ev != NB_TEXT_MORE) return "stop";
    /* the next decode would write position n_prompt + n_gen - 1; the context holds n_ctx */
    if (j->n_gen >= j->max_tokens || j->req.n_prompt + j->n_gen >= s->n_ctx) {
        flush_text(j, buf, n, cap);
        return "length";
    }
    j->last = tok;
    return NULL;
}

static void step_free(struct step *b, struct cache *c, int n_slots)
{
    free(b->in.tok);
    free(b->in.pos);
    free(b->in.seq);
    free(b->in.want);
    free(b->put);
    free(b->out_job);
    free(b->draft_i);
    free(b->taken);
    free(b->logits);
    free(b->texts);
    free(b->text_n);
    free(b->finish);
    free(b->gained);
    free(b->row_lp);
    free(b->raw);
    free(b->work);
    for (int i = 0; c->seq && i < n_slots; i++) nb_sequence_free(c->seq[i]);
    free(c->seq);
    free(c->used);
    free(c->started);
}

/* The step's buffers and the slots' sequences; NB_ERR_NOMEM. */
static enum nb_status step_alloc(struct nb_server *s, struct step *b, struct cache *c, int n_batch)
{
    int n_slots = s->p.n_slots, n_vocab = s->m.n_vocab;
    b->rows = n_slots + s->p.lookup;
    b->in.cap = n_batch + b->rows;
    b->text_cap = 4096;
    b->in.tok = malloc(sizeof *b->in.tok * (size_t)b->in.cap);
    b->in.pos = malloc(sizeof *b->in.pos * (size_t)b->in.cap);
    b->in.seq = malloc(sizeof *b->in.seq * (size_t)b->in.cap);
    b->in.want = malloc((size_t)b->in.cap);
    b->put = malloc(sizeof *b->put * (size_t)n_slots);
    b->out_job = malloc(sizeof *b->out_job * (size_t)b->rows);
    b->draft_i = malloc(sizeof *b->draft_i * (size_t)b->rows);
    b->taken = malloc((size_t)b->rows);
    b->logits = malloc(sizeof *b->logits * (size_t)b->rows * (size_t)n_vocab);
    b->texts = malloc(b->text_cap * (size_t)b->rows);
    b->text_n = malloc(sizeof *b->text_n * (size_t)b->rows);
    b->finish = malloc(sizeof *b->finish * (size_t)b->rows);
    b->gained = malloc(sizeof *b->gained * (size_t)b->rows);
    b->row_lp = malloc(sizeof *b->row_lp * (size_t)b->rows);
    b->raw = malloc(sizeof *b->raw * (size_t)n_vocab);
    b->work = malloc(sizeof *b->work * (size_t)n_vocab);
    struct nb_kv_usage kv;
    nb_ctx_kv_usage(s->ctx, &kv);
    c->block = kv.block_tokens > 0 ? kv.block_tokens : 32;
    c->seq = calloc((size_t)n_slots, sizeof *c->seq);
    c->used = calloc((size_t)n_slots, sizeof *c->used);
    c->started = calloc((size_t)n_slots, 1);
    if (!b->in.tok || !b->in.pos || !b->in.seq || !b->in.want || !b->put || !b->out_job ||
        !b->draft_i || !b->taken || !b->logits || !b->texts || !b->text_n || !b->finish ||
        !b->gained || !b->row_lp || !b->raw || !b->work || !c->seq || !c->used || !c->started)
        return nb_set_error(NB_ERR_NOMEM, "serve: out of memory");
    struct nb_sequence_params qp = nb_sequence_default_params();
    qp.n_ctx = s->n_ctx; /* a hard limit: no shift */
    for (int i = 0; i < n_slots; i++) {
        qp.seq = i;
        enum nb_status st = nb_sequence_init(&c->seq[i], s->ctx, &qp);
        /* a prompt and its answer fill at most the context (take_token ends it there) */
        if (!st) st = nb_sequence_reserve(c->seq[i], s->n_ctx + 1);
        if (st) return st;
    }
    return NB_OK;
}

/* Output rows for job j: its own token's (draft_i 0) and one per draft. */
static void add_rows(struct step *b, struct srv_job *j, int rows)
{
    for (int r = 0; r < rows; r++) {
        b->draft_i[b->n_out] = r;
        b->out_job[b->n_out++] = j;
    }
}

/* The decoders of the step: one token each, and with --lookup the drafts its sequence
 * copies from its own text after it. Drafts only in a step without prefill and with a
 * pool that holds every slot's context: the step is then verified (nb_decode_verify: each
 * token's logits as a decode step alone gives). Any request drafts: its rows are drawn
 * from in order after the step, each with the grammar, tool-call watch and logprobs state
 * the tokens before it left, as plain decoding would. */
static void plan_decoders(struct nb_server *s, struct step *b, struct srv_job *const *run,
                          int n_run, int short_pool)
{
    int drafts_left = s->p.lookup;
    for (int k = 0; k < n_run && drafts_left > 0; k++)
        if (run[k]->n_past < run[k]->req.n_prompt || short_pool) drafts_left = 0;
    for (int k = 0; k < n_run; k++) {
        struct srv_job *j = run[k];
        if (j->n_past < j->req.n_prompt) continue;
        int room = j->max_tokens - j->n_gen - 1; /* tokens it may still take after this */
        if (room > drafts_left) room = drafts_left;
        int rows = nb_sequence_put(j->seq, &b->in, 1, room);
        b->put[b->n_put++] = j;
        add_rows(b, j, rows);
        drafts_left -= rows - 1;
        b->n_drafted += rows - 1;
    }
    b->n_dec = b->in.n;
}

/* Prefill chunks after the decoders, up to `budget` tokens, from slot rr on (rotated so
 * prompts share the budget). */
static void plan_prefill(struct nb_server *s, struct step *b, struct cache *c,
                         struct srv_job *const *run, int n_run, int rr, int budget)
{
    for (int k0 = 0; k0 < n_run && budget > 0; k0++) {
        struct srv_job *j = run[(k0 + rr) % n_run];
        if (j->n_past >= j->req.n_prompt || j->err.status) continue;
        if (!c->started[j->slot]) {
            if (take_prefix(s, c, j, run, n_run)) continue; /* waits a step */
            if (j->err.status) continue;
        }
        if (j->max_tokens < 0) { /* once (a prefill restarted by make_room comes again) */
            int max_gen = s->n_ctx - j->req.n_prompt;
            j->max_tokens = j->req.max_tokens > 0 ? j->req.max_tokens : s->p.n_predict;
            if (j->max_tokens < 0 || j->max_tokens > max_gen) j->max_tokens = max_gen;
            for (int i = 0; i < j->req.n_prompt; i++)
                nb_sampler_accept(j->sampler, j->req.prompt[i]);
        }
        int n0 = b->in.n;
        add_rows(b, j, nb_sequence_put(j->seq, &b->in, budget, 0));
        b->put[b->n_put++] = j;
        budget -= b->in.n - n0;
    }
}

/* A token from each output row of a decoded step (outside the lock). A draft's row holds
 * the next token's logits only if the token drawn from the row before it was that draft
 * (and the job goes on): else it and the job's later rows are dropped, as plain decoding
 * would never have fed them. */
static void sample_rows(struct nb_server *s, struct step *b)
{
    int n_vocab = s->m.n_vocab;
    for (int k = 0; k < b->n_out; k++) {
        struct srv_job *j = b->out_job[k];
        float *row = b->logits + (size_t)k * (size_t)n_vocab;
        b->text_n[k] = 0;
        b->finish[k] = NULL;
        b->gained[k] = 0;
        b->taken[k] = 0;
        int di = b->draft_i[k];
        if (di > 0 && (!b->taken[k - 1] || b->finish[k - 1] || j->err.status ||
                       j->last != nb_sequence_draft(j->seq, di - 1)))
            continue;
        b->taken[k] = 1;
        if (j->req.logprobs) memcpy(b->raw, row, sizeof *b->raw * (size_t)n_vocab);
        int32_t tok = job_grammar(j) || j->gbs ? sample_constrained(s, j, row, b->work)
                                     : nb_sampler_sample(j->sampler, row);
        if (j->req.logprobs && tok >= 0)
            srv_logprob_of(b->raw, n_vocab, tok, j->req.top_logprobs, &b->row_lp[k]);
        int n_gen = j->n_gen;
        b->finish[k] = take_token(s, j, tok, b->texts + (size_t)k * b->text_cap, &b->text_n[k],
                                  b->text_cap);
        b->gained[k] = j->n_gen > n_gen;
    }
}

/* After the draws: each job's sequence keeps in its cache what was fed and turned out
 * right (nb_sequence_settle: its token and the drafts confirmed). */
static void settle_rows(struct step *b, uint64_t *drafted, uint64_t *accepted)
{
    for (int k = 0; k < b->n_out; k++) {
        struct srv_job *j = b->out_job[k];
        if (b->draft_i[k] != 0) continue;
        int n_draft = 0, right = 0;
        while (k + 1 + n_draft < b->n_out && b->draft_i[k + 1 + n_draft] > 0) n_draft++;
        if (nb_sequence_settle(j->seq, &right) != NB_OK && !j->err.status)
            srv_fail(&j->err, 500, NULL, NULL, "lookup: %s", nb_last_error());
        *drafted += (uint64_t)n_draft;
        *accepted += (uint64_t)right;
    }
}

/* The step's results to their jobs and the metrics (under the lock). */
static void publish(struct nb_server *s, struct step *b, double t_step)
{
    for (int k = 0; k < b->n_out; k++) {
        struct srv_job *j = b->out_job[k];
        if (!b->taken[k]) continue; /* a draft not confirmed */
        if (j->t_prev == 0) {
            j->t_first = t_step;
            srv_hist_add(&s->met.ttft, t_step - j->t_submit);
            s->met.prompt_tokens += (uint64_t)j->req.n_prompt;
            s->met.prompt_tokens_cached += (uint64_t)j->n_cached;
        } else if (b->draft_i[k] == 0) { /* a confirmed draft's token came with it */
            srv_hist_add(&s->met.itl, t_step - j->t_prev);
        }
        j->t_prev = t_step;
        append_text(j, b->texts + (size_t)k * b->text_cap, b->text_n[k]);
        if (j->req.logprobs && b->gained[k]) append_logprob(j, &b->row_lp[k]);
        s->met.gen_tokens += (uint64_t)(j->n_gen - j->n_gen_counted);
        j->n_gen_counted = j->n_gen;
        job_wake(j);
        /* done after the job's last row this step (its taken rows come together) */
        int last_row = k + 1 == b->n_out || b->out_job[k + 1] != j || !b->taken[k + 1];
        if (last_row && (b->finish[k] || j->err.status)) job_done(s, j, b->finish[k]);
    }
    nb_ctx_kv_usage(s->ctx, &s->met.kv);
    if (s->met.kv.blocks_used > s->met.kv_blocks_peak)
        s->met.kv_blocks_peak = s->met.kv.blocks_used;
}

/* Embedding jobs take no part in the batch: each runs its next input now (nb_embed on its
 * slot's sequence, cleared before and after), between steps, so a long list does not
 * stall the streams; a finished one leaves (under the lock). run[] keeps the others.
 * Engine thread, outside the lock. */
static void run_embeds(struct nb_server *s, struct srv_job **run, int *n_run)
{
    struct srv_job *done[256];
    int n = 0, n_done = 0;
    for (int k = 0; k < *n_run; k++) {
        struct srv_job *j = run[k];
        if (j->req.kind != SRV_EMBED) {
            run[n++] = j;
            continue;
        }
        if (!j->err.status) {
            nb_sequence_rewind(j->seq, 0); /* the slot's cached tokens are gone */
            srv_embed_step(s, j);
        }
        if (j->err.status || j->emb_done == j->req.n_inputs) done[n_done++] = j;
    }
    *n_run = n;
    if (!n_done) return;
    pthread_mutex_lock(&s->mu);
    for (int k = 0; k < n_done; k++) {
        if (!done[k]->err.status) s->met.prompt_tokens += (uint64_t)done[k]->req.n_prompt;
        job_done(s, done[k], "stop");
    }
    pthread_mutex_unlock(&s->mu);
}

enum nb_status srv_engine_run(struct nb_server *s)
{
    struct step b = {0};
    struct cache cache = {0};
    int n_slots = s->p.n_slots;
    int n_batch = s->p.ctx.n_batch > 0 ? s->p.ctx.n_batch : 512;
    enum nb_status st = step_alloc(s, &b, &cache, n_batch);
    if (st) goto done;
    double drain_deadline = 0;
    int rr = 0; /* the slot prefill starts from, rotated so prompts share the budget */
    /* a KV pool smaller than every slot's full context: a step can run out of blocks */
    int short_pool =
        s->p.ctx.n_ctx_total > 0 && s->p.ctx.n_ctx_total < (int64_t)n_slots * (int64_t)s->n_ctx;
    int cap = n_batch; /* prefill tokens a step may take (lowered while the pool is full) */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        double now = nb_time_s();
        if (s->stopping && drain_deadline == 0) drain_deadline = now + s->p.drain_s;
        admit(s, &cache, now, s->stopping, drain_deadline);
        if (s->stopping && s->n_running == 0) break;
        if (s->n_running == 0) {
            /* idle: wake for a job, a cancel or stop, and at least every second (timeouts) */
            srv_wait_ms(&s->engine_cv, &s->mu, 1000);
            continue;
        }
        struct srv_job *run[256];
        int n_run = 0;
        for (int i = 0; i < n_slots; i++)
            if (s->slots[i]) run[n_run++] = s->slots[i];
        pthread_mutex_unlock(&s->mu);
        run_embeds(s, run, &n_run);
        if (n_run == 0) {
            pthread_mutex_lock(&s->mu);
            continue;
        }

        /* the batch: decoders first, then prefill chunks */
        b.in.n = b.n_out = b.n_drafted = b.n_put = 0;
        plan_decoders(s, &b, run, n_run, short_pool);
        int budget = n_batch - b.in.n;
        if (budget < 1) budget = 1;
        if (budget > cap) budget = cap;
        plan_prefill(s, &b, &cache, run, n_run, rr, budget);
        rr++;
        if (b.in.n == 0) { /* every job waits for another's prefill (which runs): not expected */
            cap = n_batch;
            pthread_mutex_lock(&s->mu);
            continue;
        }
        struct nb_batch batch = {.n_tokens = b.in.n, .token = b.in.tok, .pos = b.in.pos,
                                 .seq = b.in.seq, .want_logits = b.in.want};
        enum nb_status ds = b.n_drafted ? nb_decode_verify(s->ctx, &batch, b.logits)
                                        : nb_decode(s->ctx, &batch, b.logits);
        if (ds == NB_ERR_RANGE && short_pool) { /* no blocks for the step: it ran nothing */
            NB_LOGI("serve: %s", nb_last_error());
            pthread_mutex_lock(&s->mu);
            make_room(s, &cache, run, n_run, b.n_dec, b.in.n - b.n_dec, &cap);
            continue;
        }
        cap = n_batch;
        double t_step = nb_time_s();
        uint64_t drafted = 0, accepted = 0;
        char errmsg[256] = "";
        if (ds != NB_OK) {
            snprintf(errmsg, sizeof errmsg, "%s", nb_last_error());
        } else {
            for (int k = 0; k < b.n_put; k++) {
                struct srv_job *j = b.put[k];
                nb_sequence_ran(j->seq);
                if (j->n_past < j->req.n_prompt) j->n_past = nb_sequence_cached(j->seq);
            }
            sample_rows(s, &b);
            settle_rows(&b, &drafted, &accepted);
        }

        pthread_mutex_lock(&s->mu);
        if (ds != NB_OK) {
            NB_LOGE("serve: decode failed: %s", errmsg);
            for (int k = 0; k < n_run; k++) {
                srv_fail(&run[k]->err, 500, NULL, NULL, "the model failed: %s", errmsg);
                nb_sequence_rewind(run[k]->seq, 0); /* what it holds is not known */
                job_done(s, run[k], NULL);
            }
            continue;
        }
        s->met.steps++;
        s->met.lookup_drafted += drafted;
        s->met.lookup_accepted += accepted;
        s->met.step_tokens += (uint64_t)b.in.n;
        publish(s, &b, t_step);
    }
    s->accepting = 0;
    pthread_mutex_unlock(&s->mu);
done:
    step_free(&b, &cache, n_slots);
    return st;
}

void srv_engine_abort(struct nb_server *s)
{
    if (!s->slots) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    s->accepting = 0;
    while (s->q_head) {
        struct srv_job *j = s->q_head;
        s->q_head = j->next;
        s->n_queued--;
        srv_fail(&j->err, 503, NULL, "server_shutting_down", "the server is shutting down");
        job_done(s, j, NULL);
    }
    s->q_tail = NULL;
    for (int i = 0; i < s->p.n_slots; i++)
        if (s->slots[i]) {
            srv_fail(&s->slots[i]->err, 503, NULL, "server_shutting_down", "the server stopped");
            job_done(s, s->slots[i], NULL);
        }
    pthread_mutex_unlock(&s->mu);
}
