/* test_agent — the simulated phone and its tasks (issue 18): every scripted policy ends
 * every task of data/agent/tasks.json, and of generated variants, in exactly its outcome
 * class (at the step count it must); screens are deterministic per seed and shuffled
 * across seeds; state changes and changes back; replies that are not one action end the
 * episode; the task parser names what is wrong. */
#include "helpers/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/phone.h"
#include "nibble.h"
#include "nibble_eval.h"

static struct nb_agent_tasks *load_file_tasks(void)
{
    char path[4096];
    const char *src = getenv("NIBBLE_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/data/agent/tasks.json", src ? src : ".");
    struct nb_agent_tasks *t = NULL;
    if (nb_agent_tasks_load(&t, path) != NB_OK) fail_msg("%s", nb_last_error());
    return t;
}

/* Run a scripted policy to the end; returns the outcome, *steps the steps taken. */
static int run_policy(const struct nb_agent_tasks *t, int task, uint64_t seed, int policy, int *steps)
{
    struct nb_agent_episode *e = NULL;
    assert_int_equal(nb_agent_episode_init(&e, t, task, seed), NB_OK);
    char reply[256];
    for (int guard = 0; nb_agent_episode_outcome(e) == NB_AGENT_RUNNING; guard++) {
        assert_true(guard < 200);
        assert_int_equal(nb_agent_policy_reply(e, policy, reply, sizeof reply), NB_OK);
        assert_int_equal(nb_agent_episode_step(e, reply, strlen(reply)), NB_OK);
    }
    int o = nb_agent_episode_outcome(e);
    if (steps) *steps = nb_agent_episode_steps(e);
    nb_agent_episode_free(e);
    return o;
}

/* Replies given by hand; returns the outcome (NB_AGENT_RUNNING if not ended). */
static int run_replies(const struct nb_agent_tasks *t, int task, uint64_t seed,
                       const char *const *replies, int n, char *note, size_t cap)
{
    struct nb_agent_episode *e = NULL;
    assert_int_equal(nb_agent_episode_init(&e, t, task, seed), NB_OK);
    for (int i = 0; i < n && nb_agent_episode_outcome(e) == NB_AGENT_RUNNING; i++)
        assert_int_equal(nb_agent_episode_step(e, replies[i], strlen(replies[i])), NB_OK);
    int o = nb_agent_episode_outcome(e);
    if (note) snprintf(note, cap, "%s", nb_agent_episode_note(e));
    nb_agent_episode_free(e);
    return o;
}

static int task_index(const struct nb_agent_tasks *t, const char *id)
{
    for (int i = 0; i < nb_agent_tasks_count(t); i++)
        if (!strcmp(nb_agent_task_id(t, i), id)) return i;
    fail_msg("no task %s", id);
    return -1;
}

/* ---------------------------------------------------------------- the task file */

static void test_task_file(void **state)
{
    struct nb_agent_tasks *t = load_file_tasks();
    assert_int_equal(nb_agent_tasks_count(t), 10);
    const char *need[] = {"wifi_on", "bluetooth_off", "alarm_0730"};
    for (int i = 0; i < 3; i++) (void)task_index(t, need[i]);
    assert_null(nb_agent_task_id(t, 10));
    assert_null(nb_agent_task_id(t, -1));
    nb_agent_tasks_free(t);
}

/* Each scripted policy, each task, five seeds: exactly its class. */
static void test_policies_file(void **state)
{
    static const int expect[NB_AGENT_N_POLICIES] = {
        [NB_AGENT_POLICY_CORRECT] = NB_AGENT_DONE,
        [NB_AGENT_POLICY_REVERSE] = NB_AGENT_DONE_REVERSED,
        [NB_AGENT_POLICY_LOOP] = NB_AGENT_LOOPING,
        [NB_AGENT_POLICY_INVALID_JSON] = NB_AGENT_INVALID_ACTION,
        [NB_AGENT_POLICY_WRONG_APP] = NB_AGENT_WRONG_APP,
        [NB_AGENT_POLICY_WANDER] = NB_AGENT_STEP_LIMIT};
    struct nb_agent_tasks *t = load_file_tasks();
    for (int p = 0; p < NB_AGENT_N_POLICIES; p++)
        for (int k = 0; k < nb_agent_tasks_count(t); k++)
            for (uint64_t seed = 1; seed <= 5; seed++) {
                int steps = 0, o = run_policy(t, k, seed, p, &steps);
                if (o != expect[p])
                    fail_msg("%s on %s seed %d: %s, not %s", nb_agent_policy_name(p),
                             nb_agent_task_id(t, k), (int)seed, nb_agent_outcome_name(o),
                             nb_agent_outcome_name(expect[p]));
                if (p == NB_AGENT_POLICY_LOOP) assert_int_equal(steps, 5); /* A B A B A */
                if (p == NB_AGENT_POLICY_INVALID_JSON) assert_int_equal(steps, 1);
                if (p == NB_AGENT_POLICY_WRONG_APP) assert_int_equal(steps, 2);
                if (p == NB_AGENT_POLICY_WANDER) assert_int_equal(steps, k == 2 || k >= 8 ? 16 : 12);
            }
    /* the correct policy's shortest paths: home -> settings -> page -> switch -> done */
    int steps = 0;
    assert_int_equal(run_policy(t, task_index(t, "wifi_on"), 1, NB_AGENT_POLICY_CORRECT, &steps), NB_AGENT_DONE);
    assert_int_equal(steps, 4);
    /* clock, add, tap hour, type 7, tap minute, type 30, save, done */
    assert_int_equal(run_policy(t, task_index(t, "alarm_0730"), 1, NB_AGENT_POLICY_CORRECT, &steps), NB_AGENT_DONE);
    assert_int_equal(steps, 8);
    /* messages, new, tap to, type, tap message, type, send, done */
    assert_int_equal(run_policy(t, task_index(t, "message_anna"), 1, NB_AGENT_POLICY_CORRECT, &steps), NB_AGENT_DONE);
    assert_int_equal(steps, 8);
    assert_int_equal(run_policy(t, task_index(t, "wifi_on"), 1, NB_AGENT_POLICY_REVERSE, &steps), NB_AGENT_DONE_REVERSED);
    assert_int_equal(steps, 5);
    nb_agent_tasks_free(t);
}

/* Generated variants: deterministic per seed, different across seeds, and the scripted
 * policies keep their classes on all of them. */
static void test_generated(void **state)
{
    struct nb_agent_tasks *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(nb_agent_tasks_generate(&a, 300, 1), NB_OK);
    assert_int_equal(nb_agent_tasks_generate(&b, 300, 1), NB_OK);
    assert_int_equal(nb_agent_tasks_generate(&c, 300, 2), NB_OK);
    int differ = 0;
    for (int i = 0; i < 300; i++) {
        assert_string_equal(nb_agent_task_id(a, i), nb_agent_task_id(b, i));
        differ += strcmp(nb_agent_task_id(a, i), nb_agent_task_id(c, i)) != 0;
    }
    assert_true(differ > 200);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(run_policy(a, i, (uint64_t)i, NB_AGENT_POLICY_CORRECT, NULL), NB_AGENT_DONE);
        assert_int_equal(run_policy(c, i, (uint64_t)i, NB_AGENT_POLICY_REVERSE, NULL), NB_AGENT_DONE_REVERSED);
        assert_int_equal(run_policy(a, i, (uint64_t)i, NB_AGENT_POLICY_LOOP, NULL), NB_AGENT_LOOPING);
        assert_int_equal(run_policy(a, i, (uint64_t)i, NB_AGENT_POLICY_WANDER, NULL), NB_AGENT_STEP_LIMIT);
    }
    /* as a file and back: the same tasks (the same text again) */
    char *j1 = NULL, *j2 = NULL;
    struct nb_agent_tasks *r = NULL;
    assert_int_equal(nb_agent_tasks_json(a, &j1), NB_OK);
    if (nb_agent_tasks_parse(&r, j1, strlen(j1), "gen.json") != NB_OK) fail_msg("%s", nb_last_error());
    assert_int_equal(nb_agent_tasks_json(r, &j2), NB_OK);
    assert_string_equal(j1, j2);
    assert_int_equal(nb_agent_tasks_count(r), 300);
    for (int i = 0; i < 300; i += 7) {
        struct nb_agent_episode *e1 = NULL, *e2 = NULL;
        assert_int_equal(nb_agent_episode_init(&e1, a, i, 9), NB_OK);
        assert_int_equal(nb_agent_episode_init(&e2, r, i, 9), NB_OK);
        assert_string_equal(nb_agent_episode_instruction(e1), nb_agent_episode_instruction(e2));
        assert_string_equal(nb_agent_episode_screen(e1, 1), nb_agent_episode_screen(e2, 1));
        nb_agent_episode_free(e1);
        nb_agent_episode_free(e2);
    }
    nb_free(j1);
    nb_free(j2);
    nb_agent_tasks_free(r);
    nb_agent_tasks_free(c);
    assert_int_equal(nb_agent_tasks_generate(&c, 0, 1), NB_ERR_INVALID_ARG);
    assert_null(c);
    nb_agent_tasks_free(a);
    nb_agent_tasks_free(b);
}

/* ---------------------------------------------------------------- episodes by hand */

static void test_outcomes_by_hand(void **state)
{
    struct nb_agent_tasks *t = load_file_tasks();
    int wifi = task_index(t, "wifi_on");
    char note[256];
    const char *on_off[] = {"{\"action\":\"tap\",\"id\":\"app_settings\"}",
                            "```json\n{\"action\": \"tap\", \"id\": \"settings_network\"}\n```",
                            " {\"action\":\"tap\",\"id\":\"wifi\"} ", "{\"action\":\"tap\",\"id\":\"wifi\"}",
                            "{\"action\":\"task_complete\"}"};
    assert_int_equal(run_replies(t, wifi, 3, on_off, 5, NULL, 0), NB_AGENT_DONE_REVERSED);
    assert_int_equal(run_replies(t, wifi, 3, on_off, 3, NULL, 0), NB_AGENT_RUNNING);
    const char *on_done[] = {on_off[0], on_off[1], on_off[2], on_off[4]};
    assert_int_equal(run_replies(t, wifi, 3, on_done, 4, NULL, 0), NB_AGENT_DONE);
    const char *give_up[] = {on_off[0], on_off[4]};
    assert_int_equal(run_replies(t, wifi, 3, give_up, 2, NULL, 0), NB_AGENT_INCOMPLETE);
    const char *home_done[] = {on_off[4]};
    assert_int_equal(run_replies(t, wifi, 3, home_done, 1, NULL, 0), NB_AGENT_WRONG_APP);
    /* wifi is not on the home screen */
    const char *tap_missing[] = {"{\"action\":\"tap\",\"id\":\"wifi\"}"};
    assert_int_equal(run_replies(t, wifi, 3, tap_missing, 1, note, sizeof note), NB_AGENT_INVALID_ACTION);
    assert_string_equal(note, "invalid action: tap: no node 'wifi' on this screen");
    const char *no_id[] = {"{\"action\":\"tap\"}"};
    assert_int_equal(run_replies(t, wifi, 3, no_id, 1, note, sizeof note), NB_AGENT_INVALID_ACTION);
    assert_non_null(strstr(note, "\"tap\" needs \"id\""));
    const char *type_nowhere[] = {"{\"action\":\"type\",\"text\":\"x\"}"};
    assert_int_equal(run_replies(t, wifi, 3, type_nowhere, 1, note, sizeof note), NB_AGENT_INVALID_ACTION);
    assert_non_null(strstr(note, "no text field is focused"));
    const char *bad_dir[] = {"{\"action\":\"scroll\",\"direction\":\"left\"}"};
    assert_int_equal(run_replies(t, wifi, 3, bad_dir, 1, NULL, 0), NB_AGENT_INVALID_ACTION);
    const char *two[] = {"{\"action\":\"home\"} {\"action\":\"back\"}"};
    assert_int_equal(run_replies(t, wifi, 3, two, 1, NULL, 0), NB_AGENT_INVALID_ACTION);
    const char *title[] = {"{\"action\":\"tap\",\"id\":\"app_clock\"}", "{\"action\":\"tap\",\"id\":\"title\"}"};
    assert_int_equal(run_replies(t, wifi, 3, title, 2, note, sizeof note), NB_AGENT_INVALID_ACTION);
    assert_string_equal(note, "invalid action: tap: 'title' is not clickable");
    /* back on the home screen changes nothing: the third is a loop */
    const char *backs[] = {"{\"action\":\"back\"}", "{\"action\":\"back\"}", "{\"action\":\"back\"}"};
    assert_int_equal(run_replies(t, wifi, 3, backs, 3, note, sizeof note), NB_AGENT_LOOPING);
    assert_string_equal(note, "the same action on the same screen 3 times");
    /* twelve steps that never repeat a (screen, action): the step limit */
    const char *limit[12];
    for (int i = 0; i < 12; i++)
        limit[i] = i % 2 ? "{\"action\":\"back\"}"
                         : (const char *[]){"{\"action\":\"tap\",\"id\":\"app_camera\"}",
                                            "{\"action\":\"tap\",\"id\":\"app_calendar\"}",
                                            "{\"action\":\"tap\",\"id\":\"app_clock\"}",
                                            "{\"action\":\"tap\",\"id\":\"app_contacts\"}",
                                            "{\"action\":\"tap\",\"id\":\"app_messages\"}",
                                            "{\"action\":\"tap\",\"id\":\"app_settings\"}"}[i / 2];
    assert_int_equal(run_replies(t, wifi, 3, limit, 12, note, sizeof note), NB_AGENT_STEP_LIMIT);
    assert_string_equal(note, "step limit 12");
    /* an ended episode takes no more steps */
    struct nb_agent_episode *e = NULL;
    assert_int_equal(nb_agent_episode_init(&e, t, wifi, 1), NB_OK);
    assert_int_equal(nb_agent_episode_step(e, "nope", 4), NB_OK);
    assert_int_equal(nb_agent_episode_outcome(e), NB_AGENT_INVALID_ACTION);
    assert_string_equal(nb_agent_episode_action(e), "");
    assert_int_equal(nb_agent_episode_step(e, on_off[0], strlen(on_off[0])), NB_ERR_INVALID_ARG);
    char buf[64];
    assert_int_equal(nb_agent_policy_reply(e, NB_AGENT_POLICY_CORRECT, buf, sizeof buf), NB_ERR_INVALID_ARG);
    nb_agent_episode_free(e);
    assert_int_equal(nb_agent_episode_init(&e, t, 10, 1), NB_ERR_INVALID_ARG);
    nb_agent_tasks_free(t);
}

/* ---------------------------------------------------------------- screens */

static void test_screens(void **state)
{
    struct nb_agent_tasks *t = load_file_tasks();
    struct nb_agent_episode *e1 = NULL, *e2 = NULL, *e3 = NULL;
    assert_int_equal(nb_agent_episode_init(&e1, t, 0, 7), NB_OK);
    assert_int_equal(nb_agent_episode_init(&e2, t, 0, 7), NB_OK);
    assert_int_equal(nb_agent_episode_init(&e3, t, 0, 8), NB_OK);
    char s1[4096], s3[4096];
    snprintf(s1, sizeof s1, "%s", nb_agent_episode_screen(e1, 0));
    assert_string_equal(s1, nb_agent_episode_screen(e2, 0));
    assert_true(!strncmp(s1, "[home > home]\ntitle TextView \"Home\"\n", 36));
    assert_non_null(strstr(s1, "\napp_settings Button \"Settings\" *\n"));
    assert_non_null(strstr(s1, "\napp_camera Button \"Camera\" *\n"));
    /* the same task under other seeds: other orders of the home icons (one of 7 seeds
     * may repeat an order by chance; all 7 cannot) */
    int other = 0;
    for (uint64_t s = 8; s < 15; s++) {
        struct nb_agent_episode *e = NULL;
        assert_int_equal(nb_agent_episode_init(&e, t, 0, s), NB_OK);
        other += strcmp(s1, nb_agent_episode_screen(e, 0)) != 0;
        nb_agent_episode_free(e);
    }
    assert_true(other >= 6);
    snprintf(s3, sizeof s3, "%s", nb_agent_episode_screen(e3, 1));
    cJSON *j = cJSON_Parse(s3);
    assert_non_null(j);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(j, "app")), "home");
    const cJSON *nodes = cJSON_GetObjectItem(j, "nodes");
    assert_int_equal(cJSON_GetArraySize(nodes), 7); /* title + 6 apps */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(nodes, 1), "clickable")));
    cJSON_Delete(j);
    /* into Settings > Network: the Wi-Fi switch shows its state */
    const char *go[] = {"{\"action\":\"tap\",\"id\":\"app_settings\"}",
                        "{\"action\":\"tap\",\"id\":\"settings_network\"}",
                        "{\"action\":\"tap\",\"id\":\"wifi\"}"};
    for (int i = 0; i < 2; i++) assert_int_equal(nb_agent_episode_step(e1, go[i], strlen(go[i])), NB_OK);
    const char *net = nb_agent_episode_screen(e1, 0);
    assert_non_null(strstr(net, "[settings > network]\n"));
    assert_non_null(strstr(net, "\nwifi Switch \"Wi-Fi\" off *\n"));
    assert_int_equal(nb_agent_episode_step(e1, go[2], strlen(go[2])), NB_OK);
    assert_non_null(strstr(nb_agent_episode_screen(e1, 0), "\nwifi Switch \"Wi-Fi\" on *\n"));
    assert_string_equal(nb_agent_episode_action(e1), "{\"action\":\"tap\",\"id\":\"wifi\"}");
    assert_string_equal(nb_agent_episode_app(e1), "settings");
    assert_int_equal(nb_agent_episode_max_steps(e1), 12);
    nb_agent_episode_free(e1);
    nb_agent_episode_free(e2);
    nb_agent_episode_free(e3);
    nb_agent_tasks_free(t);
}

/* ---------------------------------------------------------------- the phone itself */

static void apply_ok(struct nb_phone *p, enum ph_action_kind k, const char *arg)
{
    struct ph_action a = {.kind = k};
    snprintf(a.arg, sizeof a.arg, "%s", arg ? arg : "");
    if (ph_apply(p, &a) != NB_OK) fail_msg("%s", nb_last_error());
}

static void test_phone(void **state)
{
    struct ph_state st = {0};
    struct nb_phone p;
    char buf[2048];
    ph_init(&p, &st, 42);
    /* state changes and changes back */
    apply_ok(&p, PH_ACT_TAP, "app_settings");
    apply_ok(&p, PH_ACT_TAP, "settings_bluetooth");
    apply_ok(&p, PH_ACT_TAP, "bluetooth");
    assert_int_equal(p.st.toggle[PH_BLUETOOTH], 1);
    apply_ok(&p, PH_ACT_TAP, "bluetooth");
    assert_int_equal(p.st.toggle[PH_BLUETOOTH], 0);
    apply_ok(&p, PH_ACT_BACK, NULL);
    assert_int_equal(p.screen, PH_SCR_SETTINGS);
    apply_ok(&p, PH_ACT_BACK, NULL);
    assert_int_equal(p.screen, PH_SCR_HOME);
    /* the alarm editor refuses 24:00, takes 7:05 */
    apply_ok(&p, PH_ACT_TAP, "app_clock");
    apply_ok(&p, PH_ACT_TAP, "add_alarm");
    apply_ok(&p, PH_ACT_TAP, "hour");
    apply_ok(&p, PH_ACT_TYPE, "24");
    apply_ok(&p, PH_ACT_TAP, "save");
    assert_int_equal(p.screen, PH_SCR_ALARM_EDIT);
    ph_render(&p, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "status TextView \"Enter an hour 0-23 and a minute 0-59\"\n"));
    apply_ok(&p, PH_ACT_TYPE, "7");
    apply_ok(&p, PH_ACT_TAP, "minute");
    apply_ok(&p, PH_ACT_TYPE, "05");
    apply_ok(&p, PH_ACT_TAP, "save");
    assert_int_equal(p.screen, PH_SCR_CLOCK);
    assert_int_equal(p.st.n_alarms, 1);
    assert_int_equal(p.st.alarms[0].hour, 7);
    assert_int_equal(p.st.alarms[0].minute, 5);
    assert_int_equal(p.st.alarms[0].on, 1);
    ph_render(&p, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "\nalarm_0 Switch \"07:05\" on *\n"));
    /* messages: an unknown recipient is refused on screen; a known one is sent, deleted */
    apply_ok(&p, PH_ACT_HOME, NULL);
    apply_ok(&p, PH_ACT_TAP, "app_messages");
    apply_ok(&p, PH_ACT_TAP, "new_message");
    apply_ok(&p, PH_ACT_TAP, "to");
    apply_ok(&p, PH_ACT_TYPE, "Zoe");
    apply_ok(&p, PH_ACT_TAP, "message");
    apply_ok(&p, PH_ACT_TYPE, "hello");
    apply_ok(&p, PH_ACT_TAP, "send");
    assert_string_equal(p.status, "No contact named 'Zoe'");
    apply_ok(&p, PH_ACT_TAP, "to");
    apply_ok(&p, PH_ACT_TYPE, " carla ");
    apply_ok(&p, PH_ACT_TAP, "send");
    assert_int_equal(p.screen, PH_SCR_MESSAGES);
    assert_int_equal(p.st.n_sent, 1);
    assert_int_equal(p.st.sent[0].contact, 2);
    ph_render(&p, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "\nmsg_0 TextView \"To Carla: hello\"\n"));
    apply_ok(&p, PH_ACT_TAP, "delete_0");
    assert_int_equal(p.st.n_sent, 0);
    /* contacts scroll five at a time and stop at the ends */
    apply_ok(&p, PH_ACT_HOME, NULL);
    apply_ok(&p, PH_ACT_TAP, "app_contacts");
    apply_ok(&p, PH_ACT_SCROLL, "up");
    assert_int_equal(p.scroll, 0);
    apply_ok(&p, PH_ACT_SCROLL, "down");
    apply_ok(&p, PH_ACT_SCROLL, "down");
    assert_int_equal(p.scroll, 5);
    struct ph_screen_view v;
    ph_view(&p, &v);
    assert_int_equal(v.n_nodes, 1 + PH_PAGE + 1); /* title, five, "more above" */
    assert_string_equal(v.nodes[6].text, "More above: scroll up");
    /* a full outbox: every message and its delete button are on the screen */
    struct ph_state full = {0};
    full.n_sent = PH_MAX_SENT;
    for (int i = 0; i < PH_MAX_SENT; i++) full.sent[i] = (struct ph_sent){.contact = i, .text = "hi"};
    struct nb_phone q;
    ph_init(&q, &full, 1);
    apply_ok(&q, PH_ACT_TAP, "app_messages");
    ph_view(&q, &v);
    assert_int_equal(v.n_nodes, 2 + 2 * PH_MAX_SENT);
    apply_ok(&q, PH_ACT_TAP, "delete_7");
    assert_int_equal(q.st.n_sent, 7);
    /* invalid actions leave the phone as it was */
    struct nb_phone before = p;
    struct ph_action a = {.kind = PH_ACT_TAP};
    snprintf(a.arg, sizeof a.arg, "wifi");
    assert_int_equal(ph_apply(&p, &a), NB_ERR_INVALID_ARG);
    a.kind = PH_ACT_TYPE;
    assert_int_equal(ph_apply(&p, &a), NB_ERR_INVALID_ARG);
    assert_memory_equal(&before, &p, sizeof p);
}

/* ---------------------------------------------------------------- parser errors */

static void expect_error(const char *json, const char *msg)
{
    struct nb_agent_tasks *t = (struct nb_agent_tasks *)1;
    assert_int_equal(nb_agent_tasks_parse(&t, json, strlen(json), "t.json"), NB_ERR_FORMAT);
    assert_null(t);
    if (!strstr(nb_last_error(), msg)) fail_msg("'%s' does not say '%s'", nb_last_error(), msg);
}

#define TASK(body) "{\"tasks\":[{\"id\":\"x\",\"app\":\"settings\",\"instructions\":[\"Do it.\"]," body "}]}"

static void test_parse_errors(void **state)
{
    struct nb_agent_tasks *t = NULL;
    const char *ok = TASK("\"success\":[{\"toggle\":\"wifi\",\"is\":true}]");
    assert_int_equal(nb_agent_tasks_parse(&t, ok, strlen(ok), "t.json"), NB_OK);
    assert_int_equal(nb_agent_tasks_count(t), 1);
    nb_agent_tasks_free(t);
    expect_error("[]", "t.json: a task file is an object");
    expect_error("{\"tasks\":[]}", "\"tasks\" must be an array of 1 to");
    expect_error("{\"tasks\":[", "t.json:1:");
    expect_error(TASK("\"success\":[{\"toggle\":\"wifi\",\"is\":false}]"),
                 "task 'x': the success predicate already holds at the start");
    expect_error(TASK("\"success\":[{\"toggle\":\"nfc\",\"is\":true}]"), "\"toggle\" must name");
    expect_error(TASK("\"success\":[{\"toggle\":\"wifi\",\"is\":1}]"), "\"is\" must be true or false");
    expect_error(TASK("\"success\":[{\"alarm\":\"24:00\",\"on\":true}]"), "\"alarm\" must be a time");
    expect_error(TASK("\"success\":[{\"alarm\":\"7:30\",\"on\":false}]"),
                 "the success predicate cannot be reached");
    expect_error(TASK("\"success\":[{\"sent_to\":\"Zoe\",\"text\":\"hi\"}]"), "\"sent_to\" names an unknown contact");
    expect_error(TASK("\"success\":[{\"favorite\":\"Anna\",\"is\":true}],\"start\":{\"volume\":3}"),
                 "unknown key \"start.volume\"");
    expect_error(TASK("\"success\":[{\"favorite\":\"Anna\",\"is\":true}],\"extra\":1"), "unknown key \"extra\"");
    expect_error(TASK("\"success\":[{\"favorite\":\"Anna\",\"is\":true}],\"max_steps\":0"),
                 "\"max_steps\" must be 1 to 100");
    expect_error(TASK("\"success\":[]"), "\"success\" must be an array of 1 to 4");
    expect_error("{\"tasks\":[{\"id\":\"x\",\"app\":\"phone\",\"instructions\":[\"a\"],\"success\":[{\"toggle\":\"wifi\",\"is\":true}]}]}",
                 "\"app\" must name an app");
    expect_error("{\"tasks\":[{\"id\":\"x\",\"app\":\"clock\",\"instructions\":[\"a\"],\"success\":[{\"toggle\":\"wifi\",\"is\":true}]},"
                 "{\"id\":\"x\",\"app\":\"clock\",\"instructions\":[\"a\"],\"success\":[{\"toggle\":\"wifi\",\"is\":true}]}]}",
                 "task 'x': listed twice");
}

/* A task of four clauses in four apps: the correct policy does them in turn. */
static void test_multi_clause(void **state)
{
    const char *json =
        "{\"tasks\":[{\"id\":\"multi\",\"app\":\"settings\",\"instructions\":[\"All of it.\"],"
        "\"start\":{\"favorites\":[\"Iris\"],\"alarms\":[{\"time\":\"23:59\",\"on\":false}],\"wifi\":true},"
        "\"success\":[{\"favorite\":\"Iris\",\"is\":false},{\"alarm\":\"23:59\",\"on\":true},"
        "{\"sent_to\":\"Hugo\",\"text\":\" Hi \"},{\"toggle\":\"wifi\",\"is\":false}],\"max_steps\":100}]}";
    struct nb_agent_tasks *t = NULL;
    if (nb_agent_tasks_parse(&t, json, strlen(json), "multi") != NB_OK) fail_msg("%s", nb_last_error());
    for (uint64_t seed = 0; seed < 20; seed++) {
        int steps = 0;
        assert_int_equal(run_policy(t, 0, seed, NB_AGENT_POLICY_CORRECT, &steps), NB_AGENT_DONE);
        assert_true(steps == 19 || steps == 20); /* 19, and one scroll when Iris is on page 2 */
        assert_int_equal(run_policy(t, 0, seed, NB_AGENT_POLICY_REVERSE, NULL), NB_AGENT_DONE_REVERSED);
    }
    nb_agent_tasks_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_file),   cmocka_unit_test(test_policies_file),
        cmocka_unit_test(test_generated),   cmocka_unit_test(test_outcomes_by_hand),
        cmocka_unit_test(test_screens),     cmocka_unit_test(test_phone),
        cmocka_unit_test(test_parse_errors), cmocka_unit_test(test_multi_clause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
