/* nibble_server.h — the OpenAI-compatible HTTP server (`nibble serve`).
 * Part of libnibble's public API; see nibble.h for the conventions (statuses,
 * nb_last_error, versioned structs). */
#ifndef NIBBLE_SERVER_H
#define NIBBLE_SERVER_H

#include "nibble.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- server
 * `nibble serve`: an OpenAI-compatible HTTP server (docs/serve.md). HTTP runs on
 * libmicrohttpd's pool of 4 epoll threads (no thread per connection: a request waiting
 * for its job is suspended, and the engine resumes it); the model runs on the thread that calls
 * nb_server_run, which owns the context: its n_slots sequences decode together, one
 * batched forward step for every running request (continuous batching).
 * Lifetime and threads: the caller owns a server (nb_server_free, never while
 * nb_server_run runs); the model and tokenizer of its params, and log_user while
 * log_request is set, must outlive it; the strings of its params are copied or parsed
 * in nb_server_init and may be freed after it. nb_server_run runs on one thread at a
 * time; nb_server_stop may be called from any thread or a signal handler, and
 * nb_server_port from any thread. The server makes and owns its context. */

struct nb_server;

struct nb_server_params {
    size_t size;
    const struct nb_model *model;      /* loaded by the caller, outlives the server */
    const struct nb_tokenizer *tok;    /* the model's tokenizer, outlives the server */
    const char *model_name;            /* the id /v1/models lists and responses carry */
    const char *host;                  /* address to bind (default "127.0.0.1") */
    int port;                          /* 0: any free port (nb_server_port says which) */
    int n_slots;                       /* requests decoded together (default 4) */
    int n_predict;                     /* tokens a request without max_tokens gets at most
                                          (-1: until its context is full) */
    const char *chat_template;         /* a template name for chat requests; NULL: the
                                          tokenizer's own, else chatml */
    const char *api_key;               /* NULL or "": no key; else every request but
                                          GET /health needs "Authorization: Bearer KEY" */
    int64_t max_body;                  /* request bodies larger than this get 413 (1 MiB) */
    double timeout_s;                  /* a request waiting or running longer is ended (600) */
    int max_queue;                     /* requests waiting for a slot; more get 503 (64) */
    int max_connections;               /* open connections at most (1024) */
    double drain_s;                    /* after nb_server_stop, running requests get this
                                          long to finish before they are cut (30) */
    double read_timeout_s;             /* a request's headers and body must arrive within
                                          this of its connection's accept (or of the end of
                                          its previous request), else the connection is
                                          closed: slow clients (10; 0: no limit) */
    int max_conn_per_ip;               /* open connections from one address (512; 0: any) */
    int prefix_cache;                  /* a prompt that starts like a cached sequence (a
                                          finished request's, or a running one's) reuses its
                                          KV instead of prefilling it again (1; 0: off) */
    const char *chat_template_source;  /* a chat template's Jinja source (--chat-template-
                                          file): chat requests render it; NB_ERR_FORMAT /
                                          NB_ERR_UNSUPPORTED if it does not parse. NULL: the
                                          model's own when it parses and no chat_template is
                                          named, else the built-in family */
    int reasoning_inline;              /* 0: a chat answer's <think>...</think> (a template
                                          that thinks so: Qwen3's, DeepSeek-R1's) goes to
                                          message.reasoning_content; 1: it stays in the
                                          content (--reasoning-format none) */
    int lookup;                        /* prompt-lookup speculative decoding: up to this many
                                          draft tokens a step, copied from a request's own
                                          prompt and output, verified in the batched step
                                          (0: off; at most 16; docs/speculative.md) */
    /* one line per request, as llama-server and vLLM log them ("POST /v1/completions 200
       0.412 s 127.0.0.1 prompt 23 generated 64 stop"), given to this callback on the HTTP
       thread that answered (NULL: none; the library itself prints nothing) */
    void (*log_request)(const char *line, void *user);
    void *log_user;
    /* the defaults of the sampling fields a request omits (NULL: the library's); read at
     * nb_server_init (a pointer: nb_sampler_params is versioned, and only the last member
     * may be one held by value) */
    const struct nb_sampler_params *sampler;
    /* the last member: nb_ctx_params is versioned and may grow here */
    struct nb_ctx_params ctx;          /* n_ctx is per slot (0: min(the model's, 4096));
                                          n_seq is set to n_slots; n_ctx_total 0: every
                                          slot can fill its context, else at least n_ctx:
                                          prompts wait for blocks, and a request that finds
                                          none mid-generation ends ("length") */
};
NB_API struct nb_server_params nb_server_default_params(void);

/* Make the context, bind the address and start answering (requests wait in the queue
 * until nb_server_run runs them). NB_ERR_IO when the address cannot be bound;
 * NB_ERR_INVALID_ARG names a bad parameter; the context's errors as nb_ctx_init's. */
NB_API enum nb_status nb_server_init(struct nb_server **out, const struct nb_server_params *p);
/* The port bound (the one chosen when params.port was 0). */
NB_API int nb_server_port(const struct nb_server *s);
/* How POST /v1/embeddings pools a sequence (nb_embed; default NB_POOLING_MEAN), as
 * llama-server's --pooling. A setter, not a field: nb_server_params ends with its
 * versioned ctx member and gains no field after it. Call it before nb_server_run. */
NB_API enum nb_status nb_server_set_pooling(struct nb_server *s, enum nb_pooling pooling);
/* A request's log record for machines (nb_server_set_request_log): the fields of the
 * text line apart. Strings are the server's, valid during the call. */
struct nb_server_request_info {
    size_t size;             /* sizeof: fields may be added at the end */
    const char *line;        /* the text line that log_request gets */
    const char *method, *path, *client; /* the client's address */
    int status;              /* the HTTP status answered (0: none) */
    double seconds;          /* from the request's first byte to its end */
    const char *id;          /* the answer's id ("chatcmpl-..."); NULL: no generation */
    int prompt_tokens;       /* -1: no generation or embedding */
    int completion_tokens;   /* the choices' generated tokens summed; embeddings: inputs done */
    int n_choices;           /* "n" (1..8); 0: no generation */
    const char *finish;      /* each choice's finish joined by ',' ("stop", "length,stop"),
                                "cut" for one not done, "error"; embeddings "done", "cut",
                                "error"; NULL: no generation */
    const char *termination; /* NULL: answered in full; else why not: "client closed",
                                "timed out", "not completed" */
};
/* Give each request's record to cb (on the HTTP thread that answered) instead of the
 * text line to params.log_request; NULL: the line again. A setter, as
 * nb_server_set_pooling. Call it before nb_server_run. */
NB_API enum nb_status nb_server_set_request_log(struct nb_server *s,
                                                void (*cb)(const struct nb_server_request_info *r,
                                                           void *user),
                                                void *user);
/* Run the engine on this thread until nb_server_stop: then stop accepting connections,
 * answer queued requests 503, let running ones finish (at most drain_s), and return. */
NB_API enum nb_status nb_server_run(struct nb_server *s);
/* Ask nb_server_run to drain and return. Async-signal-safe (a SIGTERM handler may call it). */
NB_API void nb_server_stop(struct nb_server *s);
/* Stop serving (if not yet) and free. NULL is fine. */
NB_API void nb_server_free(struct nb_server *s);

#ifdef __cplusplus
}
#endif
#endif /* NIBBLE_SERVER_H */
