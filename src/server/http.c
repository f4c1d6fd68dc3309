/* server/http.c — HTTP on libmicrohttpd, one thread per connection.
 *
 * A request's first call checks what can be checked before its body (route, method, API
 * key, Content-Length against the body limit) and answers at once when that fails; the
 * body is gathered up to the limit; the last call parses it (openai.c) and submits a job
 * (sched.c). A plain response waits for the job on this connection's thread; a stream is
 * a response whose reader waits for the job's next text and writes it as server-sent
 * events. While waiting, the socket is watched: a client that hung up cancels its job,
 * and the engine frees its sequence at the next step.
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
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/error.h"
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

/* The read deadlines (s->http). */
struct srv_http {
    pthread_mutex_t mu; /* the list; never held with s->mu */
    pthread_cond_t cv;
    struct watch *head;
    int stop;
    pthread_t thread;
    int started;
};

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
    int too_large, answered;
    int fd;
    struct srv_job *job; /* a reference, released when the request completes */
    /* a stream: the events formatted and not yet handed to MHD */
    char *pend;
    size_t pend_n, pend_off, pend_cap;
    size_t sent;  /* bytes of job->text already in events */
    int lps_sent; /* of job->lps */
    int started, ended;
    int received; /* the whole request is read */
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

int srv_peer_gone(int fd)
{
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Under s->mu: wait until `ready` or the job is done; 0, or -1 when the client went away
 * (the job is then cancelled). */
static int wait_job(struct nb_server *s, struct conn *k, int (*ready)(const struct conn *))
{
    struct srv_job *j = k->job;
    while (j->state != JOB_DONE && !(ready && ready(k))) {
        srv_wait_ms(&j->cv, &s->mu, 200);
        if (j->state != JOB_DONE && srv_peer_gone(k->fd)) {
            j->cancel = 1;
            pthread_cond_signal(&s->engine_cv);
            return -1;
        }
    }
    return 0;
}

static int has_text(const struct conn *k)
{
    return srv_stream_sendable(k->job) > k->sent;
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

/* MHD's reader of a stream: the events not yet handed over, else wait for the job. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct conn *k = cls;
    struct nb_server *s = k->s;
    (void)pos;
    if (k->pend_off == k->pend_n) {
        if (k->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        k->pend_off = k->pend_n = 0;
        pthread_mutex_lock(&s->mu);
        struct srv_job *j = k->job;
        int rc = 0;
        if (!k->started) { /* the role first, so the client sees the stream open */
            k->started = 1;
            if (j->req.kind == SRV_CHAT)
                rc = event(k, srv_json_chunk(s, j, "", 0, 1, NULL, 0, 0, 0));
        }
        if (rc == 0 && k->pend_n == 0 && wait_job(s, k, has_text)) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (rc == 0 && has_text(k)) {
            size_t upto = srv_stream_sendable(j);
            rc = event(k, srv_json_text_chunk(s, j, k->sent, upto, k->lps_sent, j->n_lps));
            k->sent = upto;
            k->lps_sent = j->n_lps;
        }
        if (rc == 0 && j->state == JOB_DONE) {
            if (j->err.status) {
                rc = event(k, srv_json_error(&j->err));
            } else {
                char **ev = NULL; /* tool calls: the rest of the content and the calls */
                int n_ev = 0;
                rc = srv_json_tool_chunks(s, j, k->sent, &ev, &n_ev);
                for (int i = 0; i < n_ev; i++)
                    rc = rc ? (free(ev[i]), rc) : event(k, ev[i]);
                free(ev);
                if (rc == 0)
                    rc = event(
                        k, srv_json_chunk(s, j, NULL, 0, 0, j->finish, 0, k->lps_sent, j->n_lps));
                if (rc == 0 && j->req.include_usage)
                    rc = event(k, srv_json_chunk(s, j, NULL, 0, 0, NULL, 1, 0, 0));
            }
            if (rc == 0) rc = pend_add(k, "data: [DONE]", "", 0, "\n\n");
            k->ended = 1;
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

static enum MHD_Result completion(struct conn *k, struct MHD_Connection *c)
{
    struct nb_server *s = k->s;
    struct srv_request r;
    struct srv_error e;
    enum srv_kind kind = k->route == R_CHAT ? SRV_CHAT : SRV_COMPLETION;
    const char *body = k->body ? k->body : "";
    if (k->route == R_EMBED ? srv_parse_embed(&s->m, body, k->n, &r, &e)
                            : srv_parse_request(&s->m, kind, body, k->n, &r, &e))
        return answer_error(k, c, &e, NULL, NULL);
    struct srv_job *j = srv_job_new(s, &r);
    if (!j) {
        srv_request_free(&r);
        return fail_now(k, c, 500, NULL, NULL, NULL, "out of memory");
    }
    k->job = j;
    j->fd = k->fd;
    pthread_mutex_lock(&s->mu);
    s->n_answering++; /* until on_completed: a drain lets the answer out before stopping */
    pthread_mutex_unlock(&s->mu);
    int q = srv_submit(s, j);
    if (q == -1)
        return fail_now(k, c, 503, "server_busy", "Retry-After", "1",
                        "the server is busy: every slot is running and the queue is full; "
                        "retry later");
    if (q == -2)
        return fail_now(k, c, 503, "server_shutting_down", NULL, NULL,
                        "the server is shutting down");
    /* the engine times the job (--timeout): no idle timeout while it runs (the daemon's
     * would close a connection waiting for a long answer); back on when it completes */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
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
    pthread_mutex_lock(&s->mu);
    if (wait_job(s, k, NULL)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_NO; /* the client is gone: close */
    }
    char *out = j->err.status ? srv_json_error(&j->err)
                : j->req.kind == SRV_EMBED ? srv_json_embed(s, j) : srv_json_result(s, j);
    int status = j->err.status ? j->err.status : 200;
    pthread_mutex_unlock(&s->mu);
    return answer(k, c, status, "application/json", out, NULL, NULL);
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
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)s->p.max_body) {
        snprintf(msg, sizeof msg, "the request body is %.20s bytes: at most %lld are taken", cl,
                 (long long)s->p.max_body);
        *ret = fail_now(k, c, 413, "request_too_large", NULL, NULL, msg);
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
 * path, status, time, client, and for a generation its tokens and how it ended. */
static void log_request(struct nb_server *s, const struct conn *k,
                        enum MHD_RequestTerminationCode toe)
{
    char line[512];
    int n = snprintf(line, sizeof line, "%s %s %d %.3f s %s", k->method, k->path,
                     k->status, now_s() - k->t0, k->addr);
    const struct srv_job *j = k->job;
    if (j && j->req.kind == SRV_EMBED && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " prompt %d inputs %d of %d %s",
                      j->req.n_prompt, j->emb_done, j->req.n_inputs,
                      j->state != JOB_DONE ? "cut" : j->err.status ? "error" : "done");
    else if (j && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " prompt %d generated %d %s",
                      j->req.n_prompt, j->n_gen,
                      j->state != JOB_DONE ? "cut" : j->finish ? j->finish : "error");
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " (%s)",
                 toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? "client closed"
                 : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out"
                                                                 : "not completed");
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
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) k->fd = ci->connect_fd;
        if (s->p.log_request) note_request(k, c, method, url);
        *con_cls = k;
        enum MHD_Result ret;
        if (check_head(k, c, url, method, &ret)) return ret;
        return MHD_YES;
    }
    if (k->answered) { /* answered early: the rest of the body is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (k->too_large || k->n + n > (size_t)s->p.max_body) {
            k->too_large = 1;
            return MHD_YES;
        }
        if (k->n + n + 1 > k->cap) {
            size_t cap = k->cap ? k->cap : 4096;
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
    if (s->p.log_request) log_request(s, k, toe);
    pthread_mutex_lock(&s->mu);
    if (k->job) {
        s->n_answering--;
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, s->idle_s);
        if (k->job->state != JOB_DONE) {
            k->job->cancel = 1;
            pthread_cond_signal(&s->engine_cv);
        }
        srv_job_release(s, k->job);
    }
    pthread_mutex_unlock(&s->mu);
    free(k->body);
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
 * read_timeout_s after their wait began. */
static void *deadlines(void *arg)
{
    struct nb_server *s = arg;
    struct srv_http *h = s->http;
    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        double now = now_s();
        for (struct watch *w = h->head; w; w = w->next)
            if (w->receiving && !w->cut && now - w->t0 > s->p.read_timeout_s) {
                w->cut = 1;
                shutdown(w->fd, SHUT_RDWR);
            }
        srv_wait_ms(&h->cv, &h->mu, 100);
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
    /* an idle connection (a slow client, an unused keep-alive) is closed after this */
    s->idle_s = s->p.timeout_s < 30 ? (unsigned)(s->p.timeout_s > 1 ? s->p.timeout_s : 1) : 30;
    unsigned idle = s->idle_s;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_POLL | (v6 ? MHD_USE_IPv6 : 0);
    struct srv_http *h = calloc(1, sizeof *h);
    if (!h) return nb_set_error(NB_ERR_NOMEM, "serve: out of memory");
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    s->http = h;
    if (s->p.read_timeout_s > 0) {
        int e = pthread_create(&h->thread, NULL, deadlines, s);
        if (e) {
            http_free(s);
            return nb_set_error(NB_ERR_INTERNAL, "serve: cannot start a thread: %s", strerror(e));
        }
        h->started = 1;
    }
    /* 0: no limit per address */
    unsigned per_ip = (unsigned)s->p.max_conn_per_ip;
    errno = 0;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)s->p.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->p.max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_CONNECTION_TIMEOUT, idle,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, NULL, MHD_OPTION_END);
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
    if (s->mhd) MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    http_free(s);
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
}
