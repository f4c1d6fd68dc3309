/* server/metrics.c — what GET /metrics answers, in Prometheus' text format (version
 * 0.0.4): counters, gauges and two latency histograms. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const int k_status[SRV_N_STATUS - 1] = {200, 400, 401, 404, 405, 413, 500, 503};

int srv_status_index(int status)
{
    for (int i = 0; i < SRV_N_STATUS - 1; i++)
        if (k_status[i] == status) return i;
    return SRV_N_STATUS - 1;
}

void srv_hist_init(struct srv_hist *h, const double *bounds, int n)
{
    memset(h, 0, sizeof *h);
    h->n_bounds = n < SRV_HIST_MAX ? n : SRV_HIST_MAX;
    memcpy(h->bound, bounds, sizeof *bounds * (size_t)h->n_bounds);
}

void srv_hist_add(struct srv_hist *h, double v)
{
    int i = 0;
    while (i < h->n_bounds && v > h->bound[i])
        i++;
    h->count[i]++;
    h->n++;
    h->sum += v;
}

/* A growing text buffer. */
struct out {
    char *p;
    size_t n, cap;
    int oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !o->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(o->p ? o->p + o->n : NULL, o->p ? o->cap - o->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            o->oom = 1;
            return;
        }
        if (o->p && o->n + (size_t)k < o->cap) {
            o->n += (size_t)k;
            return;
        }
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + (size_t)k + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->oom = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
}

/* One counter or gauge: its HELP and TYPE lines and its value. */
static void scalar(struct out *o, const char *name, const char *type, const char *help, long long v)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, v);
}

static void hist(struct out *o, const char *name, const char *help, const struct srv_hist *h)
{
    put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int i = 0; i < h->n_bounds; i++) {
        cum += h->count[i];
        put(o, "%s_bucket{le=\"%g\"} %llu\n", name, h->bound[i], (unsigned long long)cum);
    }
    put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
        (unsigned long long)h->n, name, h->sum, name, (unsigned long long)h->n);
}

char *srv_metrics_text(const struct srv_metrics *m, int queued, int running, int n_slots)
{
    struct out o = {0};
    put(&o, "# HELP nibble_requests_total HTTP requests answered, by status code.\n"
            "# TYPE nibble_requests_total counter\n");
    for (int i = 0; i < SRV_N_STATUS; i++)
        if (i < SRV_N_STATUS - 1)
            put(&o, "nibble_requests_total{status=\"%d\"} %llu\n", k_status[i],
                (unsigned long long)m->requests[i]);
        else
            put(&o, "nibble_requests_total{status=\"other\"} %llu\n",
                (unsigned long long)m->requests[i]);
    scalar(&o, "nibble_prompt_tokens_total", "counter",
           "Prompt tokens of the requests run (cached ones included).",
           (long long)m->prompt_tokens);
    scalar(&o, "nibble_prompt_tokens_cached_total", "counter",
           "Prompt tokens found in the KV cache (a shared prefix), not prefilled.",
           (long long)m->prompt_tokens_cached);
    scalar(&o, "nibble_generated_tokens_total", "counter", "Tokens generated.",
           (long long)m->gen_tokens);
    scalar(&o, "nibble_decode_steps_total", "counter", "Batched forward steps run.",
           (long long)m->steps);
    scalar(&o, "nibble_step_tokens_total", "counter",
           "Tokens run by those steps (prompt and decode).", (long long)m->step_tokens);
    scalar(&o, "nibble_lookup_drafted_total", "counter",
           "Draft tokens prompt lookup (--lookup) put into steps.", (long long)m->lookup_drafted);
    scalar(&o, "nibble_lookup_accepted_total", "counter",
           "Of those, the drafts the sampler confirmed (tokens gained).",
           (long long)m->lookup_accepted);
    scalar(&o, "nibble_queue_depth", "gauge", "Requests waiting for a slot.", queued);
    scalar(&o, "nibble_slots_running", "gauge", "Slots running a request.", running);
    scalar(&o, "nibble_slots_total", "gauge", "Slots (sequences decoded together).", n_slots);
    scalar(&o, "nibble_kv_blocks_used", "gauge", "KV pool blocks in use.",
           (long long)m->kv.blocks_used);
    scalar(&o, "nibble_kv_blocks_total", "gauge", "KV pool blocks in all.",
           (long long)m->kv.blocks_total);
    scalar(&o, "nibble_kv_bytes_used", "gauge", "Bytes of the KV blocks in use.",
           (long long)m->kv.bytes_used);
    scalar(&o, "nibble_kv_blocks_peak", "gauge", "The most KV pool blocks in use at once.",
           (long long)m->kv_blocks_peak);
    scalar(&o, "nibble_connections", "gauge", "Open HTTP connections.", m->connections);
    scalar(&o, "nibble_read_timeouts_total", "counter",
           "Connections closed for not sending their request within the read timeout.",
           (long long)m->read_timeouts);
    hist(&o, "nibble_time_to_first_token_seconds",
         "From a request's arrival to its first generated token.", &m->ttft);
    hist(&o, "nibble_inter_token_seconds", "Between two tokens of one request.", &m->itl);
    if (o.oom) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
