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
    put(&o,
        "# HELP nibble_prompt_tokens_total Prompt tokens prefilled.\n"
        "# TYPE nibble_prompt_tokens_total counter\nnibble_prompt_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens);
    put(&o,
        "# HELP nibble_generated_tokens_total Tokens generated.\n"
        "# TYPE nibble_generated_tokens_total counter\nnibble_generated_tokens_total %llu\n",
        (unsigned long long)m->gen_tokens);
    put(&o,
        "# HELP nibble_decode_steps_total Batched forward steps run.\n"
        "# TYPE nibble_decode_steps_total counter\nnibble_decode_steps_total %llu\n",
        (unsigned long long)m->steps);
    put(&o,
        "# HELP nibble_step_tokens_total Tokens run by those steps (prompt and decode).\n"
        "# TYPE nibble_step_tokens_total counter\nnibble_step_tokens_total %llu\n",
        (unsigned long long)m->step_tokens);
    put(&o,
        "# HELP nibble_queue_depth Requests waiting for a slot.\n"
        "# TYPE nibble_queue_depth gauge\nnibble_queue_depth %d\n",
        queued);
    put(&o,
        "# HELP nibble_slots_running Slots running a request.\n"
        "# TYPE nibble_slots_running gauge\nnibble_slots_running %d\n",
        running);
    put(&o,
        "# HELP nibble_slots_total Slots (sequences decoded together).\n"
        "# TYPE nibble_slots_total gauge\nnibble_slots_total %d\n",
        n_slots);
    put(&o,
        "# HELP nibble_kv_blocks_used KV pool blocks in use.\n"
        "# TYPE nibble_kv_blocks_used gauge\nnibble_kv_blocks_used %lld\n",
        (long long)m->kv.blocks_used);
    put(&o,
        "# HELP nibble_kv_blocks_total KV pool blocks in all.\n"
        "# TYPE nibble_kv_blocks_total gauge\nnibble_kv_blocks_total %lld\n",
        (long long)m->kv.blocks_total);
    put(&o,
        "# HELP nibble_kv_bytes_used Bytes of the KV blocks in use.\n"
        "# TYPE nibble_kv_bytes_used gauge\nnibble_kv_bytes_used %lld\n",
        (long long)m->kv.bytes_used);
    hist(&o, "nibble_time_to_first_token_seconds",
         "From a request's arrival to its first generated token.", &m->ttft);
    hist(&o, "nibble_inter_token_seconds", "Between two tokens of one request.", &m->itl);
    if (o.oom) {
        free(o.p);
        return NULL;
    }
    return o.p;
}
