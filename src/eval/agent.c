/* eval/agent.c — agent tasks on the simulated phone: the task file, success predicates,
 * episodes and their outcome classes, scripted policies, generated task variants
 * (include/nibble.h "agent tasks", docs/agent.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "eval/phone.h"
#include "formats/json.h"
#include "nibble_eval.h"

#define AG_MAX_TASKS     100000
#define AG_MAX_INSTR     8
#define AG_MAX_INSTR_LEN 256
#define AG_MAX_COND      4
#define AG_MAX_STEPS     100
#define AG_LOOP_REPEATS  3 /* the same (screen, action) this many times is a loop */

enum cond_kind { C_TOGGLE, C_ALARM, C_SENT, C_FAVORITE };

/* One clause of a success predicate (all clauses must hold). */
struct cond {
    enum cond_kind kind;
    int index;        /* toggle or contact */
    int is;           /* toggle / favourite: the wanted value; alarm: on */
    int hour, minute; /* alarm */
    char text[PH_TEXT]; /* sent: the message (compared case-insensitively, trimmed) */
};

struct task {
    char id[64];
    enum ph_app app;
    int n_instr;
    char instr[AG_MAX_INSTR][AG_MAX_INSTR_LEN];
    struct ph_state start;
    int n_cond;
    struct cond cond[AG_MAX_COND];
    int max_steps;
};

struct nb_agent_tasks {
    int n;
    struct task *tasks;
};

enum end_reason { END_COMPLETE = 1, END_INVALID, END_LOOP, END_LIMIT };

struct nb_agent_episode {
    const struct task *task;
    struct nb_phone ph;
    int instr;            /* the paraphrase shown */
    int steps;
    enum nb_agent_outcome outcome; /* NB_AGENT_RUNNING until the end */
    int ever_held;        /* the predicate held after some step */
    int reversed;         /* scripted-reverse: the undo was sent */
    uint64_t keys[AG_MAX_STEPS]; /* (screen, action) of each step, for loops */
    char action[PH_TEXT + 48];
    char note[256];
    char screen[8192];
};

/* ---------------------------------------------------------------- names */

const char *nb_agent_outcome_name(enum nb_agent_outcome o)
{
    static const char *const names[NB_AGENT_N_OUTCOMES] = {
        "running", "done", "done_then_reversed", "wrong_app", "looping", "step_limit",
        "invalid_action", "incomplete"};
    return o >= 0 && o < NB_AGENT_N_OUTCOMES ? names[o] : "?";
}

static const char *const k_policy_name[NB_AGENT_N_POLICIES] = {
    "scripted-correct", "scripted-reverse", "scripted-loop", "scripted-invalid-json",
    "scripted-wrong-app", "scripted-wander"};

const char *nb_agent_policy_name(enum nb_agent_policy p)
{
    return (unsigned)p < NB_AGENT_N_POLICIES ? k_policy_name[p] : "?";
}

int nb_agent_policy_find(const char *name)
{
    for (int p = 0; name && p < NB_AGENT_N_POLICIES; p++)
        if (!strcmp(name, k_policy_name[p])) return p;
    return -1;
}

/* ---------------------------------------------------------------- predicates */

/* "  On my way " vs "on my way": equal after trimming spaces, ignoring case */
static int text_eq(const char *a, const char *b)
{
    while (*a == ' ') a++;
    while (*b == ' ') b++;
    size_t na = strlen(a), nb = strlen(b);
    while (na && a[na - 1] == ' ') na--;
    while (nb && b[nb - 1] == ' ') nb--;
    return na == nb && !strncasecmp(a, b, na);
}

/* The alarm at c's time that a policy should tap (alarm on:true: one that is off; on:false:
 * one that is on), or -1; *any gets whether an alarm at that time exists. */
static int alarm_to_tap(const struct ph_state *st, const struct cond *c, int *any)
{
    int k = -1;
    *any = 0;
    for (int i = 0; i < st->n_alarms; i++)
        if (st->alarms[i].hour == c->hour && st->alarms[i].minute == c->minute) {
            *any = 1;
            if (k < 0 && st->alarms[i].on != c->is) k = i;
        }
    return k;
}

static int cond_holds(const struct ph_state *st, const struct cond *c)
{
    int any, k;
    switch (c->kind) {
    case C_TOGGLE: return st->toggle[c->index] == c->is;
    case C_FAVORITE: return st->favorite[c->index] == c->is;
    case C_ALARM:
        k = alarm_to_tap(st, c, &any);
        if (c->is) { /* some alarm at that time is on */
            for (int i = 0; i < st->n_alarms; i++)
                if (st->alarms[i].hour == c->hour && st->alarms[i].minute == c->minute &&
                    st->alarms[i].on)
                    return 1;
            return 0;
        }
        return any && k < 0; /* there is one, and none is on */
    case C_SENT:
        for (int i = 0; i < st->n_sent; i++)
            if (st->sent[i].contact == c->index && text_eq(st->sent[i].text, c->text)) return 1;
        return 0;
    }
    return 0;
}

static int task_holds(const struct task *t, const struct ph_state *st)
{
    for (int i = 0; i < t->n_cond; i++)
        if (!cond_holds(st, &t->cond[i])) return 0;
    return 1;
}

/* ---------------------------------------------------------------- the task file */

/* "07:30" -> 7, 30; -1 unless H:MM or HH:MM in range */
static int parse_time(const char *s, int *h, int *m)
{
    if (!s) return -1;
    size_t n = strlen(s);
    if (n != 4 && n != 5) return -1;
    const char *c = s + n - 3;
    if (*c != ':' || !isdigit((unsigned char)c[1]) || !isdigit((unsigned char)c[2])) return -1;
    for (const char *q = s; q < c; q++)
        if (!isdigit((unsigned char)*q)) return -1;
    *h = atoi(s);
    *m = (c[1] - '0') * 10 + (c[2] - '0');
    return *h <= 23 && *m <= 59 ? 0 : -1;
}

static enum nb_status bad(const char *name, const char *task, const char *what)
{
    return nb_set_error(NB_ERR_FORMAT, "%s: task '%s': %s", name, task, what);
}

/* A member that must be a boolean; NB_ERR_FORMAT otherwise. */
static enum nb_status get_flag(const cJSON *o, const char *key, int *out, const char *name,
                               const char *task)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsBool(v))
        return nb_set_error(NB_ERR_FORMAT, "%s: task '%s': \"%s\" must be true or false", name,
                            task, key);
    *out = cJSON_IsTrue(v);
    return NB_OK;
}

static enum nb_status parse_start(const cJSON *s, struct ph_state *st, const char *name,
                                  const char *task)
{
    if (!s) return NB_OK;
    if (!cJSON_IsObject(s)) return bad(name, task, "\"start\" must be an object");
    for (const cJSON *e = s->child; e; e = e->next) {
        int t = ph_toggle_find(e->string);
        if (t >= 0) {
            if (!cJSON_IsBool(e)) return bad(name, task, "a toggle in \"start\" must be true or false");
            st->toggle[t] = cJSON_IsTrue(e);
        } else if (!strcmp(e->string, "alarms")) {
            if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) > PH_MAX_ALARMS)
                return bad(name, task, "\"start.alarms\" must be an array of at most 8");
            for (const cJSON *a = e->child; a; a = a->next) {
                struct ph_alarm *al = &st->alarms[st->n_alarms];
                const cJSON *tm = cJSON_GetObjectItemCaseSensitive(a, "time");
                if (!cJSON_IsObject(a) || parse_time(cJSON_GetStringValue(tm), &al->hour, &al->minute))
                    return bad(name, task, "an alarm needs \"time\": \"H:MM\" (0:00 to 23:59)");
                if (get_flag(a, "on", &al->on, name, task)) return NB_ERR_FORMAT;
                st->n_alarms++;
            }
        } else if (!strcmp(e->string, "favorites")) {
            if (!cJSON_IsArray(e)) return bad(name, task, "\"start.favorites\" must be an array");
            for (const cJSON *a = e->child; a; a = a->next) {
                int c = ph_contact_find(cJSON_GetStringValue(a));
                if (c < 0) return bad(name, task, "\"start.favorites\" names an unknown contact");
                st->favorite[c] = 1;
            }
        } else {
            return nb_set_error(NB_ERR_FORMAT, "%s: task '%s': unknown key \"start.%s\"", name,
                                task, e->string);
        }
    }
    return NB_OK;
}

static enum nb_status parse_cond(const cJSON *o, struct cond *c, const char *name, const char *task)
{
    if (!cJSON_IsObject(o)) return bad(name, task, "a \"success\" clause must be an object");
    const cJSON *v;
    memset(c, 0, sizeof *c);
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "toggle"))) {
        c->kind = C_TOGGLE;
        if ((c->index = ph_toggle_find(cJSON_GetStringValue(v))) < 0)
            return bad(name, task, "\"toggle\" must name wifi, bluetooth, airplane, dark_theme, dnd or location");
        return get_flag(o, "is", &c->is, name, task);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "favorite"))) {
        c->kind = C_FAVORITE;
        if ((c->index = ph_contact_find(cJSON_GetStringValue(v))) < 0)
            return bad(name, task, "\"favorite\" names an unknown contact");
        return get_flag(o, "is", &c->is, name, task);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "alarm"))) {
        c->kind = C_ALARM;
        if (parse_time(cJSON_GetStringValue(v), &c->hour, &c->minute))
            return bad(name, task, "\"alarm\" must be a time \"H:MM\" (0:00 to 23:59)");
        return get_flag(o, "on", &c->is, name, task);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(o, "sent_to"))) {
        c->kind = C_SENT;
        if ((c->index = ph_contact_find(cJSON_GetStringValue(v))) < 0)
            return bad(name, task, "\"sent_to\" names an unknown contact");
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "text"));
        if (!text || !text[0] || strlen(text) >= PH_TEXT)
            return bad(name, task, "\"sent_to\" needs \"text\" of 1 to 63 bytes");
        memcpy(c->text, text, strlen(text) + 1);
        return NB_OK;
    }
    return bad(name, task, "a \"success\" clause needs \"toggle\", \"favorite\", \"alarm\" or \"sent_to\"");
}

/* Can the correct policy reach every clause from the start? (alarm off: the alarm must
 * exist; a message must fit the outbox) */
static int solvable(const struct task *t)
{
    for (int i = 0; i < t->n_cond; i++) {
        const struct cond *c = &t->cond[i];
        int any;
        (void)alarm_to_tap(&t->start, c, &any);
        if (c->kind == C_ALARM && !c->is && !any) return 0;
        if (c->kind == C_ALARM && c->is && !any && t->start.n_alarms == PH_MAX_ALARMS) return 0;
        if (c->kind == C_SENT && t->start.n_sent == PH_MAX_SENT) return 0;
    }
    return 1;
}

static enum nb_status parse_task(const cJSON *o, struct task *t, int i, const char *name)
{
    char fallback[32];
    snprintf(fallback, sizeof fallback, "#%d", i);
    if (!cJSON_IsObject(o)) return bad(name, fallback, "a task must be an object");
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "id"));
    if (!id || !id[0] || strlen(id) >= sizeof t->id) return bad(name, fallback, "\"id\" must be a string of 1 to 63 bytes");
    memcpy(t->id, id, strlen(id) + 1);
    for (const cJSON *e = o->child; e; e = e->next)
        if (strcmp(e->string, "id") && strcmp(e->string, "app") && strcmp(e->string, "instructions") &&
            strcmp(e->string, "start") && strcmp(e->string, "success") && strcmp(e->string, "max_steps"))
            return nb_set_error(NB_ERR_FORMAT, "%s: task '%s': unknown key \"%s\"", name, id, e->string);
    int app = ph_app_find(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "app")));
    if (app <= PH_APP_HOME) return bad(name, id, "\"app\" must name an app (settings, clock, messages, contacts, ...)");
    t->app = (enum ph_app)app;
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "instructions");
    int n = cJSON_IsArray(ins) ? cJSON_GetArraySize(ins) : 0;
    if (n < 1 || n > AG_MAX_INSTR) return bad(name, id, "\"instructions\" must be an array of 1 to 8 strings");
    for (const cJSON *e = ins->child; e; e = e->next) {
        const char *s = cJSON_GetStringValue(e);
        if (!s || !s[0] || strlen(s) >= AG_MAX_INSTR_LEN)
            return bad(name, id, "an instruction must be a string of 1 to 255 bytes");
        memcpy(t->instr[t->n_instr++], s, strlen(s) + 1);
    }
    enum nb_status st = parse_start(cJSON_GetObjectItemCaseSensitive(o, "start"), &t->start, name, id);
    if (st) return st;
    const cJSON *suc = cJSON_GetObjectItemCaseSensitive(o, "success");
    n = cJSON_IsArray(suc) ? cJSON_GetArraySize(suc) : 0;
    if (n < 1 || n > AG_MAX_COND) return bad(name, id, "\"success\" must be an array of 1 to 4 clauses");
    for (const cJSON *e = suc->child; e; e = e->next)
        if ((st = parse_cond(e, &t->cond[t->n_cond++], name, id))) return st;
    int64_t ms = 0;
    if ((st = nb_json_get_int(o, "max_steps", 20, &ms, name))) return st;
    if (ms < 1 || ms > AG_MAX_STEPS) return bad(name, id, "\"max_steps\" must be 1 to 100");
    t->max_steps = (int)ms;
    if (task_holds(t, &t->start)) return bad(name, id, "the success predicate already holds at the start");
    if (!solvable(t)) return bad(name, id, "the success predicate cannot be reached from the start");
    return NB_OK;
}

static enum nb_status tasks_from_json(const cJSON *root, const char *name, struct nb_agent_tasks **out)
{
    enum nb_status st = NB_OK;
    struct nb_agent_tasks *ts = NULL;
    if (!cJSON_IsObject(root))
        return nb_set_error(NB_ERR_FORMAT, "%s: a task file is an object {\"tasks\": [...]}", name);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tasks");
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
    if (n < 1 || n > AG_MAX_TASKS)
        return nb_set_error(NB_ERR_FORMAT, "%s: \"tasks\" must be an array of 1 to %d tasks", name,
                            AG_MAX_TASKS);
    ts = calloc(1, sizeof *ts);
    if (!ts || !(ts->tasks = calloc((size_t)n, sizeof *ts->tasks))) {
        st = nb_set_error(NB_ERR_NOMEM, "%s: %d tasks", name, n);
        goto fail;
    }
    for (const cJSON *e = arr->child; e; e = e->next, ts->n++) {
        if ((st = parse_task(e, &ts->tasks[ts->n], ts->n, name))) goto fail;
        for (int j = 0; j < ts->n; j++)
            if (!strcmp(ts->tasks[j].id, ts->tasks[ts->n].id)) {
                st = bad(name, ts->tasks[j].id, "listed twice");
                goto fail;
            }
    }
    *out = ts;
    return NB_OK;
fail:
    nb_agent_tasks_free(ts);
    return st;
}

enum nb_status nb_agent_tasks_parse(struct nb_agent_tasks **out, const char *buf, size_t len,
                                    const char *name)
{
    cJSON *root = NULL;
    *out = NULL;
    enum nb_status st = nb_json_parse(buf, len, name ? name : "tasks", &root);
    if (st == NB_OK) st = tasks_from_json(root, name ? name : "tasks", out);
    cJSON_Delete(root);
    return st;
}

enum nb_status nb_agent_tasks_load(struct nb_agent_tasks **out, const char *path)
{
    cJSON *root = NULL;
    *out = NULL;
    enum nb_status st = nb_json_load(path, &root);
    if (st == NB_OK) st = tasks_from_json(root, path, out);
    cJSON_Delete(root);
    return st;
}

void nb_agent_tasks_free(struct nb_agent_tasks *t)
{
    if (!t) return;
    free(t->tasks);
    free(t);
}

int nb_agent_tasks_count(const struct nb_agent_tasks *t) { return t ? t->n : 0; }

const char *nb_agent_task_id(const struct nb_agent_tasks *t, int i)
{
    return t && i >= 0 && i < t->n ? t->tasks[i].id : NULL;
}

static void add_time(cJSON *o, const char *key, int h, int m)
{
    char s[8];
    snprintf(s, sizeof s, "%d:%02d", h, m);
    cJSON_AddStringToObject(o, key, s);
}

/* One task as the file has it (the inverse of parse_task). */
static cJSON *task_json(const struct task *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", t->id);
    cJSON_AddStringToObject(o, "app", ph_app_name[t->app]);
    cJSON *ins = cJSON_AddArrayToObject(o, "instructions");
    for (int i = 0; i < t->n_instr; i++) cJSON_AddItemToArray(ins, cJSON_CreateString(t->instr[i]));
    cJSON *st = cJSON_AddObjectToObject(o, "start");
    for (int k = 0; k < PH_N_TOGGLES; k++) cJSON_AddBoolToObject(st, ph_toggle_name[k], t->start.toggle[k]);
    cJSON *al = cJSON_AddArrayToObject(st, "alarms");
    for (int i = 0; i < t->start.n_alarms; i++) {
        cJSON *a = cJSON_CreateObject();
        add_time(a, "time", t->start.alarms[i].hour, t->start.alarms[i].minute);
        cJSON_AddBoolToObject(a, "on", t->start.alarms[i].on);
        cJSON_AddItemToArray(al, a);
    }
    cJSON *fav = cJSON_AddArrayToObject(st, "favorites");
    for (int k = 0; k < PH_N_CONTACTS; k++)
        if (t->start.favorite[k]) cJSON_AddItemToArray(fav, cJSON_CreateString(ph_contact_name[k]));
    cJSON *suc = cJSON_AddArrayToObject(o, "success");
    for (int i = 0; i < t->n_cond; i++) {
        const struct cond *c = &t->cond[i];
        cJSON *e = cJSON_CreateObject();
        switch (c->kind) {
        case C_TOGGLE:
            cJSON_AddStringToObject(e, "toggle", ph_toggle_name[c->index]);
            cJSON_AddBoolToObject(e, "is", c->is);
            break;
        case C_FAVORITE:
            cJSON_AddStringToObject(e, "favorite", ph_contact_name[c->index]);
            cJSON_AddBoolToObject(e, "is", c->is);
            break;
        case C_ALARM:
            add_time(e, "alarm", c->hour, c->minute);
            cJSON_AddBoolToObject(e, "on", c->is);
            break;
        case C_SENT:
            cJSON_AddStringToObject(e, "sent_to", ph_contact_name[c->index]);
            cJSON_AddStringToObject(e, "text", c->text);
            break;
        }
        cJSON_AddItemToArray(suc, e);
    }
    cJSON_AddNumberToObject(o, "max_steps", t->max_steps);
    return o;
}

enum nb_status nb_agent_tasks_json(const struct nb_agent_tasks *t, char **json_out)
{
    *json_out = NULL;
    if (!t) return nb_set_error(NB_ERR_INVALID_ARG, "tasks_json: no tasks");
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON *arr = cJSON_AddArrayToObject(root, "tasks");
    for (int i = 0; i < t->n; i++) cJSON_AddItemToArray(arr, task_json(&t->tasks[i]));
    *json_out = cJSON_Print(root);
    cJSON_Delete(root);
    return *json_out ? NB_OK : nb_set_error(NB_ERR_NOMEM, "tasks_json: %d tasks", t->n);
}

/* ---------------------------------------------------------------- generated variants */

static const char *const k_toggle_words[PH_N_TOGGLES] = {"Wi-Fi",      "Bluetooth",      "airplane mode",
                                                         "dark theme", "Do not disturb", "location"};
static const char *const k_on_fmt[] = {"Turn on %s.", "Switch %s on.", "Enable %s.",
                                       "Please turn %s on.", "I need %s on."};
static const char *const k_off_fmt[] = {"Turn off %s.", "Switch %s off.", "Disable %s.",
                                        "Please turn %s off.", "I need %s off."};
static const char *const k_alarm_fmt[] = {"Set an alarm for %d:%02d.", "Wake me up at %d:%02d.",
                                          "Create an alarm at %d:%02d.", "Add a %d:%02d alarm."};
static const char *const k_alarm_off_fmt[] = {"Turn off the %d:%02d alarm.",
                                              "Disable my alarm at %d:%02d.",
                                              "Switch off the alarm set for %d:%02d."};
static const char *const k_msg_fmt[] = {"Send %s a message saying \"%s\".", "Text %s: \"%s\"",
                                        "Message %s \"%s\".", "Tell %s \"%s\" by message."};
static const char *const k_fav_fmt[] = {"Add %s to favourites.", "Mark %s as a favourite contact.",
                                        "Star %s in Contacts."};
static const char *const k_unfav_fmt[] = {"Remove %s from favourites.", "Unstar %s in Contacts.",
                                          "%s should no longer be a favourite."};
static const char *const k_texts[] = {"on my way", "running late", "see you at noon", "call me",
                                      "thanks", "happy birthday", "I am home", "lunch today?",
                                      "good night", "meeting moved to 3"};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int pick(uint64_t *rng, int n) { return (int)(ph_rand(rng) % (uint64_t)n); }

/* Three different indices below n (n >= 3): the paraphrases of a variant. */
static void pick3(uint64_t *rng, int n, int out[3])
{
    int idx[8];
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 0; i < 3; i++) {
        int j = i + pick(rng, n - i), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        out[i] = idx[i];
    }
}

/* Variant i of the generator: kind i % 10, everything else drawn from rng. */
static void gen_task(struct task *t, int i, uint64_t *rng)
{
    memset(t, 0, sizeof *t);
    for (int k = 0; k < PH_N_TOGGLES; k++) t->start.toggle[k] = pick(rng, 2);
    for (int k = 0; k < PH_N_CONTACTS; k++) t->start.favorite[k] = pick(rng, 4) == 0;
    int n_al = pick(rng, 3);
    for (int k = 0; k < n_al; k++)
        t->start.alarms[t->start.n_alarms++] = (struct ph_alarm){pick(rng, 24), 5 * pick(rng, 12), pick(rng, 2)};
    t->max_steps = 20;
    int kind = i % 10, ix[3];
    static const int tog_of_kind[10] = {PH_WIFI, PH_BLUETOOTH, -1, PH_AIRPLANE, PH_DARK, PH_DND,
                                        PH_LOCATION, -1, -1, -1};
    struct cond *c = &t->cond[t->n_cond++];
    if (tog_of_kind[kind] >= 0) {
        int tg = tog_of_kind[kind], want = pick(rng, 2);
        t->start.toggle[tg] = !want;
        *c = (struct cond){.kind = C_TOGGLE, .index = tg, .is = want};
        t->app = PH_APP_SETTINGS;
        snprintf(t->id, sizeof t->id, "gen%d_%s_%s", i, ph_toggle_name[tg], want ? "on" : "off");
        pick3(rng, NELEM(k_on_fmt), ix);
        for (int k = 0; k < 3; k++)
            snprintf(t->instr[t->n_instr++], AG_MAX_INSTR_LEN, want ? k_on_fmt[ix[k]] : k_off_fmt[ix[k]],
                     k_toggle_words[tg]);
    } else if (kind == 2 || kind == 9) {
        int h = pick(rng, 24), m = pick(rng, 60), want = kind == 2;
        for (int k = 0; k < t->start.n_alarms; k++) /* no other alarm at that time */
            if (t->start.alarms[k].hour == h && t->start.alarms[k].minute == m) t->start.alarms[k].minute = (m + 1) % 60;
        if (!want) t->start.alarms[t->start.n_alarms++] = (struct ph_alarm){h, m, 1};
        *c = (struct cond){.kind = C_ALARM, .is = want, .hour = h, .minute = m};
        t->app = PH_APP_CLOCK;
        snprintf(t->id, sizeof t->id, "gen%d_alarm_%s_%02d%02d", i, want ? "set" : "off", h, m);
        pick3(rng, want ? NELEM(k_alarm_fmt) : NELEM(k_alarm_off_fmt), ix);
        for (int k = 0; k < 3; k++)
            snprintf(t->instr[t->n_instr++], AG_MAX_INSTR_LEN,
                     want ? k_alarm_fmt[ix[k]] : k_alarm_off_fmt[ix[k]], h, m);
    } else if (kind == 7) {
        int who = pick(rng, PH_N_CONTACTS);
        const char *text = k_texts[pick(rng, NELEM(k_texts))];
        *c = (struct cond){.kind = C_SENT, .index = who};
        snprintf(c->text, sizeof c->text, "%s", text);
        t->app = PH_APP_MESSAGES;
        snprintf(t->id, sizeof t->id, "gen%d_message_%s", i, ph_contact_name[who]);
        pick3(rng, NELEM(k_msg_fmt), ix);
        for (int k = 0; k < 3; k++)
            snprintf(t->instr[t->n_instr++], AG_MAX_INSTR_LEN, k_msg_fmt[ix[k]], ph_contact_name[who], text);
    } else { /* 8: favourite */
        int who = pick(rng, PH_N_CONTACTS), want = pick(rng, 2);
        t->start.favorite[who] = !want;
        *c = (struct cond){.kind = C_FAVORITE, .index = who, .is = want};
        t->app = PH_APP_CONTACTS;
        snprintf(t->id, sizeof t->id, "gen%d_%s_%s", i, want ? "favorite" : "unfavorite",
                 ph_contact_name[who]);
        pick3(rng, NELEM(k_fav_fmt), ix);
        for (int k = 0; k < 3; k++)
            snprintf(t->instr[t->n_instr++], AG_MAX_INSTR_LEN, want ? k_fav_fmt[ix[k]] : k_unfav_fmt[ix[k]],
                     ph_contact_name[who]);
    }
}

enum nb_status nb_agent_tasks_generate(struct nb_agent_tasks **out, int n, uint64_t seed)
{
    enum nb_status st = NB_OK;
    struct nb_agent_tasks *ts = NULL;
    *out = NULL;
    if (n < 1 || n > AG_MAX_TASKS)
        return nb_set_error(NB_ERR_INVALID_ARG, "generate: %d tasks (1 to %d)", n, AG_MAX_TASKS);
    ts = calloc(1, sizeof *ts);
    if (!ts || !(ts->tasks = calloc((size_t)n, sizeof *ts->tasks))) {
        st = nb_set_error(NB_ERR_NOMEM, "generate: %d tasks", n);
        goto fail;
    }
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 0x7461736b73ull; /* "tasks" */
    for (; ts->n < n; ts->n++) {
        gen_task(&ts->tasks[ts->n], ts->n, &rng);
        if (task_holds(&ts->tasks[ts->n], &ts->tasks[ts->n].start) || !solvable(&ts->tasks[ts->n])) {
            st = nb_set_error(NB_ERR_INTERNAL, "generate: variant %d is not a task", ts->n);
            goto fail;
        }
    }
    *out = ts;
    return NB_OK;
fail:
    nb_agent_tasks_free(ts);
    return st;
}

/* ---------------------------------------------------------------- episodes */

enum nb_status nb_agent_episode_init(struct nb_agent_episode **out, const struct nb_agent_tasks *t,
                                     int task, uint64_t seed)
{
    *out = NULL;
    if (!t || task < 0 || task >= t->n)
        return nb_set_error(NB_ERR_INVALID_ARG, "episode: task %d of %d", task, t ? t->n : 0);
    struct nb_agent_episode *e = calloc(1, sizeof *e);
    if (!e) return nb_set_error(NB_ERR_NOMEM, "episode");
    e->task = &t->tasks[task];
    uint64_t rng = seed ^ ((uint64_t)task << 32);
    e->instr = (int)(ph_rand(&rng) % (uint64_t)e->task->n_instr);
    ph_init(&e->ph, &e->task->start, ph_rand(&rng));
    *out = e;
    return NB_OK;
}

void nb_agent_episode_free(struct nb_agent_episode *e) { free(e); }

const char *nb_agent_episode_instruction(const struct nb_agent_episode *e)
{
    return e->task->instr[e->instr];
}
const char *nb_agent_episode_app(const struct nb_agent_episode *e) { return ph_app_name[e->task->app]; }
const char *nb_agent_episode_action(const struct nb_agent_episode *e) { return e->action; }
const char *nb_agent_episode_note(const struct nb_agent_episode *e) { return e->note; }
enum nb_agent_outcome nb_agent_episode_outcome(const struct nb_agent_episode *e)
{
    return e->outcome;
}
int nb_agent_episode_steps(const struct nb_agent_episode *e) { return e->steps; }
int nb_agent_episode_max_steps(const struct nb_agent_episode *e) { return e->task->max_steps; }

const char *nb_agent_episode_screen(struct nb_agent_episode *e, int json)
{
    ph_render(&e->ph, json, e->screen, sizeof e->screen);
    return e->screen;
}

static uint64_t fnv(const char *s, uint64_t h)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Parse a reply into an action; NB_ERR_FORMAT naming what is wrong. */
static enum nb_status parse_action(const char *reply, size_t len, struct ph_action *a)
{
    while (len && isspace((unsigned char)*reply)) reply++, len--;
    while (len && isspace((unsigned char)reply[len - 1])) len--;
    if (len >= 3 && !memcmp(reply, "```", 3)) { /* ```json ... ``` */
        const char *nl = memchr(reply, '\n', len);
        if (!nl || len < 6 || memcmp(reply + len - 3, "```", 3))
            return nb_set_error(NB_ERR_FORMAT, "an unclosed ``` fence");
        len -= (size_t)(nl + 1 - reply) + 3;
        reply = nl + 1;
    }
    cJSON *o = NULL;
    enum nb_status st = nb_json_parse(reply, len, "reply", &o);
    if (st) return NB_ERR_FORMAT;
    static const struct {
        const char *name, *arg;
        enum ph_action_kind kind;
    } acts[] = {{"tap", "id", PH_ACT_TAP},          {"type", "text", PH_ACT_TYPE},
                {"back", NULL, PH_ACT_BACK},        {"home", NULL, PH_ACT_HOME},
                {"scroll", "direction", PH_ACT_SCROLL}, {"task_complete", NULL, PH_ACT_COMPLETE}};
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "action"));
    st = nb_set_error(NB_ERR_FORMAT, "not an object with \"action\": tap, type, back, home, "
                                     "scroll or task_complete");
    memset(a, 0, sizeof *a);
    for (int i = 0; name && i < NELEM(acts); i++) {
        if (strcmp(name, acts[i].name)) continue;
        a->kind = acts[i].kind;
        if (!acts[i].arg) {
            st = NB_OK;
            break;
        }
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, acts[i].arg));
        if (!v || strlen(v) >= sizeof a->arg)
            st = nb_set_error(NB_ERR_FORMAT, "\"%s\" needs \"%s\": a string of at most %d bytes",
                              name, acts[i].arg, (int)sizeof a->arg - 1);
        else {
            memcpy(a->arg, v, strlen(v) + 1);
            st = NB_OK;
        }
        break;
    }
    cJSON_Delete(o);
    return st;
}

/* The action as canonical JSON ({"action": ..., its argument}) into buf. */
static void canon(char *buf, size_t cap, const struct ph_action *a)
{
    static const char *const names[] = {"tap", "type", "back", "home", "scroll", "task_complete"};
    static const char *const args[] = {"id", "text", NULL, NULL, "direction", NULL};
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "action", names[a->kind]);
    if (args[a->kind]) cJSON_AddStringToObject(o, args[a->kind], a->arg);
    char *s = cJSON_PrintUnformatted(o);
    snprintf(buf, cap, "%s", s ? s : "");
    free(s);
    cJSON_Delete(o);
}

static void finish(struct nb_agent_episode *e, enum end_reason why)
{
    if (task_holds(e->task, &e->ph.st)) e->outcome = NB_AGENT_DONE;
    else if (e->ever_held) e->outcome = NB_AGENT_DONE_REVERSED;
    else if (why == END_INVALID) e->outcome = NB_AGENT_INVALID_ACTION;
    else if (why == END_LOOP) e->outcome = NB_AGENT_LOOPING;
    else if (why == END_LIMIT) e->outcome = NB_AGENT_STEP_LIMIT;
    else if (ph_screen_app(e->ph.screen) != e->task->app) e->outcome = NB_AGENT_WRONG_APP;
    else e->outcome = NB_AGENT_INCOMPLETE;
}

enum nb_status nb_agent_episode_step(struct nb_agent_episode *e, const char *reply, size_t len)
{
    if (e->outcome != NB_AGENT_RUNNING)
        return nb_set_error(NB_ERR_INVALID_ARG, "episode: it has ended (%s)",
                            nb_agent_outcome_name(e->outcome));
    struct ph_action a;
    e->action[0] = e->note[0] = '\0';
    e->steps++;
    if (parse_action(reply ? reply : "", reply ? len : 0, &a)) {
        snprintf(e->note, sizeof e->note, "invalid reply: %s", nb_last_error());
        finish(e, END_INVALID);
        return NB_OK;
    }
    canon(e->action, sizeof e->action, &a);
    ph_render(&e->ph, 0, e->screen, sizeof e->screen);
    uint64_t key = fnv(e->action, fnv(e->screen, 0xcbf29ce484222325ull));
    int seen = 0;
    for (int i = 0; i < e->steps - 1; i++) seen += e->keys[i] == key;
    e->keys[e->steps - 1] = key;
    if (seen + 1 >= AG_LOOP_REPEATS) {
        snprintf(e->note, sizeof e->note, "the same action on the same screen %d times",
                 AG_LOOP_REPEATS);
        finish(e, END_LOOP);
        return NB_OK;
    }
    if (a.kind == PH_ACT_COMPLETE) {
        finish(e, END_COMPLETE);
        return NB_OK;
    }
    if (ph_apply(&e->ph, &a)) {
        snprintf(e->note, sizeof e->note, "invalid action: %s", nb_last_error());
        finish(e, END_INVALID);
        return NB_OK;
    }
    if (task_holds(e->task, &e->ph.st)) e->ever_held = 1;
    if (e->steps >= e->task->max_steps) {
        snprintf(e->note, sizeof e->note, "step limit %d", e->task->max_steps);
        finish(e, END_LIMIT);
    }
    return NB_OK;
}

/* ---------------------------------------------------------------- scripted policies */

static void act(struct ph_action *a, enum ph_action_kind k, const char *arg)
{
    a->kind = k;
    snprintf(a->arg, sizeof a->arg, "%s", arg ? arg : "");
}

/* Toward screen `to` (a first screen of an app, or a Settings page) from anywhere. */
static void nav(const struct nb_phone *p, enum ph_screen to, struct ph_action *a)
{
    char id[PH_ID];
    enum ph_app app = ph_screen_app(to);
    if (p->screen == PH_SCR_HOME) {
        snprintf(id, sizeof id, "app_%s", ph_app_name[app]);
        act(a, PH_ACT_TAP, id);
    } else if (p->screen == PH_SCR_SETTINGS && app == PH_APP_SETTINGS) {
        static const char *const ids[] = {"settings_network", "settings_bluetooth", "settings_display",
                                          "settings_sound", "settings_location"};
        act(a, PH_ACT_TAP, ids[to - PH_SCR_NETWORK]);
    } else {
        act(a, PH_ACT_HOME, NULL);
    }
}

/* Fill field `f` (its node id `id`) with `want`: tap it, then type. 0 if it holds it. */
static int fill(const struct nb_phone *p, int f, const char *id, const char *want, int ci,
                struct ph_action *a)
{
    if (ci ? !strcasecmp(p->field[f], want) : !strcmp(p->field[f], want)) return 0;
    if (p->focus != f) act(a, PH_ACT_TAP, id);
    else act(a, PH_ACT_TYPE, want);
    return 1;
}

/* The correct policy's next move toward clause c (not holding). */
static void plan(const struct nb_phone *p, const struct cond *c, struct ph_action *a)
{
    char id[PH_ID], s[16];
    int any, k;
    switch (c->kind) {
    case C_TOGGLE:
        if (p->screen == ph_toggle_screen((enum ph_toggle)c->index))
            act(a, PH_ACT_TAP, ph_toggle_name[c->index]);
        else
            nav(p, ph_toggle_screen((enum ph_toggle)c->index), a);
        return;
    case C_ALARM:
        k = alarm_to_tap(&p->st, c, &any);
        if (p->screen == PH_SCR_ALARM_EDIT) {
            snprintf(s, sizeof s, "%d", c->hour);
            if (fill(p, 0, "hour", s, 0, a)) return;
            snprintf(s, sizeof s, "%02d", c->minute);
            if (fill(p, 1, "minute", s, 0, a)) return;
            act(a, PH_ACT_TAP, "save");
        } else if (p->screen != PH_SCR_CLOCK) {
            nav(p, PH_SCR_CLOCK, a);
        } else if (k >= 0) {
            snprintf(id, sizeof id, "alarm_%d", k);
            act(a, PH_ACT_TAP, id);
        } else {
            act(a, PH_ACT_TAP, "add_alarm");
        }
        return;
    case C_SENT:
        if (p->screen == PH_SCR_COMPOSE) {
            if (fill(p, 0, "to", ph_contact_name[c->index], 1, a)) return;
            if (fill(p, 1, "message", c->text, 0, a)) return;
            act(a, PH_ACT_TAP, "send");
        } else if (p->screen == PH_SCR_MESSAGES) {
            act(a, PH_ACT_TAP, "new_message");
        } else {
            nav(p, PH_SCR_MESSAGES, a);
        }
        return;
    case C_FAVORITE:
        if (p->screen == PH_SCR_CONTACT && p->contact == c->index) {
            act(a, PH_ACT_TAP, "favorite");
        } else if (p->screen == PH_SCR_CONTACT) {
            act(a, PH_ACT_BACK, NULL);
        } else if (p->screen == PH_SCR_CONTACTS) {
            int pos = 0;
            while (p->contact_order[pos] != c->index) pos++;
            if (pos < p->scroll) act(a, PH_ACT_SCROLL, "up");
            else if (pos >= p->scroll + PH_PAGE) act(a, PH_ACT_SCROLL, "down");
            else {
                snprintf(id, sizeof id, "contact_%s", ph_contact_name[c->index]);
                for (char *q = id; *q; q++) *q = (char)tolower((unsigned char)*q);
                act(a, PH_ACT_TAP, id);
            }
        } else {
            nav(p, PH_SCR_CONTACTS, a);
        }
        return;
    }
}

/* The undo of clause c just made to hold (we are on the screen that did it). */
static void undo(const struct nb_phone *p, const struct cond *c, struct ph_action *a)
{
    char id[PH_ID];
    switch (c->kind) {
    case C_TOGGLE: act(a, PH_ACT_TAP, ph_toggle_name[c->index]); return;
    case C_FAVORITE: act(a, PH_ACT_TAP, "favorite"); return;
    case C_ALARM: /* after saving or switching, the Clock screen: switch it back */
        for (int i = 0; i < p->st.n_alarms; i++)
            if (p->st.alarms[i].hour == c->hour && p->st.alarms[i].minute == c->minute &&
                p->st.alarms[i].on == c->is) {
                snprintf(id, sizeof id, "alarm_%d", i);
                act(a, PH_ACT_TAP, id);
                return;
            }
        break;
    case C_SENT: /* after sending, the Messages screen: delete it */
        for (int i = 0; i < p->st.n_sent; i++)
            if (p->st.sent[i].contact == c->index && text_eq(p->st.sent[i].text, c->text)) {
                snprintf(id, sizeof id, "delete_%d", i);
                act(a, PH_ACT_TAP, id);
                return;
            }
        break;
    }
    act(a, PH_ACT_COMPLETE, NULL);
}

/* The correct policy: toward the first clause that does not hold; task_complete when all do. */
static void correct(const struct nb_phone *p, const struct task *t, struct ph_action *a)
{
    act(a, PH_ACT_COMPLETE, NULL);
    for (int i = 0; i < t->n_cond; i++)
        if (!cond_holds(&p->st, &t->cond[i])) {
            plan(p, &t->cond[i], a);
            return;
        }
}

enum nb_status nb_agent_policy_reply(struct nb_agent_episode *e, enum nb_agent_policy policy,
                                     char *buf, size_t cap)
{
    if ((unsigned)policy >= NB_AGENT_N_POLICIES)
        return nb_set_error(NB_ERR_INVALID_ARG, "policy %d: unknown", (int)policy);
    if (e->outcome != NB_AGENT_RUNNING)
        return nb_set_error(NB_ERR_INVALID_ARG, "policy: the episode has ended");
    const struct nb_phone *p = &e->ph;
    const struct task *t = e->task;
    struct ph_action a = {0};
    char id[PH_ID];
    switch (policy) {
    case NB_AGENT_POLICY_INVALID_JSON:
        snprintf(buf, cap, "I will open %s and do it: %s", ph_app_name[t->app],
                 nb_agent_episode_instruction(e));
        return NB_OK;
    case NB_AGENT_POLICY_LOOP: /* open the right app, go back, open it again, ... */
        if (p->screen == PH_SCR_HOME) nav(p, ph_app_screen(t->app), &a);
        else act(&a, PH_ACT_BACK, NULL);
        break;
    case NB_AGENT_POLICY_WRONG_APP:
        if (p->screen == PH_SCR_HOME) act(&a, PH_ACT_TAP, t->app == PH_APP_CAMERA ? "app_calendar" : "app_camera");
        else act(&a, PH_ACT_COMPLETE, NULL);
        break;
    case NB_AGENT_POLICY_WANDER: /* every app in turn, and back */
        if (p->screen == PH_SCR_HOME) {
            snprintf(id, sizeof id, "app_%s", ph_app_name[1 + (e->steps / 2) % (PH_N_APPS - 1)]);
            act(&a, PH_ACT_TAP, id);
        } else {
            act(&a, PH_ACT_BACK, NULL);
        }
        break;
    case NB_AGENT_POLICY_REVERSE:
        if (task_holds(t, &p->st) && !e->reversed) {
            undo(p, &t->cond[t->n_cond - 1], &a);
            e->reversed = 1;
            break;
        }
        if (e->reversed) act(&a, PH_ACT_COMPLETE, NULL);
        else correct(p, t, &a); /* until the task is done */
        break;
    default: correct(p, t, &a); break;
    }
    if (cap) canon(buf, cap, &a);
    return NB_OK;
}
