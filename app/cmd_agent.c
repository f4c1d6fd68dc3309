/* nibble agent — task outcomes on the simulated phone (issue 18, docs/agent.md): every
 * build (an OpenAI-compatible server, or a scripted policy) on every task, interleaved,
 * with the study's table, JSON lines traces, and chat-format trajectories of the scripted
 * correct policy for training. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/http_client.h"
#include "app/text.h"
#include "nibble.h"
#include "nibble_eval.h"

extern char **environ;

#define MAX_BUILDS  16
#define MAX_HISTORY 10 /* previous actions shown in a prompt */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nibble agent --tasks FILE (--server [NAME=]URL ... | -m [NAME=]MODEL[@PATH] ...\n"
            "                    | --policy NAME)\n"
            "                    [--runs N] [--seed S] [-o text|json] [--trace FILE.jsonl]\n"
            "                    [--format json_object|tools|tools-auto] [--screen text|json]\n"
            "                    [--max-tokens N] [--api-key KEY] [--timeout S]\n"
            "       nibble agent --dump-trajectories N [--seed S] [--out FILE.jsonl]\n"
            "       nibble agent --dump-tasks N [--seed S] [--out FILE.json]\n"
            "\n"
            "Runs every build on every task of FILE, N runs each, interleaved (run, task, build),\n"
            "and prints per build: bytes, decode tok/s, success rate and the outcome classes\n"
            "(done, done_then_reversed, wrong_app, looping, step_limit, invalid_action,\n"
            "incomplete), then the outcomes per task. A build is an OpenAI-compatible server\n"
            "(nibble serve, llama-server): each step sends the instruction, the screen and the\n"
            "previous actions as chat messages and reads one JSON action back.\n"
            "\n"
            "  --tasks FILE        tasks (data/agent/tasks.json)\n"
            "  --server [NAME=]URL a build (repeatable, up to %d); NAME defaults to its model id\n"
            "  -m [NAME=]MODEL[@PATH]  a build served here: `nibble serve -m MODEL [--path PATH]\n"
            "                      --port 0 --parallel 1 [-t N]`, started before and stopped after;\n"
            "                      NAME defaults to MODEL[@PATH]; bytes: MODEL's file size\n"
            "                      when no PATH (or @source) is named\n"
            "  -t N, -c N          threads and context of the servers -m starts (a prompt is\n"
            "                      ~500 tokens: a model of a shorter context needs -c)\n"
            "  --policy NAME       a scripted policy instead of servers: scripted-correct,\n"
            "                      scripted-reverse, scripted-loop, scripted-invalid-json,\n"
            "                      scripted-wrong-app, scripted-wander\n"
            "  --runs N            episodes per task and build (default 1); run r uses seed S+r\n"
            "  --seed S            paraphrases and screen orders (default 1)\n"
            "  -o text|json        the table, or a JSON list of {build, success_rate, outcomes}\n"
            "  --trace FILE        one JSON line per step (prompt, reply, action, outcome)\n"
            "  --format F          json_object (default): response_format forces a JSON object;\n"
            "                      tools: one call of the tools tap/type/back/home/scroll/\n"
            "                      task_complete (tool_choice required); tools-auto: the same\n"
            "                      tools with tool_choice auto (a reply that calls none is\n"
            "                      read as JSON text)\n"
            "  --screen text|json  the screen as compact text (default) or JSON\n"
            "  --max-tokens N      per reply (default 128: a call in --format tools\n"
            "                      is the Hermes wrapper, the name and the arguments, and\n"
            "                      the server keeps the model's call while it can still\n"
            "                      close within the tokens left, counted in the model's\n"
            "                      own tokens: phone-agent-tiny's call is ~26 tokens)\n"
            "  --api-key KEY       Authorization: Bearer KEY\n"
            "  --timeout S         per request (default 300)\n"
            "  --dump-trajectories N  write the scripted correct policy's steps on N generated\n"
            "                      task variants (seed S) as chat-format JSON lines\n"
            "  --dump-tasks N      write N generated task variants (seed S) as a task file\n"
            "                      (held-out sets: another seed than the training data's)\n"
            "  --out FILE          where trajectories or tasks go (default: standard output)\n",
            MAX_BUILDS);
}

/* ---------------------------------------------------------------- prompts */

static const char k_system[] =
    "You operate an Android phone to do the user's task. Each turn you see the task, the "
    "screen (one line per element: id, class, \"text\", on/off for switches, * if it can be "
    "tapped) and your previous actions. Answer with exactly one JSON object, one of:\n"
    "{\"action\": \"tap\", \"id\": ID}\n{\"action\": \"type\", \"text\": TEXT}\n"
    "{\"action\": \"back\"}\n{\"action\": \"home\"}\n"
    "{\"action\": \"scroll\", \"direction\": \"up\" or \"down\"}\n"
    "{\"action\": \"task_complete\"}\n"
    "type writes into the field you tapped last. Say task_complete when the task is done.";

struct history {
    int n;
    char *act[128];
};

static void history_free(struct history *h)
{
    for (int i = 0; i < h->n; i++) free(h->act[i]);
    h->n = 0;
}

/* The user message of a step (malloc'd). */
static char *user_prompt(struct nb_agent_episode *e, int screen_json, const struct history *h)
{
    const char *instr = nb_agent_episode_instruction(e), *screen = nb_agent_episode_screen(e, screen_json);
    size_t cap = strlen(instr) + strlen(screen) + 256;
    for (int i = 0; i < h->n; i++) cap += strlen(h->act[i]) + 16;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t n = (size_t)snprintf(s, cap, "Task: %s\nScreen:\n%s\nPrevious actions:", instr, screen);
    if (!h->n) n += (size_t)snprintf(s + n, cap - n, " none");
    for (int i = h->n > MAX_HISTORY ? h->n - MAX_HISTORY : 0; i < h->n; i++)
        n += (size_t)snprintf(s + n, cap - n, "\n%d. %s", i + 1, h->act[i]);
    snprintf(s + n, cap - n, "\nNext action?");
    return s;
}

static cJSON *messages(const char *user)
{
    cJSON *m = cJSON_CreateArray(), *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", "system");
    cJSON_AddStringToObject(o, "content", k_system);
    cJSON_AddItemToArray(m, o);
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", "user");
    cJSON_AddStringToObject(o, "content", user);
    cJSON_AddItemToArray(m, o);
    return m;
}

/* The six actions as OpenAI tools. */
static cJSON *tools_json(void)
{
    static const char k_tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"tap\",\"description\":\"Tap an element "
        "marked * on the screen\",\"parameters\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
        "\"string\"}},\"required\":[\"id\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"type\",\"description\":\"Type into the field "
        "tapped last\",\"parameters\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":"
        "\"string\"}},\"required\":[\"text\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"back\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"home\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{}}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"scroll\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"direction\":{\"type\":\"string\",\"enum\":[\"up\",\"down\"]}},"
        "\"required\":[\"direction\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"task_complete\",\"description\":\"The task "
        "is done\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]";
    return cJSON_Parse(k_tools);
}

/* ---------------------------------------------------------------- builds */

struct build {
    char name[128];
    const char *url;      /* NULL: a scripted policy */
    const char *model;    /* -m: the model this command serves (NULL: --server) */
    pid_t pid;            /* -m: the server's process (0: none) */
    char url_buf[96];     /* -m: its URL */
    char log[64];         /* -m: its stderr, a temporary file */
    int policy;
    long long bytes;      /* -1: unknown */
    double gen_tokens, gen_s; /* decode tokens and their seconds */
    int timed_by_server;  /* gen_s from the server's timings (else request wall time) */
    int outcomes[NB_AGENT_N_OUTCOMES];
    int *task_outcomes;   /* [n_tasks][NB_AGENT_N_OUTCOMES] */
};

struct opts {
    const char *api_key;
    double timeout_s;
    int tools, screen_json, max_tokens; /* tools: 1 required, 2 auto */
};

/* GET /v1/models: the model's id (if the build has no name) and its bytes (llama-server's
 * meta.size) when the server says. */
static int probe_build(struct build *b, const struct opts *o)
{
    struct app_http_answer a;
    char err[512];
    if (app_http(b->url, "GET", "/v1/models", NULL, o->api_key, o->timeout_s, &a, err, sizeof err)) {
        fprintf(stderr, "nibble agent: %s\n", err);
        return 0;
    }
    cJSON *j = a.status == 200 ? cJSON_Parse(a.body) : NULL;
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(m, "id"));
    const cJSON *size = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "meta"), "size");
    if (!b->name[0]) snprintf(b->name, sizeof b->name, "%s", id ? id : b->url);
    if (cJSON_IsNumber(size)) b->bytes = (long long)size->valuedouble;
    int ok = a.status == 200;
    if (!ok) fprintf(stderr, "nibble agent: %s/v1/models: HTTP %d\n", b->url, a.status);
    cJSON_Delete(j);
    free(a.body);
    return ok;
}

/* One chat request; *reply (malloc'd) gets the action as JSON text (a tool call turned
 * into {"action": name, ...arguments}); 0, or -1 after printing why (the server failed,
 * not the model). */
static int ask(struct build *b, const struct opts *o, const char *user, char **reply)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", b->name);
    cJSON_AddItemToObject(req, "messages", messages(user));
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddNumberToObject(req, "max_tokens", o->max_tokens);
    if (o->tools) {
        cJSON_AddItemToObject(req, "tools", tools_json());
        cJSON_AddStringToObject(req, "tool_choice", o->tools == 2 ? "auto" : "required");
    } else {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(req, "response_format"), "type", "json_object");
    }
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    struct app_http_answer a;
    char err[512];
    double t0 = app_time_s();
    int rc = app_http(b->url, "POST", "/v1/chat/completions", body, o->api_key, o->timeout_s, &a,
                      err, sizeof err);
    double wall = app_time_s() - t0;
    free(body);
    *reply = NULL;
    if (rc) {
        fprintf(stderr, "nibble agent: %s\n", err);
        return -1;
    }
    cJSON *j = cJSON_Parse(a.body);
    if (a.status != 200 || !j) {
        fprintf(stderr, "nibble agent: %s: HTTP %d: %.300s\n", b->url, a.status, a.body);
        cJSON_Delete(j);
        free(a.body);
        return -1;
    }
    free(a.body);
    const cJSON *msg = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
    const cJSON *call = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(msg, "tool_calls"), 0), "function");
    const char *content = cJSON_GetStringValue(cJSON_GetObjectItem(msg, "content"));
    if (call) {
        cJSON *args = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(call, "arguments")));
        cJSON *act = cJSON_IsObject(args) ? args : cJSON_CreateObject();
        if (act != args) cJSON_Delete(args);
        cJSON_DeleteItemFromObject(act, "action");
        const char *fn = cJSON_GetStringValue(cJSON_GetObjectItem(call, "name"));
        cJSON_AddStringToObject(act, "action", fn ? fn : "");
        *reply = cJSON_PrintUnformatted(act);
        cJSON_Delete(act);
    } else {
        *reply = strdup(content ? content : "");
    }
    /* decode speed: llama-server's timings, else completion tokens over the request */
    const cJSON *usage = cJSON_GetObjectItem(j, "usage"), *timings = cJSON_GetObjectItem(j, "timings");
    const cJSON *ct = cJSON_GetObjectItem(usage, "completion_tokens");
    const cJSON *pn = cJSON_GetObjectItem(timings, "predicted_n"), *pms = cJSON_GetObjectItem(timings, "predicted_ms");
    if (cJSON_IsNumber(pn) && cJSON_IsNumber(pms)) {
        b->gen_tokens += pn->valuedouble;
        b->gen_s += pms->valuedouble / 1000.0;
        b->timed_by_server = 1;
    } else if (cJSON_IsNumber(ct)) {
        b->gen_tokens += ct->valuedouble;
        b->gen_s += wall;
    }
    cJSON_Delete(j);
    return *reply ? 0 : -1;
}

/* -m: start `nibble serve` (this very program: NIBBLE_SELF when set, as the aarch64
 * bundle's launcher sets it, whose /proc/self/exe is the loader; else /proc/self/exe) for
 * b->model on a free port (threads and context as given, NULL: serve's defaults) and wait
 * (at most 600 s: first use may quantize) for the port in its log. 1, or 0 after printing
 * why. */
static int start_server(struct build *b, const char *threads, const char *ctx)
{
    char self[4096], model[4096], path[64] = "";
    const char *env = getenv("NIBBLE_SELF");
    if (env && *env) {
        snprintf(self, sizeof self, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) {
            fprintf(stderr, "nibble agent: -m: cannot find this program (/proc/self/exe)\n");
            return 0;
        }
        self[n] = '\0';
    }
    snprintf(model, sizeof model, "%s", b->model);
    char *at = strrchr(model, '@');
    if (at && !strchr(at, '/')) {
        snprintf(path, sizeof path, "%s", at + 1);
        *at = '\0';
    }
    struct stat stt;
    if (stat(model, &stt)) {
        fprintf(stderr, "nibble agent: -m: %s: no such model\n", model);
        return 0;
    }
    b->bytes = S_ISREG(stt.st_mode) && (!path[0] || !strcmp(path, "source")) ? (long long)stt.st_size : -1;
    if (!b->name[0]) snprintf(b->name, sizeof b->name, "%s", b->model);
    snprintf(b->log, sizeof b->log, "/tmp/nibble-agent-serve-XXXXXX");
    int fd = mkstemp(b->log);
    if (fd < 0) {
        fprintf(stderr, "nibble agent: -m: cannot make a log file in /tmp\n");
        b->log[0] = '\0';
        return 0;
    }
    char *argv[16];
    int k = 0;
    argv[k++] = self;
    argv[k++] = "serve";
    argv[k++] = "-m";
    argv[k++] = model;
    argv[k++] = "--port";
    argv[k++] = "0";
    argv[k++] = "--parallel";
    argv[k++] = "1";
    if (path[0]) argv[k++] = "--path", argv[k++] = path;
    if (threads) argv[k++] = "-t", argv[k++] = (char *)threads;
    if (ctx) argv[k++] = "-c", argv[k++] = (char *)ctx;
    argv[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawn(&b->pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd);
    if (rc) {
        fprintf(stderr, "nibble agent: -m %s: cannot start nibble serve\n", b->model);
        b->pid = 0;
        return 0;
    }
    for (int i = 0; i < 6000; i++) { /* 600 s */
        char buf[8192] = "";
        FILE *f = fopen(b->log, "r");
        size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[got] = '\0';
        const char *l = strstr(buf, "listening on http://");
        const char *nl = l ? strchr(l, '\n') : NULL;
        if (nl) {
            snprintf(b->url_buf, sizeof b->url_buf, "%.*s", (int)(nl - l - 13), l + 13);
            b->url = b->url_buf;
            return 1;
        }
        if (waitpid(b->pid, NULL, WNOHANG) == b->pid) {
            b->pid = 0;
            fprintf(stderr, "nibble agent: -m %s: nibble serve exited:\n%s", b->model, buf);
            return 0;
        }
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    fprintf(stderr, "nibble agent: -m %s: nibble serve did not start in 600 s\n", b->model);
    return 0;
}

static void stop_server(struct build *b)
{
    if (b->pid > 0) {
        kill(b->pid, SIGTERM);
        waitpid(b->pid, NULL, 0);
        b->pid = 0;
    }
    if (b->log[0]) unlink(b->log);
    b->log[0] = '\0';
}

/* ---------------------------------------------------------------- episodes */

static void trace_line(FILE *f, const struct build *b, int run, const char *task, uint64_t seed,
                       struct nb_agent_episode *e, const char *user, const char *reply)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "build", b->name);
    cJSON_AddNumberToObject(o, "run", run);
    cJSON_AddStringToObject(o, "task", task);
    cJSON_AddNumberToObject(o, "seed", (double)seed);
    cJSON_AddNumberToObject(o, "step", nb_agent_episode_steps(e));
    cJSON_AddStringToObject(o, "prompt", user);
    cJSON_AddStringToObject(o, "reply", reply);
    const char *act = nb_agent_episode_action(e);
    if (act[0]) cJSON_AddRawToObject(o, "action", act);
    else cJSON_AddNullToObject(o, "action");
    if (nb_agent_episode_note(e)[0]) cJSON_AddStringToObject(o, "note", nb_agent_episode_note(e));
    int out = nb_agent_episode_outcome(e);
    if (out != NB_AGENT_RUNNING) cJSON_AddStringToObject(o, "outcome", nb_agent_outcome_name(out));
    else cJSON_AddNullToObject(o, "outcome");
    char *s = cJSON_PrintUnformatted(o);
    if (s) fprintf(f, "%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* One episode of build b; its outcome, or -1 when the server failed. */
static int episode(struct build *b, const struct opts *o, const struct nb_agent_tasks *tasks, int k,
                   int run, uint64_t seed, FILE *trace)
{
    struct nb_agent_episode *e = NULL;
    struct history h = {0};
    int out = -1;
    if (nb_agent_episode_init(&e, tasks, k, seed) != NB_OK) {
        fprintf(stderr, "nibble agent: %s\n", nb_last_error());
        return -1;
    }
    while (nb_agent_episode_outcome(e) == NB_AGENT_RUNNING) {
        char *user = user_prompt(e, o->screen_json, &h), *reply = NULL;
        char buf[512];
        if (!user) goto done;
        if (b->url) {
            if (ask(b, o, user, &reply)) {
                free(user);
                goto done;
            }
        } else {
            if (nb_agent_policy_reply(e, b->policy, buf, sizeof buf) != NB_OK || !(reply = strdup(buf))) {
                fprintf(stderr, "nibble agent: %s\n", nb_last_error());
                free(user);
                goto done;
            }
        }
        nb_agent_episode_step(e, reply, strlen(reply));
        if (trace) trace_line(trace, b, run, nb_agent_task_id(tasks, k), seed, e, user, reply);
        const char *act = nb_agent_episode_action(e);
        if (act[0] && h.n < (int)(sizeof h.act / sizeof h.act[0])) h.act[h.n++] = strdup(act);
        free(user);
        free(reply);
    }
    out = nb_agent_episode_outcome(e);
done:
    history_free(&h);
    nb_agent_episode_free(e);
    return out;
}

/* ---------------------------------------------------------------- output */

static double success_rate(const struct build *b)
{
    int n = 0;
    for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++) n += b->outcomes[c];
    return n ? (double)b->outcomes[NB_AGENT_DONE] / n : 0;
}

static void print_text(struct build *bs, int n_builds, const struct nb_agent_tasks *tasks, int runs)
{
    printf("%-24s %12s %9s %8s", "build", "bytes", "tok/s", "success");
    for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++) printf(" %s", nb_agent_outcome_name(c));
    printf("\n");
    for (int i = 0; i < n_builds; i++) {
        struct build *b = &bs[i];
        char bytes[32] = "-", tps[32] = "-";
        if (b->bytes >= 0) snprintf(bytes, sizeof bytes, "%lld", b->bytes);
        if (b->gen_s > 0) snprintf(tps, sizeof tps, "%.1f%s", b->gen_tokens / b->gen_s, b->timed_by_server ? "" : "*");
        printf("%-24s %12s %9s %7.0f%%", b->name, bytes, tps, 100 * success_rate(b));
        for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++)
            printf(" %*d", (int)strlen(nb_agent_outcome_name(c)), b->outcomes[c]);
        printf("\n");
    }
    printf("\noutcomes per task (%d run%s each):\n", runs, runs == 1 ? "" : "s");
    for (int k = 0; k < nb_agent_tasks_count(tasks); k++) {
        printf("  %-20s", nb_agent_task_id(tasks, k));
        for (int i = 0; i < n_builds; i++) {
            char cell[256] = "";
            size_t n = 0;
            for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++) {
                int v = bs[i].task_outcomes[k * NB_AGENT_N_OUTCOMES + c];
                if (v) n += (size_t)snprintf(cell + n, sizeof cell - n, "%s%s:%d", n ? "," : "", nb_agent_outcome_name(c), v);
            }
            printf("  %s=%s", bs[i].name, cell);
        }
        printf("\n");
    }
    if (n_builds && bs[0].url) printf("\n(* tok/s from request wall time: the server sent no timings)\n");
}

static void print_json(struct build *bs, int n_builds, const struct nb_agent_tasks *tasks, int runs)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n_builds; i++) {
        struct build *b = &bs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "build", b->name);
        if (b->url) cJSON_AddStringToObject(o, "url", b->url);
        else cJSON_AddStringToObject(o, "policy", nb_agent_policy_name(b->policy));
        if (b->bytes >= 0) cJSON_AddNumberToObject(o, "bytes", (double)b->bytes);
        else cJSON_AddNullToObject(o, "bytes");
        if (b->gen_s > 0) {
            cJSON_AddNumberToObject(o, "decode_tok_s", b->gen_tokens / b->gen_s);
            cJSON_AddStringToObject(o, "decode_tok_s_from", b->timed_by_server ? "server timings" : "request wall time");
        } else {
            cJSON_AddNullToObject(o, "decode_tok_s");
        }
        cJSON_AddNumberToObject(o, "runs", runs);
        int n = 0;
        for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++) n += b->outcomes[c];
        cJSON_AddNumberToObject(o, "episodes", n);
        cJSON_AddNumberToObject(o, "success_rate", success_rate(b));
        cJSON *oc = cJSON_AddObjectToObject(o, "outcomes");
        for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++) cJSON_AddNumberToObject(oc, nb_agent_outcome_name(c), b->outcomes[c]);
        cJSON *pt = cJSON_AddObjectToObject(o, "tasks");
        for (int k = 0; k < nb_agent_tasks_count(tasks); k++) {
            cJSON *t = cJSON_AddObjectToObject(pt, nb_agent_task_id(tasks, k));
            for (int c = 1; c < NB_AGENT_N_OUTCOMES; c++)
                if (b->task_outcomes[k * NB_AGENT_N_OUTCOMES + c])
                    cJSON_AddNumberToObject(t, nb_agent_outcome_name(c), b->task_outcomes[k * NB_AGENT_N_OUTCOMES + c]);
        }
        cJSON_AddItemToArray(arr, o);
    }
    char *s = cJSON_Print(arr);
    if (s) printf("%s\n", s);
    free(s);
    cJSON_Delete(arr);
}

/* ---------------------------------------------------------------- trajectories */

/* The scripted correct policy on n generated variants (seed): one JSON line per step,
 * {"messages": [system, user, assistant], "task", "step"}. */
static int dump_trajectories(int n, uint64_t seed, const char *out_path, int screen_json)
{
    struct nb_agent_tasks *tasks = NULL;
    FILE *f = stdout;
    int rc = 1;
    long lines = 0;
    if (nb_agent_tasks_generate(&tasks, n, seed) != NB_OK) {
        fprintf(stderr, "nibble agent: %s\n", nb_last_error());
        return 1;
    }
    if (out_path && !(f = fopen(out_path, "w"))) {
        fprintf(stderr, "nibble agent: --out: %s: cannot write\n", out_path);
        goto fail;
    }
    for (int k = 0; k < n; k++) {
        struct nb_agent_episode *e = NULL;
        struct history h = {0};
        if (nb_agent_episode_init(&e, tasks, k, seed * 1000003u + (uint64_t)k) != NB_OK) goto fail;
        while (nb_agent_episode_outcome(e) == NB_AGENT_RUNNING) {
            char reply[512];
            char *user = user_prompt(e, screen_json, &h);
            if (!user || nb_agent_policy_reply(e, NB_AGENT_POLICY_CORRECT, reply, sizeof reply) != NB_OK) {
                free(user);
                break;
            }
            cJSON *o = cJSON_CreateObject(), *m = messages(user);
            cJSON *a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "role", "assistant");
            cJSON_AddStringToObject(a, "content", reply);
            cJSON_AddItemToArray(m, a);
            cJSON_AddItemToObject(o, "messages", m);
            cJSON_AddStringToObject(o, "task", nb_agent_task_id(tasks, k));
            cJSON_AddNumberToObject(o, "step", nb_agent_episode_steps(e) + 1);
            char *s = cJSON_PrintUnformatted(o);
            if (s) fprintf(f, "%s\n", s), lines++;
            free(s);
            cJSON_Delete(o);
            free(user);
            nb_agent_episode_step(e, reply, strlen(reply));
            if (nb_agent_episode_action(e)[0] && h.n < 128) h.act[h.n++] = strdup(nb_agent_episode_action(e));
        }
        int done = nb_agent_episode_outcome(e) == NB_AGENT_DONE;
        history_free(&h);
        nb_agent_episode_free(e);
        if (!done) {
            fprintf(stderr, "nibble agent: the scripted policy did not finish %s\n", nb_agent_task_id(tasks, k));
            goto fail;
        }
    }
    fprintf(stderr, "nibble agent: %ld steps of %d episodes (seed %llu)\n", lines, n, (unsigned long long)seed);
    rc = 0;
fail:
    if (f != stdout && f && fclose(f)) rc = 1;
    nb_agent_tasks_free(tasks);
    return rc;
}

/* n generated variants (seed) as a task file. */
static int write_tasks(int n, uint64_t seed, const char *out_path)
{
    struct nb_agent_tasks *tasks = NULL;
    char *json = NULL;
    int rc = 1;
    FILE *f = stdout;
    if (nb_agent_tasks_generate(&tasks, n, seed) != NB_OK || nb_agent_tasks_json(tasks, &json) != NB_OK) {
        fprintf(stderr, "nibble agent: %s\n", nb_last_error());
        goto fail;
    }
    if (out_path && !(f = fopen(out_path, "w"))) {
        fprintf(stderr, "nibble agent: --out: %s: cannot write\n", out_path);
        goto fail;
    }
    fprintf(f, "%s\n", json);
    rc = f != stdout && fclose(f) ? 1 : 0;
fail:
    nb_free(json);
    nb_agent_tasks_free(tasks);
    return rc;
}

/* ---------------------------------------------------------------- the command */

int cmd_agent(int argc, char **argv)
{
    const char *cmd = "agent", *tasks_path = NULL, *policy = NULL, *trace_path = NULL, *out = NULL;
    const char *output = "text", *format = "json_object", *screen = "text", *threads = NULL, *ctx = NULL;
    struct opts o = {.timeout_s = 300, .max_tokens = 128};
    struct build builds[MAX_BUILDS] = {0};
    int n_builds = 0, runs = 1, dump = 0, dump_tasks = 0, rc = 1;
    uint64_t seed = 1;
    float timeout = 300;
    const struct arg_opt opts[] = {
        OPT_STR("--tasks", &tasks_path),
        OPT_STR("--policy", &policy),
        OPT_INT("--runs", &runs, 1, 1000000),
        OPT_U64("--seed", &seed),
        OPT_CHOICE("-o|--output-format", &output, "text|json"),
        OPT_STR("--trace", &trace_path),
        OPT_CHOICE("--format", &format, "json_object|tools|tools-auto"),
        OPT_CHOICE("--screen", &screen, "text|json"),
        OPT_INT("--max-tokens", &o.max_tokens, 1, 4096),
        OPT_STR("--api-key", &o.api_key),
        OPT_FLOAT("--timeout", &timeout, 0.1, 86400),
        OPT_INT("--dump-trajectories", &dump, 1, 100000),
        OPT_INT("--dump-tasks", &dump_tasks, 1, 100000),
        OPT_STR("--out", &out),
        OPT_STR("-t|--threads", &threads),
        OPT_STR("-c|--ctx-size", &ctx),
        OPT_END};
    for (int i = 1; i < argc; i++) {
        if (arg_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        int r = arg_table(cmd, opts, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(argv[i], "--server") || !strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            int serve = argv[i][1] != '-' || !strcmp(argv[i], "--model");
            const char *v = arg_value(cmd, argc, argv, &i);
            if (!v) return 2;
            if (n_builds == MAX_BUILDS) {
                fprintf(stderr, "nibble agent: at most %d builds\n", MAX_BUILDS);
                return 2;
            }
            const char *eq = serve ? strchr(v, '=') : strstr(v, "=http");
            struct build *b = &builds[n_builds++];
            b->bytes = -1;
            if (eq) snprintf(b->name, sizeof b->name, "%.*s", (int)(eq - v), v);
            if (serve) b->model = eq ? eq + 1 : v;
            else b->url = eq ? eq + 1 : v;
            continue;
        }
        arg_unknown(cmd, argv[i]);
        return 2;
    }
    o.timeout_s = timeout;
    o.tools = !strcmp(format, "tools") ? 1 : !strcmp(format, "tools-auto") ? 2 : 0;
    o.screen_json = !strcmp(screen, "json");
    if (dump) return dump_trajectories(dump, seed, out, o.screen_json);
    if (dump_tasks) return write_tasks(dump_tasks, seed, out);
    if (!tasks_path || (!n_builds && !policy) || (n_builds && policy)) {
        fprintf(stderr, "nibble agent: give --tasks and builds (--server URL..., -m MODEL...) or --policy NAME\n");
        usage(stderr);
        return 2;
    }
    if (policy) {
        int p = nb_agent_policy_find(policy);
        if (p < 0) {
            fprintf(stderr, "nibble agent: --policy: unknown '%s' (see nibble agent --help)\n", policy);
            return 2;
        }
        builds[0].policy = p;
        builds[0].bytes = -1;
        snprintf(builds[0].name, sizeof builds[0].name, "%s", policy);
        n_builds = 1;
    }
    struct nb_agent_tasks *tasks = NULL;
    FILE *trace = NULL;
    if (nb_agent_tasks_load(&tasks, tasks_path) != NB_OK) {
        fprintf(stderr, "nibble agent: %s\n", nb_last_error());
        return 1;
    }
    int n_tasks = nb_agent_tasks_count(tasks);
    for (int i = 0; i < n_builds; i++) {
        if (builds[i].model && !start_server(&builds[i], threads, ctx)) goto fail;
        if (builds[i].url && !probe_build(&builds[i], &o)) goto fail;
        if (!(builds[i].task_outcomes = calloc((size_t)n_tasks * NB_AGENT_N_OUTCOMES, sizeof(int)))) goto fail;
    }
    if (trace_path && !(trace = fopen(trace_path, "w"))) {
        fprintf(stderr, "nibble agent: --trace: %s: cannot write\n", trace_path);
        goto fail;
    }
    /* interleaved: every build sees episode (run, task) before the next one starts */
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < n_tasks; k++)
            for (int i = 0; i < n_builds; i++) {
                int oc = episode(&builds[i], &o, tasks, k, r, seed + (uint64_t)r, trace);
                if (oc < 0) goto fail;
                builds[i].outcomes[oc]++;
                builds[i].task_outcomes[k * NB_AGENT_N_OUTCOMES + oc]++;
                if (!strcmp(output, "text"))
                    fprintf(stderr, "run %d %-20s %-24s %s\n", r + 1, nb_agent_task_id(tasks, k),
                            builds[i].name, nb_agent_outcome_name(oc));
            }
    if (!strcmp(output, "json")) print_json(builds, n_builds, tasks, runs);
    else print_text(builds, n_builds, tasks, runs);
    rc = 0;
fail:
    if (trace && fclose(trace)) rc = 1;
    for (int i = 0; i < n_builds; i++) {
        stop_server(&builds[i]);
        free(builds[i].task_outcomes);
    }
    nb_agent_tasks_free(tasks);
    return rc;
}
