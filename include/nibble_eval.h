/* nibble_eval.h — fidelity evaluation, benchmarks and the agent tasks
 * (`nibble eval`, `nibble bench`, `nibble agent`).
 * Part of libnibble's public API; see nibble.h for the conventions (statuses,
 * nb_last_error, versioned structs). */
#ifndef NIBBLE_EVAL_H
#define NIBBLE_EVAL_H

#include "nibble.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- evaluation
 * How far a test build of a model strays from a reference build (`nibble eval`):
 * greedy reproductions, teacher-forced top-1 agreement and KL, perplexity. */

struct nb_fidelity {
    size_t size;
    int prompts;
    int reproduced;               /* greedy continuations identical over all n_gen tokens */
    double mean_first_divergence; /* index of the first differing token (n_gen if none) */
    double top1_agreement;        /* teacher-forced on the reference continuation */
    double mean_kl;               /* mean KL(ref || test) per token, nats */
    int64_t n_tokens;             /* teacher-forced positions compared */
};

/* Greedy continuations of n_gen tokens after each prompt from both builds, then the test
 * build teacher-forced on the reference's. Both contexts need n_ctx >= longest prompt +
 * n_gen and use sequence 0. NB_ERR_INVALID_ARG when the vocabularies differ. */
NB_API enum nb_status nb_eval_fidelity(struct nb_ctx *ref, struct nb_ctx *test,
                                       int32_t *const *prompts, const int *lens, int n_prompts,
                                       int n_gen, struct nb_fidelity *r);

/* As nb_eval_fidelity, and per prompt p (each array n_prompts long, either may be NULL):
 * first_div[p], the index of the first token where the test's greedy continuation leaves
 * the reference's (n_gen when it reproduces it), and ref_gap[p], how near a tie the
 * reference was there: its log-probability of its own token minus that of the test's token,
 * in nats, from the teacher-forced pass (NAN when reproduced). A divergence at a gap of
 * 0.001 is a coin the test build flipped the other way; one at 1.0 is a real error. */
NB_API enum nb_status nb_eval_fidelity_cases(struct nb_ctx *ref, struct nb_ctx *test,
                                             int32_t *const *prompts, const int *lens,
                                             int n_prompts, int n_gen, struct nb_fidelity *r,
                                             int *first_div, float *ref_gap);

/* Perplexity over `ids` in consecutive windows of at most `window` tokens (each window
 * from an empty cache; every token after a window's first is scored). */
NB_API enum nb_status nb_eval_ppl(struct nb_ctx *ctx, const int32_t *ids, int n, int window,
                                  double *ppl);

/* llama-perplexity's KL-divergence method, so the numbers can stand beside its own: the
 * text cut into consecutive chunks of n_ctx tokens (the first token of each replaced by
 * BOS when bos >= 0, as llama-perplexity does for models that add BOS), both builds run
 * over each chunk from an empty cache, and only the second half scored: the logits at
 * positions i in [n_ctx/2, n_ctx - 1) against token i + 1. */
struct nb_chunk_eval {
    size_t size;
    int chunks;
    int64_t n_scored;
    double ppl_ref, ppl_test;
    double mean_kl, median_kl, p99_kl, max_kl; /* KL(ref || test) per scored position */
    double top1_agreement;                     /* llama-perplexity's "same top p" */
};
NB_API enum nb_status nb_eval_chunks(struct nb_ctx *ref, struct nb_ctx *test, const int32_t *ids,
                                     int n, int n_ctx, int bos, struct nb_chunk_eval *r);

/* ---------------------------------------------------------------- benchmarking
 * Timing as llama-bench runs it (`nibble bench`): pp is one forward pass over n random
 * prompt tokens from an empty cache, tg is n single-token decode steps from an empty
 * cache. Both use sequence 0 of the context and clear it first. */

/* Seconds for one pp run of n_prompt tokens. */
NB_API enum nb_status nb_bench_pp(struct nb_ctx *ctx, int n_prompt, uint64_t seed,
                                  double *seconds);
/* Seconds for n_gen decode steps from an empty cache. */
NB_API enum nb_status nb_bench_tg(struct nb_ctx *ctx, int n_gen, uint64_t seed, double *seconds);
/* llama-bench's -d: the same runs on top of a context of n_depth tokens, so they show
 * how speed falls as attention reads more cached keys. nb_bench_fill clears sequence 0
 * and decodes n_depth random tokens into it in one call (chunks of the context's batch
 * size, as a pp run), untimed; the _at calls first cut sequence 0 back to those n_depth
 * tokens (dropping an earlier test's, untimed), then time exactly what nb_bench_pp /
 * _tg time, at positions n_depth... n_depth 0: from an empty cache, as those two.
 * NB_ERR_INVALID_ARG when sequence 0 holds fewer than n_depth tokens; NB_ERR_RANGE when
 * a sliding-window layer no longer holds the keys position n_depth needs (a pp run
 * longer than the batch size went past them): fill again. */
NB_API enum nb_status nb_bench_fill(struct nb_ctx *ctx, int n_depth, uint64_t seed);
NB_API enum nb_status nb_bench_pp_at(struct nb_ctx *ctx, int n_depth, int n_prompt,
                                     uint64_t seed, double *seconds);
NB_API enum nb_status nb_bench_tg_at(struct nb_ctx *ctx, int n_depth, int n_gen, uint64_t seed,
                                     double *seconds);

struct nb_stats {
    size_t size;
    double mean, stddev, median, best, worst, spread_pct; /* spread: (best-worst)/best */
};
/* Statistics of n samples (tok/s: higher is better); all zero when n <= 0. */
NB_API void nb_stats_of(const double *x, int n, struct nb_stats *out);

/* Run every (model, test) once per pass, passes one after another: A B C A B C ...
 * so that drift in the machine's speed hits every model alike. The first failing run
 * stops it and its status is returned. */
typedef enum nb_status (*nb_bench_run_fn)(int model, int test, int pass, void *user);
NB_API enum nb_status nb_bench_interleave(int n_models, int n_tests, int n_passes,
                                          nb_bench_run_fn run, void *user);

/* The memory read bandwidth in GB/s (1e9 bytes per second), the ceiling of decode: the
 * best of `reps` passes reading a `bytes` buffer (much larger than the caches) on
 * n_threads threads. 0 when the buffer cannot be allocated. */
NB_API double nb_measure_read_bandwidth(int n_threads, size_t bytes, int reps);

/* A measurement record (docs/selector.md; the files of docs/measurements/ that the
 * selector reads): this CPU, the kernel this build runs for the model's weight path and
 * the speeds measured. */
struct nb_record_params {
    size_t size;
    const char *dir;         /* the folder (created if missing) */
    const char *model_arg;   /* the model as the user named it: the record's name and
                                model_file */
    const char *model_file;  /* what was loaded (a .nib's header gives the head's bits) */
    const struct nb_model_info *info; /* of the model run: a float model has no weight
                                         path and is refused */
    int threads;
    int n_prompt, n_gen;
    const double *pp, *tg;   /* samples, tok/s (n_pp / n_tg of them; 0: not run) */
    int n_pp, n_tg;
    double read_bw_gbs, roofline_fraction;
    const char *command;     /* how to re-run it ("nibble bench -m ..."), or NULL */
    const char *commit;      /* NULL: the commit libnibble was built from */
    int n_depth;             /* tokens in the context under the tests (bench -d); > 0 goes
                                in the file's name, and the selector does not weigh it */
};
NB_API struct nb_record_params nb_record_default_params(void);

struct nb_record_result {
    size_t size;
    char file[4096];       /* DIR/<family-key>-<model>-<path>-t<threads>[-d<depth>].json */
    char weight_path[16];
    char kernel[64];       /* the kernel recorded */
};
/* Write the record (under a temporary name, then renamed). result may be NULL.
 * NB_ERR_INVALID_ARG for a float model (no weight path to record) or a missing field;
 * NB_ERR_IO when the folder or file cannot be written. */
NB_API enum nb_status nb_record_write(const struct nb_record_params *params,
                                      struct nb_record_result *result);

/* ---------------------------------------------------------------- agent tasks
 * A simulated phone and tasks on it (issue 18, docs/agent.md): a policy (a model behind
 * an OpenAI-compatible server, or a scripted one) sees an instruction and the screen as
 * text, answers one JSON action per step ({"action": "tap", "id": ...}, "type" with
 * "text", "back", "home", "scroll" with "direction", "task_complete"), and the episode
 * ends with one outcome class. Everything is deterministic given the task and the seed
 * (paraphrase, screen orders); nothing here prints or reads the clock. */

enum nb_agent_outcome {
    NB_AGENT_RUNNING = 0,
    NB_AGENT_DONE,           /* the task's success predicate holds at the end */
    NB_AGENT_DONE_REVERSED,  /* it held after some step, and no longer at the end */
    NB_AGENT_WRONG_APP,      /* task_complete in another app than the task's, never done */
    NB_AGENT_LOOPING,        /* the same action on the same screen a third time */
    NB_AGENT_STEP_LIMIT,     /* the task's step limit reached */
    NB_AGENT_INVALID_ACTION, /* a reply that is not one valid action on this screen */
    NB_AGENT_INCOMPLETE,     /* task_complete in the task's app, never done */
    NB_AGENT_N_OUTCOMES
};
/* "done", "done_then_reversed", "wrong_app", "looping", "step_limit", "invalid_action",
 * "incomplete" ("running" for NB_AGENT_RUNNING, "?" out of range). */
NB_API const char *nb_agent_outcome_name(enum nb_agent_outcome outcome);

/* A set of tasks. Lifetime and threads: the caller owns it (nb_agent_tasks_free); it must
 * outlive the episodes made from it. It is read-only once made: any number of threads may
 * read it and make episodes from it at once. */
struct nb_agent_tasks;
/* A task file (JSON, docs/agent.md). NB_ERR_FORMAT names the task and the key that is
 * wrong; NB_ERR_IO when it cannot be read. */
NB_API enum nb_status nb_agent_tasks_load(struct nb_agent_tasks **out, const char *path);
/* The same from a buffer of len bytes; `name` for errors. */
NB_API enum nb_status nb_agent_tasks_parse(struct nb_agent_tasks **out, const char *buf, size_t len,
                                           const char *name);
/* n generated task variants (1..100000; kinds in turn, parameters and start states drawn
 * from seed): training data and held-out sets are told apart by their seeds. */
NB_API enum nb_status nb_agent_tasks_generate(struct nb_agent_tasks **out, int n, uint64_t seed);
NB_API void nb_agent_tasks_free(struct nb_agent_tasks *t);
/* The tasks as a task file (JSON, indented) that nb_agent_tasks_parse reads back to the
 * same tasks: generated variants become a file to run or hold out. Freed with nb_free. */
NB_API enum nb_status nb_agent_tasks_json(const struct nb_agent_tasks *t, char **json_out);
NB_API int nb_agent_tasks_count(const struct nb_agent_tasks *t);
/* The task's id (NULL out of range). */
NB_API const char *nb_agent_task_id(const struct nb_agent_tasks *t, int i);

/* Scripted policies (no model): correct; correct, then undoes its last change and says
 * task_complete; opens the task's app and goes back, again and again; answers prose, not
 * JSON; opens Camera and says task_complete; visits every app in turn until the limit. */
enum nb_agent_policy {
    NB_AGENT_POLICY_CORRECT = 0,
    NB_AGENT_POLICY_REVERSE,
    NB_AGENT_POLICY_LOOP,
    NB_AGENT_POLICY_INVALID_JSON,
    NB_AGENT_POLICY_WRONG_APP,
    NB_AGENT_POLICY_WANDER,
    NB_AGENT_N_POLICIES
};
/* "scripted-correct", "scripted-reverse", "scripted-loop", "scripted-invalid-json",
 * "scripted-wrong-app", "scripted-wander"; find: the index, -1 if unknown. */
NB_API const char *nb_agent_policy_name(enum nb_agent_policy policy);
/* (an int: -1 is no policy, as nb_kv_type_parse's -1) */
NB_API int nb_agent_policy_find(const char *name);

/* One episode of one task. Lifetime and threads: the caller owns it
 * (nb_agent_episode_free); its tasks must outlive it; one thread at a time (its screen and
 * action texts live in it). Episodes of the same tasks may run on several threads. */
struct nb_agent_episode;
/* Task `task` of t (t must outlive the episode), its paraphrase and screen orders drawn
 * from seed; the phone starts on the home screen. */
NB_API enum nb_status nb_agent_episode_init(struct nb_agent_episode **out,
                                            const struct nb_agent_tasks *t, int task,
                                            uint64_t seed);
NB_API void nb_agent_episode_free(struct nb_agent_episode *e);
NB_API const char *nb_agent_episode_instruction(const struct nb_agent_episode *e);
/* The task's app ("settings", "clock", ...). */
NB_API const char *nb_agent_episode_app(const struct nb_agent_episode *e);
/* The current screen: compact text (json 0: a header line "[app > screen]", then one line
 * per node `id Class "text" [on|off] [*]`, * marking what can be tapped) or JSON (json 1:
 * {app, screen, nodes: [{id, class, text, clickable, checked?}]}). Valid until the next
 * call on e. */
NB_API const char *nb_agent_episode_screen(struct nb_agent_episode *e, int json);
/* Take one reply: a JSON object (whitespace and a ``` fence around it are allowed).
 * Every reply is a step; one that is not a valid action here ends the episode
 * (invalid_action). NB_OK whenever the reply was taken; NB_ERR_INVALID_ARG if the
 * episode had already ended. */
NB_API enum nb_status nb_agent_episode_step(struct nb_agent_episode *e, const char *reply,
                                            size_t len);
/* The last step's action as canonical JSON ("" if the reply was not an action), and a
 * note on it ("" or why it was refused, or what ended the episode). */
NB_API const char *nb_agent_episode_action(const struct nb_agent_episode *e);
NB_API const char *nb_agent_episode_note(const struct nb_agent_episode *e);
/* NB_AGENT_RUNNING until the episode ends, then its outcome. */
NB_API enum nb_agent_outcome nb_agent_episode_outcome(const struct nb_agent_episode *e);
NB_API int nb_agent_episode_steps(const struct nb_agent_episode *e);
NB_API int nb_agent_episode_max_steps(const struct nb_agent_episode *e);
/* The reply a scripted policy gives now (NUL-terminated, cut to cap). NB_ERR_INVALID_ARG
 * for an unknown policy or an episode that has ended. */
NB_API enum nb_status nb_agent_policy_reply(struct nb_agent_episode *e,
                                            enum nb_agent_policy policy, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* NIBBLE_EVAL_H */
