/* server/server.h — internal to server/: the pieces of `nibble serve` (nibble.h's
 * nb_server_*) and what they share.
 *
 *   http.c     libmicrohttpd: routing, API key, body limit, responses, server-sent events,
 *              the chat page (GET /, webui/index.html compiled in)
 *   openai.c   request JSON -> struct srv_request (checked, tokenized), result -> JSON
 *   embed.c    /v1/embeddings: its request and its answer (run by sched.c: nb_embed)
 *   sched.c    the engine: queue, slots, one batched nb_decode per step (continuous
 *              batching), per-request sampling, stop strings, cancel and timeouts
 *   metrics.c  counters and histograms, Prometheus text
 *
 * Threads: libmicrohttpd's pool of HTTP threads (http.c); the engine runs on the thread
 * of nb_server_run and alone touches the context. They meet under srv->mu: a connection
 * submits a job per choice of its request and parks; the engine appends a job's text
 * and calls its wake hook, which resumes the connection.
 */
#ifndef NB_SERVER_SERVER_H
#define NB_SERVER_SERVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "nibble.h"
#include "nibble_server.h"
#include "runtime/constrain.h"
#include "runtime/gbnf.h"
#include "tokenizer/jinja.h"
#include "tokenizer/tokenizer.h"

/* Wait on cv (mu held) for at most ms milliseconds; a signal may end it sooner. */
static inline void srv_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ---------------------------------------------------------------- requests */

enum srv_kind { SRV_COMPLETION, SRV_CHAT, SRV_EMBED };

/* An answer that is an OpenAI error object:
 * {"error":{"message":..,"type":..,"param":..,"code":..}} with HTTP status `status`. */
struct srv_error {
    int status;       /* 400, 401, 404, 405, 413, 500, 503 */
    const char *type; /* "invalid_request_error", "server_error" */
    const char *code; /* NULL: null */
    char param[64];   /* "": null */
    char message[512];
};
/* Fill *e and return 0 (so a parser can `return srv_fail(...)`). */
int srv_fail(struct srv_error *e, int status, const char *param, const char *code, const char *fmt,
             ...) __attribute__((format(printf, 5, 6)));

#define SRV_MAX_STOPS        16
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_TOOLS        128
#define SRV_MAX_CALLS        8 /* tool calls in one answer to tool_choice "required" */
#define SRV_MAX_BIAS         1024 /* logit_bias entries */
#define SRV_MAX_DRAFT        16 /* --lookup: draft tokens a step at most */
#define SRV_MAX_EMBED_INPUTS 64 /* /v1/embeddings: inputs in one request */
#define SRV_MAX_CHOICES      8  /* "n": choices of one request, a job each */

/* tool_choice: none (no tools rendered or parsed), auto (calls parsed from free text),
 * required / a named function (the output constrained to one call). */
enum srv_tool_choice { SRV_TC_NONE, SRV_TC_AUTO, SRV_TC_REQUIRED, SRV_TC_NAMED };
/* How the model family writes a call: Qwen/Hermes <tool_call>{"name", "arguments"}
 * </tool_call>, or Llama 3.1's bare {"name", "parameters"}. */
enum srv_tool_format { SRV_FMT_HERMES, SRV_FMT_LLAMA3 };

/* A request as the engine runs it. Strings and arrays are owned (srv_request_free). */
struct srv_request {
    enum srv_kind kind;
    int stream, include_usage;
    int32_t *prompt; /* [n_prompt] */
    int n_prompt;
    int max_tokens; /* -1: not given */
    struct nb_sampler_params sp;
    int seed_given;
    int n_choices; /* "n": the choices asked for (1..SRV_MAX_CHOICES), a job each */
    int32_t *bias_id; /* logit_bias: [n_bias] token ids and their biases */
    float *bias;
    int n_bias;
    char *stops[SRV_MAX_STOPS];
    int n_stops;
    int logprobs;     /* report each token's log-probability */
    int top_logprobs; /* and the most likely alternatives (0..SRV_MAX_TOP_LOGPROBS) */
    /* tools (server/toolcall.c, openai.c) */
    char **tools; /* the function names offered [n_tools] */
    int n_tools;
    enum srv_tool_choice tool_choice;
    int parallel_calls; /* parallel_tool_calls (default true): "required" may make several */
    enum srv_tool_format tool_format;
    int json_format;             /* response_format json_object / json_schema */
    struct nb_gram *grammar; /* the output's constraint, or NULL */
    struct nb_gbnf *gbnf;    /* or a GBNF grammar: the request's "grammar" (llama-server's) */
    /* the schemas enforced (constrain.h): json_schema's, each tool's parameters' [n_tools]
     * (NULL: none given, or outside the subset and not strict: any object) */
    struct nb_schema *schema;
    struct nb_schema **tool_schemas;
    /* a chat answer's <think>...</think> goes to reasoning_content (reasoning.c);
     * think_open: the prompt itself ends with <think> (the answer starts inside it) */
    int reasoning, think_open;
    /* embeddings: input i is prompt[emb_off[i]..emb_off[i + 1]) [n_inputs + 1]; base64:
     * encoding_format "base64" */
    int *emb_off;
    int n_inputs, base64;
};
void srv_request_free(struct srv_request *r);
/* Is the answer parsed for tool calls (chat, tools offered, tool_choice not "none")? Its
 * text then keeps special tokens' text (Qwen's <tool_call> is one). */
int srv_request_parses_tools(const struct srv_request *r);

/* What openai.c needs of the model to read a request. */
struct srv_model {
    const struct nb_tokenizer *tok;
    struct nb_chat_template tpl; /* the built-in family: the fallback */
    struct nb_jinja *jinja;      /* the model's own template parsed, or NULL (tokenizer/jinja.h) */
    const char *bos_text, *eos_text;
    int n_vocab, n_ctx, n_embd;
    struct nb_sampler_params sp;      /* the server's defaults */
    const struct nb_vocab_bytes *vb; /* each token's bytes, for constrained decoding */
    int reasoning; /* the template thinks in <think> and --reasoning-format is not none */
};

/* Check that body[0..len) is valid UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF): 1, else 0. */
int srv_utf8_valid(const char *s, size_t len);
/* Parse and check a request body of `kind`, tokenize its prompt. 0 and *r filled, or -1
 * and *e (the 4xx to answer). */
int srv_parse_request(const struct srv_model *m, enum srv_kind kind, const char *body, size_t len,
                      struct srv_request *r, struct srv_error *e);
/* The same for an embeddings body (embed.c): its inputs tokenized into r->prompt. */
int srv_parse_embed(const struct srv_model *m, const char *body, size_t len, struct srv_request *r,
                    struct srv_error *e);
struct cJSON;
/* openai.c's start of a body: valid UTF-8 without NUL, one JSON object; NULL and *e. */
struct cJSON *srv_parse_body(const char *body, size_t len, struct srv_error *e);

/* ---------------------------------------------------------------- reasoning */

/* Where the reasoning of a chat answer text[0..len) is. An answer that opens with
 * <think> (after whitespace), or any answer when `open` (the prompt ended with <think>),
 * reasons up to </think> (or its end); the content follows, less the whitespace after
 * </think>. Without <think> the whole is content. `done`: the answer is complete; else a
 * stream's text so far, and `safe` says how much of it is settled (not a part of a tag
 * that may be completed by what comes). */
struct srv_think {
    int found;           /* there is reasoning */
    size_t r_from, r_to; /* the reasoning: text[r_from..r_to) */
    size_t c_from;       /* the content: text[c_from..len) */
    size_t safe;         /* a stream may send text[0..safe) */
};
void srv_think_split(const char *text, size_t len, int open, int done, struct srv_think *t);

/* ---------------------------------------------------------------- tool calls */

/* The tool-call format of the model's template (its Jinja source, else the family). */
enum srv_tool_format srv_tool_format_of(const struct srv_model *m);
/* The grammar of one call to one of names[0..n) in format f (constrain.h). 0, or -1 when
 * out of memory. */
int srv_tool_grammar(struct nb_gram *g, enum srv_tool_format f, char *const *names, int n);
/* The same with each function's arguments kept to schemas[i] (NULL entries, or schemas
 * NULL: any object); the schemas are borrowed (they outlive the grammar). */
int srv_tool_grammar_schema(struct nb_gram *g, enum srv_tool_format f, char *const *names,
                            const struct nb_schema *const *schemas, int n);

struct srv_tool_call {
    char *name;
    char *arguments; /* JSON text of an object */
};
/* The calls in generated text (format f; only to names[0..n_names)) and the text outside
 * them (content, malloc'd, NULL when it is empty or only whitespace). A call that is not
 * well formed (not JSON, another name, no object of arguments) stays in the content.
 * 0, or -1 when out of memory. */
int srv_tool_calls_parse(const char *text, size_t len, enum srv_tool_format f, char *const *names,
                         int n_names, struct srv_tool_call **calls, int *n_calls, char **content);
void srv_tool_calls_free(struct srv_tool_call *calls, int n);
/* A stream of text that may hold calls: how many of its first `len` bytes can go out as
 * content now (the text before anything that may start a call; whitespace held while all
 * is whitespace). */
size_t srv_tool_text_safe(const char *text, size_t len, enum srv_tool_format f);
/* tool_choice auto: where a call begins in buf[0..n) of generated text, or -1 (Hermes:
 * "<tool_call>"; Llama 3: the answer's first byte but whitespace is '{', at_start saying
 * that only whitespace came before buf). */
long srv_tool_call_start(const char *buf, size_t n, enum srv_tool_format f, int at_start);

/* ---------------------------------------------------------------- jobs */

/* A generated token's log-probability under the model (log-softmax of its logits, before
 * temperature and filters) and the top alternatives. */
struct srv_logprob {
    int32_t tok;
    float lp;
    int n_top;
    int32_t top_tok[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
};
/* Fill *out from one row of logits (n_vocab floats, not modified) for token `tok`. */
void srv_logprob_of(const float *logits, int n_vocab, int32_t tok, int n_top,
                    struct srv_logprob *out);

enum srv_job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

/* One request between its connection and the engine. `refs` (under srv->mu): the
 * connection's and, from submit until the engine lets go, the engine's. */
struct srv_job {
    struct srv_job *next; /* in the queue */
    int refs;
    struct srv_request req;
    char id[48];     /* the request's: a job of choice i > 0 has its first job's */
    int64_t created; /* unix seconds */
    int index;       /* its choice's index in the answer */
    /* a job of choice i > 0: the job of choice 0, whose request (req, a shallow copy
     * here but for the seed) it reads and holds a reference to */
    struct srv_job *first;
    double t_submit, deadline;
    int fd;          /* the client's socket (-1: none): a full queue checks who is gone */

    /* engine side (only the engine thread touches these once submitted) */
    int slot;
    int n_past;     /* prompt tokens in the cache */
    int n_cached;   /* of those, found there (a shared prefix) rather than prefilled */
    int32_t last;   /* the token to decode next */
    int max_tokens; /* after clamping to the context */
    struct nb_sampler *sampler;
    struct nb_text_out *out; /* the token -> text step: detokenizer and stop strings */
    struct nb_cons cons; /* where the output is in the grammar (job_grammar in sched.c) */
    struct nb_gbstate *gbs; /* where it is in req.gbnf's */
    /* tool_choice auto: the call's grammar, on from where the model begins a call (the
     * wrapper written) until the call is complete */
    struct nb_gram *auto_g;
    int auto_on;
    char tail[16]; /* the last bytes generated while off (a wrapper split over tokens) */
    int tail_n;
    int any_text;      /* Llama 3: something but whitespace generated (a call comes first) */
    double t_prev;     /* the previous token, for the inter-token histogram */
    double t_first;    /* the first token (the prompt done): the response's timings */
    struct nb_sequence *seq; /* its slot's sequence (the library's: runtime/sequence.h) */
    int n_gen_counted; /* of n_gen, in the metrics already */
    float *emb;     /* embeddings: [req.n_inputs][n_embd], emb_done of them run */
    int emb_done;

    /* shared, under srv->mu */
    enum srv_job_state state;
    int cancel; /* the client went away: the engine drops it */
    char *text; /* generated text so far [text_len] */
    size_t text_len, text_cap;
    struct srv_logprob *lps; /* with req.logprobs: one per generated token [n_lps] */
    int n_lps, lps_cap;
    int n_gen;
    const char *finish;   /* "stop", "length" once done (NULL: error) */
    struct srv_error err; /* err.status != 0: failed */
    /* called on new text, when done and when cancelled (under mu): the connection that
     * waits for the job, suspended, resumes (http.c); NULL once it has gone */
    void (*wake)(void *arg);
    void *wake_arg;
};

/* ---------------------------------------------------------------- metrics */

#define SRV_N_STATUS 9
#define SRV_HIST_MAX 16
struct srv_hist {
    int n_bounds;
    double bound[SRV_HIST_MAX];
    uint64_t count[SRV_HIST_MAX + 1]; /* per bucket, the last one +Inf */
    uint64_t n;
    double sum;
};
void srv_hist_init(struct srv_hist *h, const double *bounds, int n);
void srv_hist_add(struct srv_hist *h, double v);

struct srv_metrics {
    uint64_t requests[SRV_N_STATUS]; /* by srv_status_index */
    uint64_t prompt_tokens, gen_tokens, steps, step_tokens;
    uint64_t lookup_drafted, lookup_accepted; /* --lookup: draft tokens verified, confirmed */
    struct srv_hist ttft, itl;
    struct nb_kv_usage kv; /* the engine's snapshot after each step */
    int64_t kv_blocks_peak; /* the most blocks_used of those snapshots */
    uint64_t prompt_tokens_cached; /* prompt tokens found in the KV cache, not prefilled */
    uint64_t read_timeouts; /* connections closed for sending too slowly (http.c) */
    int connections;        /* open connections (http.c) */
};
/* The index of an HTTP status in requests[] (the last: any other). */
int srv_status_index(int status);
/* The Prometheus text of the metrics and the gauges given. malloc'd. */
char *srv_metrics_text(const struct srv_metrics *m, int queued, int running, int n_slots);

/* ---------------------------------------------------------------- the server */

struct MHD_Daemon;
struct srv_http;

struct nb_server {
    struct nb_server_params p;
    char model_name[256], host[256], api_key[512];
    int64_t created; /* unix seconds the server started: /v1/models' "created" */
    struct srv_model m;
    struct nb_vocab_bytes vb;
    struct nb_ctx *ctx;
    int n_ctx;
    int n_embd;
    enum nb_pooling pooling; /* of /v1/embeddings (nb_server_set_pooling) */
    /* the request log for machines (nb_server_set_request_log), NULL: none */
    void (*log_info)(const struct nb_server_request_info *r, void *user);
    void *log_info_user;
    int port;
    struct MHD_Daemon *mhd;
    int listen_fd;   /* after quiesce: closed once the daemon is stopped */
    unsigned idle_s; /* the daemon's idle timeout of a connection */
    struct srv_http *http; /* http.c's own: the connections' read deadlines */
    int stop_pipe[2];
    pthread_t watcher;
    int watcher_started;

    pthread_mutex_t mu;
    pthread_cond_t engine_cv; /* a job arrived, was cancelled, or stop */
    struct srv_job *q_head, *q_tail;
    int n_queued;
    struct srv_job **slots; /* [n_slots]: the running job of each sequence, or NULL */
    int n_running;
    int stopping;    /* nb_server_stop was called */
    int accepting;   /* submit takes jobs (cleared when the engine has drained) */
    uint64_t n_jobs; /* for ids and seeds */
    int n_answering; /* requests with a job whose answer is not yet fully sent */
    struct srv_metrics met;
};

/* sched.c */
/* Queue jobs[0..n) (a request's choices) together or none: 0: queued; -1: the slots and
 * the queue have no room for all n (503 + Retry-After), -2: the server is stopping. Takes
 * a reference to each for the engine. */
int srv_submit(struct nb_server *s, struct srv_job *const *jobs, int n);
/* The client of socket fd is gone: the connection was reset or failed (a client that
 * only shut down its sending side, HTTP's half-close, still reads: not gone); 0 for
 * fd < 0. */
int srv_peer_gone(int fd);
/* The engine loop (nb_server_run): until stopped and drained. */
enum nb_status srv_engine_run(struct nb_server *s);
/* embed.c: the next input of embeddings job j (running in its slot) into j->emb (engine
 * thread, outside the lock); j->err on a failure. */
void srv_embed_step(struct nb_server *s, struct srv_job *j);
/* Stop taking jobs; end every queued and running one with a 503 (connections waiting for
 * them are woken). For a server that is stopped without its engine running. */
void srv_engine_abort(struct nb_server *s);
/* A new job for request r (moved into it), with its sampler, detokenizer and stop
 * matcher; one reference (the connection's). NULL when out of memory. */
struct srv_job *srv_job_new(struct nb_server *s, struct srv_request *r);
/* The job of choice `index` (1..n_choices - 1) of the request of `first` (choice 0's
 * job), sharing its request and id; its seed is the request's plus index (a request
 * without a seed: its own, as srv_job_new gives). NULL when out of memory. */
struct srv_job *srv_job_choice(struct nb_server *s, struct srv_job *first, int index);
/* Drop a reference (under s->mu); the last frees the job. */
void srv_job_release(struct nb_server *s, struct srv_job *j);

/* openai.c: response bodies (malloc'd JSON). */
char *srv_json_error(const struct srv_error *e);
/* The answer of a request's finished jobs[0..n) (its choices). */
char *srv_json_result(const struct nb_server *s, struct srv_job *const *jobs, int n);
/* A stream's text that can go out as content now: all of it, or for a job whose output
 * is parsed for tool calls, what comes before anything that may start one. */
size_t srv_stream_sendable(const struct srv_job *j);
/* At the end of a chat stream whose output is parsed for tool calls: the chunks (JSON,
 * malloc'd, *events[0..*n_events)) of the content not sent yet (after its first `sent`
 * bytes) and of each call (its id, type and name, then its arguments). 0, or -1 out of
 * memory. */
int srv_json_tool_chunks(const struct nb_server *s, const struct srv_job *j, size_t sent,
                         char ***events, int *n_events);
/* One server-sent-event chunk (without "data: ") of choice j->index: text delta (with the
 * log-probabilities of tokens lp_from..lp_to), or the end (finish set). */
char *srv_json_chunk(const struct nb_server *s, const struct srv_job *j, const char *delta,
                     size_t n_delta, int first, const char *finish, int lp_from, int lp_to);
/* The usage chunk of a stream whose choices are jobs[0..n). */
char *srv_json_usage_chunk(const struct nb_server *s, struct srv_job *const *jobs, int n);
/* The chunk of the text j->text[from..to) (to: srv_stream_sendable): a content delta, or
 * with reasoning the parts of it that are reasoning_content and content. */
char *srv_json_text_chunk(const struct nb_server *s, const struct srv_job *j, size_t from,
                          size_t to, int lp_from, int lp_to);
char *srv_json_models(const struct nb_server *s);
/* embed.c: the answer of a finished embeddings job. */
char *srv_json_embed(const struct nb_server *s, const struct srv_job *j);
/* The one model's object (GET /v1/models/ID). */
char *srv_json_model(const struct nb_server *s);

/* The chat page (src/server/webui/index.html) and its Content-Security-Policy, which
 * allows only the page's own inline script and style (by their SHA-256) and requests to
 * this server: generated into the build by cmake/embed_webui.cmake. */
extern const char srv_webui_html[];
extern const size_t srv_webui_size;
extern const char srv_webui_csp[];

/* http.c */
enum nb_status srv_http_start(struct nb_server *s);
void srv_http_quiesce(struct nb_server *s);
void srv_http_stop(struct nb_server *s);

#endif
