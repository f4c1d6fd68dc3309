/* server/http.c — HTTP on libmicrohttpd: a few threads, each an epoll loop over its
 * connections (MHD's thread pool); no thread is a connection's.
 *
 * A request's first call checks what can be checked before its body (route, method, API
 * key, Content-Length against the body limit and the bodies held) and answers at once
 * when that fails; the body is gathered up to the limit; the last call parses it
 * (openai.c) through the parse gate and submits a job (sched.c). Nothing waits on a
 * loop's thread: a connection whose job has no news is suspended (parked) and the job's
 * wake hook, called by the engine under s->mu on new text, the end or a cancel, resumes
 * it. A request has a job per choice ("n"), submitted together, each of which wakes it.
 * A plain answer is queued when every job is done; a stream's reader writes the text
 * there is of each job as server-sent events (with the choice's index) and parks when
 * there is none.
 *
 * Gone clients: MHD does not watch a suspended socket, so the deadline thread polls the
 * parked ones. A reset or failed socket is gone: its job is cancelled and the engine frees
 * its sequence at the next step. A socket whose client shut down its sending side may be
 * a client gone (close) or one waiting for its answer (HTTP allows a half-close: `nc -N`);
 * one write tells them apart, as a closed socket answers it with a reset: an interim
 * "100 Continue" (which HTTP clients skip) before a plain answer, an SSE comment line in a
 * stream.
 *
 * Send deadline: MHD's connection timeout (idle_s) stays on while an answer is written,
 * so a client that stops reading is cut after idle_s without progress; a parked
 * connection has nothing to write and does not time out (the engine's --timeout bounds
 * its job).
 *
 * Memory: a body is held at most max_body, all bodies together at most body_budget
 * (Content-Length reserves it before the body comes; 503 beyond); a body's parse (cJSON's
 * nodes, the text's copies, the tokens) is estimated from its size and count of JSON
 * values, bodies with more values than a request can use are refused before parsing, and
 * parses run together only while their estimates fit parse_budget.
 *
 * Slow clients: a connection must send a whole request (headers and body) within
 * read_timeout_s of its accept, or of the end of its previous request (an idle keep-alive
 * counts as a request not yet sent). Each open connection is tracked from MHD's connection
 * notifications (socket, start of the wait, whether a request is still being read); a
 * deadline thread shuts down the socket of one past its deadline, and MHD, reading nothing
 * more, closes it. MHD reports a connection closed before it closes the socket, so the
 * socket shut down is never one reused by a later connection. MHD's idle timeout resets
 * with every byte: alone it would let a byte every few seconds hold a connection forever.
 */
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/error.h"
#include "core/threadpool.h"
#include "server/server.h"

enum route { R_NONE, R_PAGE, R_HEALTH, R_MODELS, R_MODEL, R_METRICS, R_COMPLETIONS, R_CHAT,
             R_EMBED };

/* An open connection (MHD's socket context), in srv_http's list. */
struct watch {
    struct watch *prev, *next;
    int fd;
    double t0;     /* accept, or the end of the previous request */
    int receiving; /* a request not yet fully read (or not yet begun) */
    int cut;       /* shut down for its deadline */
};

struct conn;

/* The read deadlines, the parked connections and the memory gates (s->http). */
struct srv_http {
    pthread_mutex_t mu; /* the list; never held with s->mu */
    pthread_cond_t cv;
    struct watch *head;
    int stop;
    pthread_t thread;
    int started;
    /* under s->mu */
    struct conn *parked; /* suspended until their job has news */
    int closing;         /* the daemon stops: nothing parks any more */
    /* under gate_mu */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    size_t body_held, body_budget;   /* request bodies being received or parsed */
    size_t parse_used, parse_budget; /* the estimates of the parses running */
    size_t max_values;               /* JSON values a body may have */
};

/* Every parse fits this together (one larger than it runs alone). */
#define PARSE_BUDGET ((size_t)32 << 20)
/* HTTP threads, each an epoll loop over its share of the connections. */
#define HTTP_THREADS 4

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One request on a connection (MHD's con_cls). */
struct conn {
    struct nb_server *s;
    enum route route;
    char *body;
    size_t n, cap;
    int too_large, too_busy, answered;
    int fd;
    /* a job per choice ("n"), a reference each, released when the request completes */
    struct srv_job *jobs[SRV_MAX_CHOICES];
    int n_jobs;
    /* a stream: the events formatted and not yet handed to MHD */
    char *pend;
    size_t pend_n, pend_off, pend_cap;
    size_t sent[SRV_MAX_CHOICES];       /* bytes of each job's text already in events */
    int lps_sent[SRV_MAX_CHOICES];      /* of its lps */
    unsigned char fin[SRV_MAX_CHOICES]; /* its finish sent */
    int n_fin;
    int started, ended;
    int received; /* the whole request is read */
    struct MHD_Connection *c;
    struct conn *pprev, *pnext; /* in s->http->parked */
    int parked;                 /* suspended until its job has news */
    int probe;                  /* a stream: an SSE comment next (is its client there?) */
    int probed;                 /* its client's half-close seen, and written to once */
    int expect;                 /* it asked for 100-continue (MHD may be writing one) */
    size_t held;                /* of h->body_held */
    /* for the request's log line */
    double t0;
    int status;
    char method[12], path[96], addr[64];
};

/* The URL's %XX escapes decoded in place (libmicrohttpd's unescape callback), except
 * %00: a NUL would cut the path short ("/health%00x" read as "/health"), so it stays as
 * the three characters and the path is no route. Returns the new length. */
static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static size_t unescape_url(void *cls, struct MHD_Connection *c, char *uri)
{
    (void)cls;
    (void)c;
    char *w = uri;
    for (const char *r = uri; *r; r++) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_val(r[1])) >= 0 && (lo = hex_val(r[2])) >= 0 &&
            (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return (size_t)(w - uri);
}

static enum route route_of(const char *url)
{
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) return R_PAGE;
    if (!strncmp(url, "/v1/", 4)) url += 3; /* "/v1/models" and "/models" alike */
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/models")) return R_MODELS;
    if (!strncmp(url, "/models/", 8) && url[8]) return R_MODEL; /* the id checked later */
    if (!strcmp(url, "/metrics")) return R_METRICS;
    if (!strcmp(url, "/completions")) return R_COMPLETIONS;
    if (!strcmp(url, "/chat/completions")) return R_CHAT;
    if (!strcmp(url, "/embeddings")) return R_EMBED;
    return R_NONE;
}

/* ---------------------------------------------------------------- answers */

/* Queue response r (destroyed here), counting it by status. */
static enum MHD_Result send_counted(struct conn *k, struct MHD_Connection *c, int status,
                                    struct MHD_Response *r)
{
    struct nb_server *s = k->s;
    k->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    pthread_mutex_lock(&s->mu);
    s->met.requests[srv_status_index(status)]++;
    pthread_mutex_unlock(&s->mu);
    k->answered = 1;
    return ret;
}

/* Queue a response with `body` (taken: freed by MHD), counting it by status. */
static enum MHD_Result answer(struct conn *k, struct MHD_Connection *c, int status,
                              const char *type, char *body, const char *hdr, const char *val)
{
    if (!body) {
        status = 500;
        type = "application/json";
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                      "\"param\":null,\"code\":null}}");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (hdr) MHD_add_response_header(r, hdr, val);
    return send_counted(k, c, status, r);
}

/* The chat page (GET /, /index.html): compiled in, public (its API calls carry the key),
 * allowed to run only its own script and style and to talk only to this server. */
static enum MHD_Result page(struct conn *k, struct MHD_Connection *c)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(srv_webui_size, (void *)srv_webui_html,
                                                             MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    MHD_add_response_header(r, "Content-Security-Policy", srv_webui_csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return send_counted(k, c, 200, r);
}

static enum MHD_Result answer_error(struct conn *k, struct MHD_Connection *c,
                                    const struct srv_error *e, const char *hdr, const char *val)
{
    return answer(k, c, e->status, "application/json", srv_json_error(e), hdr, val);
}

static enum MHD_Result fail_now(struct conn *k, struct MHD_Connection *c, int status,
                                const char *code, const char *hdr, const char *val, const char *msg)
{
    struct srv_error e;
    srv_fail(&e, status, NULL, code, "%s", msg);
    return answer_error(k, c, &e, hdr, val);
}

/* ---------------------------------------------------------------- waiting */

/* 0: the client is there; 1: it shut down its sending side (a half-close, or a close
 * whose reset has not come); 2: gone (reset, failed). */
static int peer_state(int fd)
{
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return 2;
    return (p.revents & POLLRDHUP) ? 1 : 0;
}

int srv_peer_gone(int fd)
{
    return peer_state(fd) == 2;
}

/* Under s->mu: the connection waits, suspended, for its job's news (MHD allows the call
 * from the request and reader callbacks, where it is made). */
static void park(struct nb_server *s, struct conn *k)
{
    struct srv_http *h = s->http;
    k->parked = 1;
    k->pprev = NULL;
    k->pnext = h->parked;
    if (h->parked) h->parked->pprev = k;
    h->parked = k;
    MHD_suspend_connection(k->c);
}

static void unlink_parked(struct srv_http *h, struct conn *k)
{
    if (k->pprev)
        k->pprev->pnext = k->pnext;
    else
        h->parked = k->pnext;
    if (k->pnext) k->pnext->pprev = k->pprev;
    k->parked = 0;
}

/* Under s->mu: a parked connection goes on (MHD takes the call from any thread). */
static void unpark(struct nb_server *s, struct conn *k)
{
    if (!k->parked) return;
    unlink_parked(s->http, k);
    MHD_resume_connection(k->c);
}

/* The job's wake hook (under s->mu). */
static void job_news(void *arg)
{
    struct conn *k = arg;
    unpark(k->s, k);
}

/* A client that shut down its sending side is written to once: a socket closed for good
 * answers with a reset (then peer_state is 2), a half-closed one reads on. Before a plain
 * answer, an interim 100 Continue, written here while MHD writes nothing on this
 * connection (parked, or in its request callback with no answer queued; not when the
 * request asked for 100-continue, which MHD may be writing itself); in a stream, an SSE
 * comment line that the stream's reader writes. Under s->mu. */
static void probe(struct nb_server *s, struct conn *k)
{
    k->probed = 1;
    if (k->n_jobs && k->jobs[0]->req.stream) {
        k->probe = 1;
        unpark(s, k);
    } else if (!k->expect) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t w = send(k->fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
    }
}

/* Under s->mu: the request's jobs not done are cancelled (the engine drops them). */
static void cancel_jobs(struct nb_server *s, struct conn *k)
{
    for (int i = 0; i < k->n_jobs; i++) {
        struct srv_job *j = k->jobs[i];
        if (j->state != JOB_DONE && !j->cancel) {
            j->cancel = 1;
            pthread_cond_signal(&s->engine_cv);
        }
    }
}

/* The deadline thread, every 100 ms: the parked connections whose client is gone end
 * (their jobs cancelled), a half-closed one is probed once. */
static void check_parked(struct nb_server *s)
{
    pthread_mutex_lock(&s->mu);
    for (struct conn *k = s->http->parked, *next; k; k = next) {
        next = k->pnext;
        int st = peer_state(k->fd);
        if (st == 2) {
            cancel_jobs(s, k);
            unpark(s, k);
        } else if (st == 1 && !k->probed) {
            probe(s, k);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* Under s->mu: the request's jobs cannot give it an answer (its client is gone, or the
 * daemon stops before they are done). */
static int no_answer(const struct nb_server *s, const struct conn *k)
{
    for (int i = 0; i < k->n_jobs; i++)
        if (k->jobs[i]->state != JOB_DONE && (k->jobs[i]->cancel || s->http->closing)) return 1;
    return 0;
}

static int all_done(const struct conn *k)
{
    for (int i = 0; i < k->n_jobs; i++)
        if (k->jobs[i]->state != JOB_DONE) return 0;
    return 1;
}

/* ---------------------------------------------------------------- streams */

static int pend_add(struct conn *k, const char *a, const char *b, size_t nb, const char *c)
{
    size_t na = strlen(a), nc = strlen(c), need = k->pend_n + na + nb + nc + 1;
    if (need > k->pend_cap) {
        size_t cap = k->pend_cap ? k->pend_cap : 1024;
        while (cap < need)
            cap *= 2;
        char *p = realloc(k->pend, cap);
        if (!p) return -1;
        k->pend = p;
        k->pend_cap = cap;
    }
    memcpy(k->pend + k->pend_n, a, na);
    memcpy(k->pend + k->pend_n + na, b, nb);
    memcpy(k->pend + k->pend_n + na + nb, c, nc);
    k->pend_n += na + nb + nc;
    return 0;
}

/* One "data: JSON\n\n" event (json taken). */
static int event(struct conn *k, char *json)
{
    int rc = json ? pend_add(k, "data: ", json, strlen(json), "\n\n") : -1;
    free(json);
    return rc;
}

/* A stream's events of choice i's news: its text not yet sent, and once its job is done
 * its end (an error ends the stream). 0, or -1 out of memory. Under s->mu. */
static int choice_events(struct conn *k, int i)
{
    struct nb_server *s = k->s;
    struct srv_job *j = k->jobs[i];
    int rc = 0;
    size_t upto = srv_stream_sendable(j);
    if (upto > k->sent[i]) {
        rc = event(k, srv_json_text_chunk(s, j, k->sent[i], upto, k->lps_sent[i], j->n_lps));
        k->sent[i] = upto;
        k->lps_sent[i] = j->n_lps;
    }
    if (rc || j->state != JOB_DONE || k->fin[i]) return rc;
    k->fin[i] = 1;
    k->n_fin++;
    if (j->err.status) {
        k->n_fin = k->n_jobs; /* the stream ends with the error */
        return event(k, srv_json_error(&j->err));
    }
    char **ev = NULL; /* tool calls: the rest of the content and the calls */
    int n_ev = 0;
    rc = srv_json_tool_chunks(s, j, k->sent[i], &ev, &n_ev);
    for (int e = 0; e < n_ev; e++)
        rc = rc ? (free(ev[e]), rc) : event(k, ev[e]);
    free(ev);
    if (rc == 0)
        rc = event(k, srv_json_chunk(s, j, NULL, 0, 0, j->finish, k->lps_sent[i], j->n_lps));
    return rc;
}

/* MHD's reader of a stream: the events not yet handed over, else the jobs' news (each
 * choice's chunks with its index, interleaved as they come); with none, the connection
 * parks (0 bytes: MHD calls again once it is resumed). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct conn *k = cls;
    struct nb_server *s = k->s;
    (void)pos;
    if (k->pend_off == k->pend_n) {
        if (k->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        k->pend_off = k->pend_n = 0;
        pthread_mutex_lock(&s->mu);
        struct srv_job *j0 = k->jobs[0];
        int rc = 0;
        if (no_answer(s, k)) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (!k->started) { /* the role first, so the client sees the stream open */
            k->started = 1;
            for (int i = 0; rc == 0 && i < k->n_jobs && j0->req.kind == SRV_CHAT; i++)
                rc = event(k, srv_json_chunk(s, k->jobs[i], "", 0, 1, NULL, 0, 0));
        }
        for (int i = 0; rc == 0 && i < k->n_jobs && k->n_fin < k->n_jobs; i++)
            rc = choice_events(k, i);
        if (rc == 0 && k->n_fin == k->n_jobs) {
            int failed = 0;
            for (int i = 0; i < k->n_jobs; i++)
                failed |= k->jobs[i]->err.status != 0;
            if (!failed && j0->req.include_usage)
                rc = event(k, srv_json_usage_chunk(s, k->jobs, k->n_jobs));
            if (rc == 0) rc = pend_add(k, "data: [DONE]", "", 0, "\n\n");
            k->ended = 1;
        }
        if (rc == 0 && k->pend_n == 0 && k->probe) /* a comment: is the client there? */
            rc = pend_add(k, ":", "", 0, "\n\n");
        k->probe = 0;
        if (rc == 0 && k->pend_n == 0) {
            park(s, k);
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        pthread_mutex_unlock(&s->mu);
        if (rc) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = k->pend_n - k->pend_off < max ? k->pend_n - k->pend_off : max;
    memcpy(buf, k->pend + k->pend_off, n);
    k->pend_off += n;
    return (ssize_t)n;
}

/* ---------------------------------------------------------------- endpoints */

/* ---------------------------------------------------------------- memory */

/* What parsing a body may take: cJSON's nodes (about 80 bytes a value; a body has at most
 * one value more than its commas, brackets and braces outside strings) and the copies of
 * its text (its strings, a chat's rendering and its marks, the sanitized text: 6 bytes a
 * byte of body, measured on a 1 MB chat body). */
static size_t parse_cost(const char *b, size_t n, size_t *values)
{
    size_t v = 1;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = b[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == ',' || ch == '[' || ch == '{') {
            v++;
        }
    }
    *values = v;
    return 80 * v + 6 * n;
}

/* Wait until a parse estimated at `cost` fits the budget beside those running (one larger
 * than the whole budget waits to run alone); returns what it holds. */
static size_t gate_enter(struct srv_http *h, size_t cost)
{
    if (cost > h->parse_budget) cost = h->parse_budget;
    pthread_mutex_lock(&h->gate_mu);
    while (h->parse_used + cost > h->parse_budget)
        pthread_cond_wait(&h->gate_cv, &h->gate_mu);
    h->parse_used += cost;
    pthread_mutex_unlock(&h->gate_mu);
    return cost;
}

static void gate_leave(struct srv_http *h, size_t cost)
{
    pthread_mutex_lock(&h->gate_mu);
    h->parse_used -= cost;
    pthread_cond_broadcast(&h->gate_cv);
    pthread_mutex_unlock(&h->gate_mu);
}

/* Count n more bytes of body as held (n may be what Content-Length announced); -1 when
 * that would pass the budget. */
static int hold_body(struct srv_http *h, struct conn *k, size_t n)
{
    int ok;
    pthread_mutex_lock(&h->gate_mu);
    ok = h->body_held + n <= h->body_budget;
    if (ok) {
        h->body_held += n;
        k->held += n;
    }
    pthread_mutex_unlock(&h->gate_mu);
    return ok ? 0 : -1;
}

/* The request's body is no longer needed: freed and no longer counted. */
static void drop_body(struct srv_http *h, struct conn *k)
{
    free(k->body);
    k->body = NULL;
    k->n = k->cap = 0;
    pthread_mutex_lock(&h->gate_mu);
    h->body_held -= k->held;
    k->held = 0;
    pthread_mutex_unlock(&h->gate_mu);
}

/* ---------------------------------------------------------------- endpoints */

/* A plain answer once the request's jobs are all done; until then the connection parks. */
static enum MHD_Result plain_answer(struct conn *k, struct MHD_Connection *c)
{
    struct nb_server *s = k->s;
    pthread_mutex_lock(&s->mu);
    if (no_answer(s, k)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_NO; /* the client is gone, or the server stops: close */
    }
    if (!all_done(k)) {
        park(s, k);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    struct srv_job *j = k->jobs[0]; /* the answer's: the first that failed, else the first */
    for (int i = 0; i < k->n_jobs && !j->err.status; i++)
        if (k->jobs[i]->err.status) j = k->jobs[i];
    char *out = j->err.status ? srv_json_error(&j->err)
                : j->req.kind == SRV_EMBED ? srv_json_embed(s, j)
                                           : srv_json_result(s, k->jobs, k->n_jobs);
    int status = j->err.status ? j->err.status : 200;
    pthread_mutex_unlock(&s->mu);
    return answer(k, c, status, "application/json", out, NULL, NULL);
}

static enum MHD_Result completion(struct conn *k, struct MHD_Connection *c)
{
    struct nb_server *s = k->s;
    struct srv_http *h = s->http;
    struct srv_request r;
    struct srv_error e;
    enum srv_kind kind = k->route == R_CHAT ? SRV_CHAT : SRV_COMPLETION;
    const char *body = k->body ? k->body : "";
    size_t values, cost = parse_cost(body, k->n, &values);
    if (values > h->max_values) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request body has more than %zu JSON values: no request "
                 "uses that many", h->max_values);
        drop_body(h, k);
        return fail_now(k, c, 400, "invalid_request", NULL, NULL, msg);
    }
    size_t held = gate_enter(h, cost);
    int bad = k->route == R_EMBED ? srv_parse_embed(&s->m, body, k->n, &r, &e)
                                  : srv_parse_request(&s->m, kind, body, k->n, &r, &e);
    gate_leave(h, held);
    /* a large body's memory goes back to the system now, not at some later request's */
    int large = k->n >= ((size_t)256 << 10);
    drop_body(h, k);
#ifdef __GLIBC__
    if (large) malloc_trim(0);
#else
    (void)large;
#endif
    if (bad) return answer_error(k, c, &e, NULL, NULL);
    int n = r.n_choices > 1 ? r.n_choices : 1;
    if (n > s->p.n_slots + s->p.max_queue) {
        srv_request_free(&r);
        srv_fail(&e, 400, "n", "invalid_value",
                 "'n' is %d: this server runs and queues at most %d jobs", n,
                 s->p.n_slots + s->p.max_queue);
        return answer_error(k, c, &e, NULL, NULL);
    }
    /* a job per choice: the first owns the request, the others share it */
    struct srv_job *j = srv_job_new(s, &r);
    if (j) k->jobs[k->n_jobs++] = j;
    for (int i = 1; j && i < n; i++)
        if ((k->jobs[k->n_jobs] = srv_job_choice(s, k->jobs[0], i)))
            k->n_jobs++;
        else
            j = NULL;
    if (!j) {
        srv_request_free(&r);
        pthread_mutex_lock(&s->mu);
        while (k->n_jobs > 0) /* the first (the request's owner) last */
            srv_job_release(s, k->jobs[--k->n_jobs]);
        pthread_mutex_unlock(&s->mu);
        return fail_now(k, c, 500, NULL, NULL, NULL, "out of memory");
    }
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < n; i++) {
        k->jobs[i]->fd = k->fd;
        k->jobs[i]->wake = job_news;
        k->jobs[i]->wake_arg = k;
    }
    s->n_answering++; /* until on_completed: a drain lets the answer out before stopping */
    /* a client that has already shut down its side: written to once, before the job
     * counts, so that a submit finding the queue full knows it gone */
    if (peer_state(k->fd) == 1) probe(s, k);
    pthread_mutex_unlock(&s->mu);
    int q = srv_submit(s, k->jobs, n);
    if (q == -1)
        return fail_now(k, c, 503, "server_busy", "Retry-After", "1",
                        "the server is busy: every slot is running and the queue is full; "
                        "retry later");
    if (q == -2)
        return fail_now(k, c, 503, "server_shutting_down", NULL, NULL,
                        "the server is shutting down");
    if (j->req.stream) {
        struct MHD_Response *resp =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, k, NULL);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(resp, "X-Accel-Buffering", "no");
        k->status = MHD_HTTP_OK;
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        pthread_mutex_lock(&s->mu);
        s->met.requests[srv_status_index(200)]++;
        pthread_mutex_unlock(&s->mu);
        k->answered = 1;
        return ret;
    }
    return plain_answer(k, c);
}

static enum MHD_Result metrics(struct conn *k, struct MHD_Connection *c)
{
    struct nb_server *s = k->s;
    pthread_mutex_lock(&s->mu);
    char *t = srv_metrics_text(&s->met, s->n_queued, s->n_running, s->p.n_slots);
    pthread_mutex_unlock(&s->mu);
    return answer(k, c, 200, "text/plain; version=0.0.4; charset=utf-8", t, NULL, NULL);
}

/* ---------------------------------------------------------------- the handler */

/* The API key against "Authorization: Bearer KEY" (the scheme's name in any case and one
 * or more spaces after it, RFC 9110 11.4), in time that does not depend on how much of
 * the key matches. */
static int authorized(const struct nb_server *s, struct MHD_Connection *c)
{
    const char *want = s->api_key;
    if (!want[0]) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    const char *got = h + 7;
    while (*got == ' ') got++;
    size_t a = strlen(want), b = strlen(got);
    unsigned char d = a != b;
    for (size_t i = 0; i < b; i++)
        d |= (unsigned char)(got[i] ^ want[i % a]);
    return d == 0;
}

/* The Content-Length headers of a request: the first value, and whether another differs. */
struct lengths {
    const char *first;
    int conflict;
};

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    struct lengths *n = cls;
    (void)kind;
    if (!key || strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0) return MHD_YES;
    if (!n->first)
        n->first = value ? value : "";
    else if (strcmp(n->first, value ? value : "") != 0)
        n->conflict = 1;
    return MHD_YES;
}

/* The first call of a request: what can be answered before its body. 1: answered. */
static int check_head(struct conn *k, struct MHD_Connection *c, const char *url, const char *method,
                      enum MHD_Result *ret)
{
    struct nb_server *s = k->s;
    int post = k->route == R_COMPLETIONS || k->route == R_CHAT || k->route == R_EMBED;
    char msg[160];
    if (k->route == R_NONE) {
        snprintf(msg, sizeof msg, "no such endpoint: %s %.80s", method, url);
        *ret = fail_now(k, c, 404, "not_found", NULL, NULL, msg);
        return 1;
    }
    if (strcmp(method, post ? "POST" : "GET") && !(!post && !strcmp(method, "HEAD"))) {
        snprintf(msg, sizeof msg, "%.80s takes %s, not %.16s", url, post ? "POST" : "GET", method);
        *ret = fail_now(k, c, 405, "method_not_allowed", "Allow", post ? "POST" : "GET, HEAD", msg);
        return 1;
    }
    if (k->route != R_HEALTH && k->route != R_PAGE && !authorized(s, c)) {
        *ret = fail_now(k, c, 401, "invalid_api_key", "WWW-Authenticate", "Bearer",
                        "a valid API key is needed: send the header 'Authorization: Bearer "
                        "KEY'");
        return 1;
    }
    /* two Content-Length values that differ: which one frames the body is ambiguous (a
     * proxy may read the other: request smuggling), so the request is refused and the
     * connection closed (RFC 9112 6.3) */
    struct lengths n = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &n);
    if (n.conflict) {
        *ret = fail_now(k, c, 400, "invalid_request", "Connection", "close",
                        "the request has Content-Length headers that disagree");
        return 1;
    }
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
    if (len > (unsigned long long)s->p.max_body) {
        snprintf(msg, sizeof msg, "the request body is %.20s bytes: at most %lld are taken", cl,
                 (long long)s->p.max_body);
        *ret = fail_now(k, c, 413, "request_too_large", NULL, NULL, msg);
        return 1;
    }
    /* the body's memory, reserved before it comes */
    if (len && hold_body(s->http, k, (size_t)len + 1) < 0) {
        *ret = fail_now(k, c, 503, "server_busy", "Retry-After", "1",
                        "the server holds as many request bodies as it takes; retry later");
        return 1;
    }
    return 0;
}

/* The connection's request is read (received: 1) or a new one is awaited from now (0). */
static void watch_mark(struct nb_server *s, struct MHD_Connection *c, int received)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct watch *w = ci ? ci->socket_context : NULL;
    if (!w || !s->http) return;
    pthread_mutex_lock(&s->http->mu);
    w->receiving = !received;
    if (!received) w->t0 = now_s();
    pthread_mutex_unlock(&s->http->mu);
}

/* ---------------------------------------------------------------- request log */

/* What the log line of a request says about it, from its first call. */
static void note_request(struct conn *k, struct MHD_Connection *c, const char *method,
                         const char *url)
{
    k->t0 = now_s();
    snprintf(k->method, sizeof k->method, "%s", method);
    snprintf(k->path, sizeof k->path, "%s", url);
    for (char *p = k->path; *p; p++) /* one line, whatever the path holds */
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (!sa || getnameinfo(sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                          : sizeof(struct sockaddr_in),
                           k->addr, sizeof k->addr, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(k->addr, sizeof k->addr, "-");
}

/* The request's line to the caller's callback (llama-server and vLLM log one): method,
 * path, status, time, client, and for a generation its tokens and how it ended; or its
 * fields apart to the callback of nb_server_set_request_log. */
static void log_request(struct nb_server *s, const struct conn *k,
                        enum MHD_RequestTerminationCode toe)
{
    char line[512], finish[SRV_MAX_CHOICES * 8] = "";
    struct nb_server_request_info r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.method = k->method;
    r.path = k->path;
    r.client = k->addr;
    r.status = k->status;
    r.seconds = now_s() - k->t0;
    r.prompt_tokens = -1;
    int n = snprintf(line, sizeof line, "%s %s %d %.3f s %s", k->method, k->path, k->status,
                     r.seconds, k->addr);
    const struct srv_job *j = k->n_jobs ? k->jobs[0] : NULL;
    if (j) {
        r.id = j->id;
        r.prompt_tokens = j->req.n_prompt;
        r.finish = finish;
    }
    if (j && j->req.kind == SRV_EMBED) {
        r.completion_tokens = j->emb_done;
        snprintf(finish, sizeof finish, "%s",
                 j->state != JOB_DONE ? "cut" : j->err.status ? "error" : "done");
        if (n > 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, " prompt %d inputs %d of %d %s",
                          j->req.n_prompt, j->emb_done, j->req.n_inputs, finish);
    } else if (j) {
        size_t f = 0;
        r.n_choices = k->n_jobs;
        for (int i = 0; i < k->n_jobs; i++) { /* each choice's */
            const struct srv_job *c = k->jobs[i];
            r.completion_tokens += c->n_gen;
            f += (size_t)snprintf(finish + f, sizeof finish - f, "%s%s", i ? "," : "",
                                  c->state != JOB_DONE ? "cut" : c->finish ? c->finish : "error");
        }
        if (n > 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, " prompt %d generated %d %s",
                          j->req.n_prompt, r.completion_tokens, finish);
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        r.termination = toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT     ? "client closed"
                        : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out"
                                                                        : "not completed";
        if (n > 0 && (size_t)n < sizeof line)
            snprintf(line + n, sizeof line - (size_t)n, " (%s)", r.termination);
    }
    r.line = line;
    if (s->log_info)
        s->log_info(&r, s->log_info_user);
    else
        s->p.log_request(line, s->p.log_user);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct nb_server *s = cls;
    struct conn *k = *con_cls;
    (void)version;
    /* a call after the first without data: the request is all read */
    if (k && !*upload_size && !k->received) {
        k->received = 1;
        watch_mark(s, c, 1);
    }
    if (!k) {
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        k->s = s;
        k->fd = -1;
        k->route = route_of(url);
        k->c = c;
        k->expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT) != NULL;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) k->fd = ci->connect_fd;
        if (s->p.log_request || s->log_info) note_request(k, c, method, url);
        *con_cls = k;
        enum MHD_Result ret;
        if (check_head(k, c, url, method, &ret)) return ret;
        return MHD_YES;
    }
    if (k->answered) { /* answered early: the rest of the body is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (k->n_jobs) return plain_answer(k, c); /* resumed: a job has news */
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (k->too_large || k->too_busy || k->n + n > (size_t)s->p.max_body) {
            k->too_large |= !k->too_busy;
            return MHD_YES;
        }
        /* without Content-Length (chunked) the body is held as it grows */
        if (k->n + n + 1 > k->held && hold_body(s->http, k, k->n + n + 1 - k->held) < 0) {
            k->too_busy = 1;
            return MHD_YES;
        }
        if (k->n + n + 1 > k->cap) {
            /* the size announced (held) at once, else doubling */
            size_t cap = k->held >= k->n + n + 1 ? k->held : k->cap ? k->cap : 4096;
            while (cap < k->n + n + 1)
                cap *= 2;
            char *p = realloc(k->body, cap);
            if (!p) return MHD_NO;
            k->body = p;
            k->cap = cap;
        }
        memcpy(k->body + k->n, upload, n);
        k->n += n;
        k->body[k->n] = '\0';
        return MHD_YES;
    }
    if (k->too_busy) {
        drop_body(s->http, k);
        return fail_now(k, c, 503, "server_busy", "Retry-After", "1",
                        "the server holds as many request bodies as it takes; retry later");
    }
    if (k->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than %lld bytes",
                 (long long)s->p.max_body);
        return fail_now(k, c, 413, "request_too_large", NULL, NULL, msg);
    }
    switch (k->route) {
    case R_PAGE: return page(k, c);
    case R_HEALTH: {
        pthread_mutex_lock(&s->mu);
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        return answer(k, c, stopping ? 503 : 200, "application/json",
                      strdup(stopping ? "{\"status\":\"shutting down\"}" : "{\"status\":\"ok\"}"),
                      NULL, NULL);
    }
    case R_MODELS: return answer(k, c, 200, "application/json", srv_json_models(s), NULL, NULL);
    case R_MODEL:
        if (strcmp(url + (strncmp(url, "/v1/", 4) ? 8 : 11), s->model_name)) {
            char msg[400];
            snprintf(msg, sizeof msg, "the model '%.200s' does not exist: this server has '%.150s'",
                     url + (strncmp(url, "/v1/", 4) ? 8 : 11), s->model_name);
            return fail_now(k, c, 404, "model_not_found", NULL, NULL, msg);
        }
        return answer(k, c, 200, "application/json", srv_json_model(s), NULL, NULL);
    case R_METRICS: return metrics(k, c);
    case R_COMPLETIONS:
    case R_CHAT:
    case R_EMBED: return completion(k, c);
    default: return MHD_NO;
    }
}

/* The request is over (answered, failed, or the client went away). */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct nb_server *s = cls;
    struct conn *k = *con_cls;
    watch_mark(s, c, 0); /* a keep-alive connection: the next request's deadline runs */
    if (!k) return;
    if (s->p.log_request || s->log_info) log_request(s, k, toe);
    drop_body(s->http, k);
    pthread_mutex_lock(&s->mu);
    if (k->parked) unlink_parked(s->http, k); /* MHD ends it: nothing to resume */
    if (k->n_jobs) s->n_answering--;
    cancel_jobs(s, k);
    for (int i = 0; i < k->n_jobs; i++) {
        k->jobs[i]->wake = NULL; /* the job may outlive this request */
        k->jobs[i]->fd = -1;
    }
    for (int i = k->n_jobs - 1; i >= 0; i--) /* the first (the request's owner) last */
        srv_job_release(s, k->jobs[i]);
    pthread_mutex_unlock(&s->mu);
    free(k->pend);
    free(k);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------- read deadlines */

/* MHD: a connection opened (tracked from now) or closed (before its socket is). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct nb_server *s = cls;
    struct srv_http *h = s->http;
    int delta = 0, cut = 0;
    pthread_mutex_lock(&h->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct watch *w = calloc(1, sizeof *w);
        if (w && ci) { /* without memory the connection goes untracked (no deadline) */
            w->fd = ci->connect_fd;
            w->t0 = now_s();
            w->receiving = 1;
            w->next = h->head;
            if (h->head) h->head->prev = w;
            h->head = w;
            delta = 1;
        } else {
            free(w);
            w = NULL;
        }
        *socket_context = w;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        struct watch *w = *socket_context;
        if (w->prev)
            w->prev->next = w->next;
        else
            h->head = w->next;
        if (w->next) w->next->prev = w->prev;
        cut = w->cut;
        free(w);
        *socket_context = NULL;
        delta = -1;
    }
    pthread_mutex_unlock(&h->mu);
    if (delta) {
        pthread_mutex_lock(&s->mu);
        s->met.connections += delta;
        if (cut) s->met.read_timeouts++;
        pthread_mutex_unlock(&s->mu);
    }
}

/* The deadline thread: every 100 ms, shut down the connections still reading a request
 * read_timeout_s after their wait began, and look at the parked ones (check_parked). */
static void *deadlines(void *arg)
{
    struct nb_server *s = arg;
    struct srv_http *h = s->http;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        double now = now_s();
        if (s->p.read_timeout_s > 0)
            for (struct watch *w = h->head; w; w = w->next)
                if (w->receiving && !w->cut && now - w->t0 > s->p.read_timeout_s) {
                    w->cut = 1;
                    shutdown(w->fd, SHUT_RDWR);
                }
        pthread_mutex_unlock(&h->mu); /* never held with s->mu */
        check_parked(s);
        pthread_mutex_lock(&h->mu);
        if (!h->stop) srv_wait_ms(&h->cv, &h->mu, 100);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void http_free(struct nb_server *s)
{
    struct srv_http *h = s->http;
    if (!h) return;
    if (h->started) {
        pthread_mutex_lock(&h->mu);
        h->stop = 1;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
    }
    while (h->head) { /* none once the daemon is stopped; a failed start may leave some */
        struct watch *w = h->head;
        h->head = w->next;
        free(w);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->gate_cv);
    pthread_mutex_destroy(&h->gate_mu);
    free(h);
    s->http = NULL;
}

/* ---------------------------------------------------------------- the daemon */

enum nb_status srv_http_start(struct nb_server *s)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->p.port);
    int rc = getaddrinfo(s->host, port, &hints, &ai);
    if (rc || !ai)
        return nb_set_error(NB_ERR_INVALID_ARG, "serve: host '%s': %s", s->host,
                            rc ? gai_strerror(rc) : "no address");
    struct sockaddr_storage addr;
    memcpy(&addr, ai->ai_addr, ai->ai_addrlen < sizeof addr ? ai->ai_addrlen : sizeof addr);
    int v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    /* a connection that makes no progress this long is closed: an unused keep-alive, or
     * a client that takes nothing of its answer (the send deadline) */
    s->idle_s = s->p.timeout_s < 30 ? (unsigned)(s->p.timeout_s > 1 ? s->p.timeout_s : 1) : 30;
    unsigned idle = s->idle_s;
    /* MHD's thread pool, each thread an epoll loop (MHD_USE_AUTO picks epoll on Linux);
     * connections wait for their jobs suspended */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                     (v6 ? MHD_USE_IPv6 : 0);
    struct srv_http *h = calloc(1, sizeof *h);
    if (!h) return nb_set_error(NB_ERR_NOMEM, "serve: out of memory");
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    pthread_mutex_init(&h->gate_mu, NULL);
    pthread_cond_init(&h->gate_cv, NULL);
    size_t max_body = (size_t)s->p.max_body;
    h->body_budget = 16 * max_body > ((size_t)64 << 20) ? 16 * max_body : (size_t)64 << 20;
    h->parse_budget = PARSE_BUDGET;
    /* the most a request can use: 64 embeddings inputs of a context each, and room for
     * the rest (messages, tools, logit_bias) */
    h->max_values = (size_t)64 * (size_t)s->n_ctx + 65536;
    s->http = h;
    /* the HTTP threads run on any core: not on the one the engine's thread was pinned to
     * (nb_pool_init pins its caller), which they would inherit, preempting the engine at
     * every token it sends them */
    cpu_set_t pinned, any;
    int repin = !pthread_getaffinity_np(pthread_self(), sizeof pinned, &pinned);
    CPU_ZERO(&any);
    for (int i = 0; i < CPU_SETSIZE && i < nb_cpu_count(); i++)
        CPU_SET(i, &any);
    if (repin) pthread_setaffinity_np(pthread_self(), sizeof any, &any);
    int te = pthread_create(&h->thread, NULL, deadlines, s);
    if (te) {
        if (repin) pthread_setaffinity_np(pthread_self(), sizeof pinned, &pinned);
        http_free(s);
        return nb_set_error(NB_ERR_INTERNAL, "serve: cannot start a thread: %s", strerror(te));
    }
    h->started = 1;
    /* each connection is a socket: the soft limit of open files raised (to the hard
     * one at most) so that max_connections can be open, else fewer are taken */
    unsigned max_conn = (unsigned)s->p.max_connections;
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rlim_t need = (rlim_t)max_conn + 64;
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
            rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
            max_conn = rl.rlim_cur > 128 ? (unsigned)(rl.rlim_cur - 64) : 64;
    }
    /* 0: no limit per address */
    unsigned per_ip = (unsigned)s->p.max_conn_per_ip;
    errno = 0;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)s->p.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
        MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_CONNECTION_TIMEOUT, idle,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, NULL, MHD_OPTION_END);
    int started_errno = errno;
    if (repin) pthread_setaffinity_np(pthread_self(), sizeof pinned, &pinned);
    errno = started_errno;
    if (!s->mhd) {
        int e = errno;
        http_free(s);
        errno = e;
    }
    if (!s->mhd)
        return nb_set_error(NB_ERR_IO, "serve: cannot listen on %s port %d%s%s", s->host, s->p.port,
                            errno ? ": " : "", errno ? strerror(errno) : "");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_LISTEN_FD);
    s->port = s->p.port;
    if (di) {
        struct sockaddr_storage bound;
        socklen_t len = sizeof bound;
        if (!getsockname(di->listen_fd, (struct sockaddr *)&bound, &len))
            s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                        : ((struct sockaddr_in *)&bound)->sin_port);
    }
    return NB_OK;
}

void srv_http_quiesce(struct nb_server *s)
{
    if (s->mhd && s->listen_fd < 0) {
        MHD_socket fd = MHD_quiesce_daemon(s->mhd);
        if (fd != MHD_INVALID_SOCKET) s->listen_fd = fd;
    }
}

void srv_http_stop(struct nb_server *s)
{
    if (s->http) { /* MHD must not be stopped with suspended connections */
        pthread_mutex_lock(&s->mu);
        s->http->closing = 1;
        while (s->http->parked)
            unpark(s, s->http->parked);
        pthread_mutex_unlock(&s->mu);
    }
    if (s->mhd) MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    http_free(s);
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
}
