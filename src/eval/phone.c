/* eval/phone.c — the simulated phone (see phone.h). */
#include "eval/phone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

/* ---------------------------------------------------------------- names */

const char *const ph_contact_name[PH_N_CONTACTS] = {"Anna", "Ben",  "Carla", "David", "Emma",
                                                    "Farid", "Grace", "Hugo", "Iris", "Jonas"};
const char *const ph_toggle_name[PH_N_TOGGLES] = {"wifi", "bluetooth", "airplane",
                                                  "dark_theme", "dnd", "location"};
const char *const ph_app_name[PH_N_APPS] = {"home",     "settings", "clock", "messages",
                                            "contacts", "camera",   "calendar"};
static const char *const k_app_label[PH_N_APPS] = {"Home",     "Settings", "Clock", "Messages",
                                                   "Contacts", "Camera",   "Calendar"};
static const char *const k_screen_name[PH_N_SCREENS] = {
    "home",  "settings",   "network",  "bluetooth", "display", "sound",  "location", "clock",
    "alarm", "messages",   "compose",  "contacts",  "contact", "camera", "calendar"};
static const char *const k_screen_title[PH_N_SCREENS] = {
    "Home",   "Settings",  "Network & internet", "Bluetooth",    "Display",
    "Sound",  "Location",  "Alarms",             "New alarm",    "Messages",
    "New message", "Contacts", "Contact",        "Camera",       "Calendar"};
/* the switch of each toggle: its id, label and screen */
static const char *const k_toggle_label[PH_N_TOGGLES] = {"Wi-Fi", "Bluetooth", "Airplane mode",
                                                         "Dark theme", "Do not disturb",
                                                         "Use location"};
static const enum ph_screen k_toggle_screen[PH_N_TOGGLES] = {
    PH_SCR_NETWORK, PH_SCR_BLUETOOTH, PH_SCR_NETWORK, PH_SCR_DISPLAY, PH_SCR_SOUND, PH_SCR_LOCATION};
/* the Settings entries, in screen order PH_SCR_NETWORK .. PH_SCR_LOCATION */
static const char *const k_settings_id[5] = {"settings_network", "settings_bluetooth",
                                             "settings_display", "settings_sound",
                                             "settings_location"};

enum { PH_F_A = 0, PH_F_B = 1 }; /* alarm: hour, minute; compose: to, message */

static int find_name(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (name && !strcasecmp(names[i], name)) return i;
    return -1;
}
int ph_contact_find(const char *name) { return find_name(ph_contact_name, PH_N_CONTACTS, name); }
int ph_toggle_find(const char *name) { return find_name(ph_toggle_name, PH_N_TOGGLES, name); }
int ph_app_find(const char *name) { return find_name(ph_app_name, PH_N_APPS, name); }

uint64_t ph_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fisher-Yates over a[0..n). */
static void shuffle(uint8_t *a, int n, uint64_t *rng)
{
    for (int i = 0; i < n; i++) a[i] = (uint8_t)i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(ph_rand(rng) % (uint64_t)(i + 1));
        uint8_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void ph_init(struct nb_phone *p, const struct ph_state *st, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->st = *st;
    p->screen = PH_SCR_HOME;
    p->contact = -1;
    p->focus = -1;
    uint64_t rng = seed ^ 0x70686f6e65ull; /* "phone" */
    for (int s = 0; s < PH_N_SCREENS; s++) shuffle(p->order[s], PH_MAX_NODES, &rng);
    shuffle(p->contact_order, PH_N_CONTACTS, &rng);
}

enum ph_screen ph_toggle_screen(enum ph_toggle t) { return k_toggle_screen[t]; }

enum ph_screen ph_app_screen(enum ph_app a)
{
    static const enum ph_screen first[PH_N_APPS] = {PH_SCR_HOME,     PH_SCR_SETTINGS, PH_SCR_CLOCK,
                                                    PH_SCR_MESSAGES, PH_SCR_CONTACTS, PH_SCR_CAMERA,
                                                    PH_SCR_CALENDAR};
    return first[a];
}

enum ph_app ph_screen_app(enum ph_screen s)
{
    switch (s) {
    case PH_SCR_HOME: return PH_APP_HOME;
    case PH_SCR_SETTINGS:
    case PH_SCR_NETWORK:
    case PH_SCR_BLUETOOTH:
    case PH_SCR_DISPLAY:
    case PH_SCR_SOUND:
    case PH_SCR_LOCATION: return PH_APP_SETTINGS;
    case PH_SCR_CLOCK:
    case PH_SCR_ALARM_EDIT: return PH_APP_CLOCK;
    case PH_SCR_MESSAGES:
    case PH_SCR_COMPOSE: return PH_APP_MESSAGES;
    case PH_SCR_CONTACTS:
    case PH_SCR_CONTACT: return PH_APP_CONTACTS;
    case PH_SCR_CAMERA: return PH_APP_CAMERA;
    case PH_SCR_CALENDAR: return PH_APP_CALENDAR;
    case PH_N_SCREENS: break;
    }
    return PH_APP_HOME;
}

/* ---------------------------------------------------------------- screens */

static struct ph_node *add(struct ph_screen_view *v, const char *id, const char *cls,
                           const char *text, int clickable)
{
    if (v->n_nodes >= PH_MAX_NODES) return NULL; /* cannot happen: screens are small */
    struct ph_node *n = &v->nodes[v->n_nodes++];
    memset(n, 0, sizeof *n);
    snprintf(n->id, sizeof n->id, "%s", id);
    n->cls = cls;
    snprintf(n->text, sizeof n->text, "%s", text);
    n->clickable = clickable;
    return n;
}

static void add_switch(struct ph_screen_view *v, const char *id, const char *text, int on)
{
    struct ph_node *n = add(v, id, "Switch", text, 1);
    if (n) n->checkable = 1, n->checked = on;
}

static void lower_id(char *dst, size_t cap, const char *prefix, const char *name)
{
    size_t k = (size_t)snprintf(dst, cap, "%s", prefix);
    for (; *name && k + 1 < cap; name++) dst[k++] = (char)(*name | 0x20);
    dst[k < cap ? k : cap - 1] = '\0';
}

/* The body nodes of a screen (after the title), in their unshuffled order. */
static void body(const struct nb_phone *p, struct ph_screen_view *v)
{
    char id[PH_ID], text[160];
    const struct ph_state *st = &p->st;
    switch (p->screen) {
    case PH_SCR_HOME:
        for (int a = 1; a < PH_N_APPS; a++) {
            snprintf(id, sizeof id, "app_%s", ph_app_name[a]);
            add(v, id, "Button", k_app_label[a], 1);
        }
        break;
    case PH_SCR_SETTINGS:
        for (int i = 0; i < 5; i++)
            add(v, k_settings_id[i], "Button", k_screen_title[PH_SCR_NETWORK + i], 1);
        break;
    case PH_SCR_NETWORK:
    case PH_SCR_BLUETOOTH:
    case PH_SCR_DISPLAY:
    case PH_SCR_SOUND:
    case PH_SCR_LOCATION:
        for (int t = 0; t < PH_N_TOGGLES; t++)
            if (k_toggle_screen[t] == p->screen)
                add_switch(v, ph_toggle_name[t], k_toggle_label[t], st->toggle[t]);
        break;
    case PH_SCR_CLOCK:
        for (int i = 0; i < st->n_alarms; i++) {
            snprintf(id, sizeof id, "alarm_%d", i);
            snprintf(text, sizeof text, "%02d:%02d", st->alarms[i].hour, st->alarms[i].minute);
            add_switch(v, id, text, st->alarms[i].on);
        }
        add(v, "add_alarm", "Button", "Add alarm", 1);
        break;
    case PH_SCR_ALARM_EDIT:
        add(v, "hour", "EditText", p->field[PH_F_A], 1);
        add(v, "minute", "EditText", p->field[PH_F_B], 1);
        add(v, "save", "Button", "Save", 1);
        add(v, "cancel", "Button", "Cancel", 1);
        break;
    case PH_SCR_MESSAGES:
        add(v, "new_message", "Button", "New message", 1);
        for (int i = 0; i < st->n_sent; i++) {
            snprintf(id, sizeof id, "msg_%d", i);
            snprintf(text, sizeof text, "To %s: %s", ph_contact_name[st->sent[i].contact],
                     st->sent[i].text);
            add(v, id, "TextView", text, 0);
            snprintf(id, sizeof id, "delete_%d", i);
            snprintf(text, sizeof text, "Delete message to %s",
                     ph_contact_name[st->sent[i].contact]);
            add(v, id, "Button", text, 1);
        }
        break;
    case PH_SCR_COMPOSE:
        add(v, "to", "EditText", p->field[PH_F_A], 1);
        add(v, "message", "EditText", p->field[PH_F_B], 1);
        add(v, "send", "Button", "Send", 1);
        break;
    case PH_SCR_CONTACTS:
        for (int i = p->scroll; i < p->scroll + PH_PAGE && i < PH_N_CONTACTS; i++) {
            const char *name = ph_contact_name[p->contact_order[i]];
            lower_id(id, sizeof id, "contact_", name);
            add(v, id, "Button", name, 1);
        }
        break;
    case PH_SCR_CONTACT:
        add(v, "name", "TextView", ph_contact_name[p->contact], 0);
        snprintf(text, sizeof text, "+1 555 01%02d", p->contact);
        add(v, "phone", "TextView", text, 0);
        add_switch(v, "favorite", "Favourite", st->favorite[p->contact]);
        add(v, "message_contact", "Button", "Message", 1);
        break;
    case PH_SCR_CAMERA: add(v, "shutter", "Button", "Take photo", 1); break;
    case PH_SCR_CALENDAR: add(v, "events", "TextView", "No events today", 0); break;
    case PH_N_SCREENS: break;
    }
}

void ph_view(const struct nb_phone *p, struct ph_screen_view *v)
{
    struct ph_screen_view b = {0};
    body(p, &b);
    memset(v, 0, sizeof *v);
    v->screen = p->screen;
    v->app = ph_screen_app(p->screen);
    add(v, "title", "TextView",
        p->screen == PH_SCR_CONTACT ? ph_contact_name[p->contact] : k_screen_title[p->screen], 0);
    if (p->screen == PH_SCR_CONTACTS) { /* the list keeps its (seeded) order */
        for (int i = 0; i < b.n_nodes; i++) v->nodes[v->n_nodes++] = b.nodes[i];
        if (p->scroll + PH_PAGE < PH_N_CONTACTS)
            add(v, "more", "TextView", "More below: scroll down", 0);
        else if (p->scroll > 0)
            add(v, "more", "TextView", "More above: scroll up", 0);
    } else {
        for (int k = 0; k < PH_MAX_NODES; k++)
            if (p->order[p->screen][k] < b.n_nodes)
                v->nodes[v->n_nodes++] = b.nodes[p->order[p->screen][k]];
    }
    if (p->status[0]) add(v, "status", "TextView", p->status, 0);
}

/* ---------------------------------------------------------------- rendering */

struct sbuf {
    char *buf;
    size_t cap, len;
};

static void put(struct sbuf *b, const char *fmt, const char *s1, const char *s2)
{
    int n = snprintf(b->len < b->cap ? b->buf + b->len : NULL,
                     b->len < b->cap ? b->cap - b->len : 0, fmt, s1, s2);
    if (n > 0) b->len += (size_t)n;
}

size_t ph_render(const struct nb_phone *p, int json, char *buf, size_t cap)
{
    struct ph_screen_view v;
    ph_view(p, &v);
    if (cap) buf[0] = '\0';
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "app", ph_app_name[v.app]);
        cJSON_AddStringToObject(o, "screen", k_screen_name[v.screen]);
        cJSON *arr = cJSON_AddArrayToObject(o, "nodes");
        for (int i = 0; i < v.n_nodes; i++) {
            const struct ph_node *n = &v.nodes[i];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "id", n->id);
            cJSON_AddStringToObject(e, "class", n->cls);
            cJSON_AddStringToObject(e, "text", n->text);
            cJSON_AddBoolToObject(e, "clickable", n->clickable);
            if (n->checkable) cJSON_AddBoolToObject(e, "checked", n->checked);
            cJSON_AddItemToArray(arr, e);
        }
        char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        size_t len = s ? strlen(s) : 0;
        if (s && cap) snprintf(buf, cap, "%s", s);
        free(s);
        return len;
    }
    struct sbuf b = {buf, cap, 0};
    put(&b, "[%s > %s]\n", ph_app_name[v.app], k_screen_name[v.screen]);
    for (int i = 0; i < v.n_nodes; i++) {
        const struct ph_node *n = &v.nodes[i];
        put(&b, "%s %s ", n->id, n->cls);
        put(&b, "\"%s\"%s", n->text, n->checkable ? (n->checked ? " on" : " off") : "");
        put(&b, "%s\n%s", n->clickable ? " *" : "", "");
    }
    return b.len;
}

/* ---------------------------------------------------------------- actions */

static void go(struct nb_phone *p, enum ph_screen s)
{
    if (p->n_back == PH_BACK_DEPTH) {
        memmove(p->back, p->back + 1, (PH_BACK_DEPTH - 1) * sizeof p->back[0]);
        p->n_back--;
    }
    p->back[p->n_back++] = p->screen;
    p->screen = s;
    p->focus = -1;
    p->status[0] = '\0';
    if (s == PH_SCR_CONTACTS) p->scroll = 0;
}

static void leave(struct nb_phone *p, enum ph_screen s)
{
    p->screen = s;
    p->focus = -1;
    p->status[0] = '\0';
}

/* "7", " 07" -> 7; -1 unless 1..2 digits in [0, max] (spaces around allowed) */
static int parse_small(const char *s, int max)
{
    while (*s == ' ') s++;
    int v = 0, n = 0;
    for (; *s >= '0' && *s <= '9'; s++, n++) v = v * 10 + (*s - '0');
    while (*s == ' ') s++;
    if (*s || n < 1 || n > 2 || v > max) return -1;
    return v;
}

static void trim_copy(char *dst, size_t cap, const char *s)
{
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ') n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static enum nb_status tap(struct nb_phone *p, const char *id)
{
    struct ph_screen_view v;
    ph_view(p, &v);
    int found = 0;
    for (int i = 0; i < v.n_nodes; i++)
        if (!strcmp(v.nodes[i].id, id)) {
            if (!v.nodes[i].clickable)
                return nb_set_error(NB_ERR_INVALID_ARG, "tap: '%s' is not clickable", id);
            found = 1;
        }
    if (!found) return nb_set_error(NB_ERR_INVALID_ARG, "tap: no node '%s' on this screen", id);
    struct ph_state *st = &p->st;
    int t = ph_toggle_find(id), k;
    if (t >= 0 && k_toggle_screen[t] == p->screen) {
        st->toggle[t] = !st->toggle[t];
        return NB_OK;
    }
    switch (p->screen) {
    case PH_SCR_HOME:
        go(p, ph_app_screen((enum ph_app)ph_app_find(id + 4))); /* app_NAME */
        return NB_OK;
    case PH_SCR_SETTINGS:
        for (int i = 0; i < 5; i++)
            if (!strcmp(id, k_settings_id[i])) go(p, (enum ph_screen)(PH_SCR_NETWORK + i));
        return NB_OK;
    case PH_SCR_CLOCK:
        if (!strcmp(id, "add_alarm")) {
            if (st->n_alarms == PH_MAX_ALARMS) {
                snprintf(p->status, sizeof p->status, "No room for another alarm");
                return NB_OK;
            }
            go(p, PH_SCR_ALARM_EDIT);
            p->field[PH_F_A][0] = p->field[PH_F_B][0] = '\0';
        } else {
            k = atoi(id + 6); /* alarm_K: on the screen, so in range */
            st->alarms[k].on = !st->alarms[k].on;
        }
        return NB_OK;
    case PH_SCR_ALARM_EDIT:
        if (!strcmp(id, "hour")) p->focus = PH_F_A;
        else if (!strcmp(id, "minute")) p->focus = PH_F_B;
        else if (!strcmp(id, "cancel")) leave(p, p->n_back ? p->back[--p->n_back] : PH_SCR_CLOCK);
        else { /* save */
            int h = parse_small(p->field[PH_F_A], 23), m = parse_small(p->field[PH_F_B], 59);
            if (h < 0 || m < 0) {
                snprintf(p->status, sizeof p->status, "Enter an hour 0-23 and a minute 0-59");
                return NB_OK;
            }
            st->alarms[st->n_alarms++] = (struct ph_alarm){h, m, 1};
            leave(p, p->n_back ? p->back[--p->n_back] : PH_SCR_CLOCK);
        }
        return NB_OK;
    case PH_SCR_MESSAGES:
        if (!strcmp(id, "new_message")) {
            go(p, PH_SCR_COMPOSE);
            p->field[PH_F_A][0] = p->field[PH_F_B][0] = '\0';
        } else { /* delete_K */
            k = atoi(id + 7);
            memmove(&st->sent[k], &st->sent[k + 1], (size_t)(st->n_sent - k - 1) * sizeof st->sent[0]);
            st->n_sent--;
        }
        return NB_OK;
    case PH_SCR_COMPOSE:
        if (!strcmp(id, "to")) p->focus = PH_F_A;
        else if (!strcmp(id, "message")) p->focus = PH_F_B;
        else { /* send */
            char to[PH_TEXT], text[PH_TEXT];
            trim_copy(to, sizeof to, p->field[PH_F_A]);
            trim_copy(text, sizeof text, p->field[PH_F_B]);
            int c = ph_contact_find(to);
            if (c < 0) snprintf(p->status, sizeof p->status, "No contact named '%s'", to); /* whole: UTF-8 */
            else if (!text[0]) snprintf(p->status, sizeof p->status, "Type a message first");
            else if (st->n_sent == PH_MAX_SENT) snprintf(p->status, sizeof p->status, "Outbox full");
            else {
                st->sent[st->n_sent].contact = c;
                memcpy(st->sent[st->n_sent].text, text, sizeof text);
                st->n_sent++;
                p->n_back = 1;
                p->back[0] = PH_SCR_HOME;
                leave(p, PH_SCR_MESSAGES);
            }
        }
        return NB_OK;
    case PH_SCR_CONTACTS:
        for (int i = 0; i < PH_N_CONTACTS; i++) {
            char cid[PH_ID];
            lower_id(cid, sizeof cid, "contact_", ph_contact_name[i]);
            if (!strcmp(cid, id)) {
                go(p, PH_SCR_CONTACT);
                p->contact = i;
            }
        }
        return NB_OK;
    case PH_SCR_CONTACT:
        if (!strcmp(id, "favorite")) st->favorite[p->contact] = !st->favorite[p->contact];
        else { /* message_contact */
            int c = p->contact;
            go(p, PH_SCR_COMPOSE);
            snprintf(p->field[PH_F_A], PH_TEXT, "%s", ph_contact_name[c]);
            p->field[PH_F_B][0] = '\0';
        }
        return NB_OK;
    case PH_SCR_CAMERA: snprintf(p->status, sizeof p->status, "Photo taken"); return NB_OK;
    default: break;
    }
    return nb_set_error(NB_ERR_INTERNAL, "tap: '%s' has no handler", id);
}

enum nb_status ph_apply(struct nb_phone *p, const struct ph_action *a)
{
    switch (a->kind) {
    case PH_ACT_TAP: return tap(p, a->arg);
    case PH_ACT_TYPE:
        if (p->focus < 0)
            return nb_set_error(NB_ERR_INVALID_ARG, "type: no text field is focused (tap one first)");
        if (strlen(a->arg) >= PH_TEXT)
            return nb_set_error(NB_ERR_INVALID_ARG, "type: text longer than %d bytes", PH_TEXT - 1);
        snprintf(p->field[p->focus], PH_TEXT, "%s", a->arg);
        return NB_OK;
    case PH_ACT_BACK:
        if (p->n_back) leave(p, p->back[--p->n_back]);
        return NB_OK;
    case PH_ACT_HOME:
        p->n_back = 0;
        leave(p, PH_SCR_HOME);
        return NB_OK;
    case PH_ACT_SCROLL:
        if (strcmp(a->arg, "up") && strcmp(a->arg, "down"))
            return nb_set_error(NB_ERR_INVALID_ARG, "scroll: direction '%s' (up or down)", a->arg);
        if (p->screen == PH_SCR_CONTACTS) {
            p->scroll += a->arg[0] == 'd' ? PH_PAGE : -PH_PAGE;
            if (p->scroll > PH_N_CONTACTS - PH_PAGE) p->scroll = PH_N_CONTACTS - PH_PAGE;
            if (p->scroll < 0) p->scroll = 0;
        }
        return NB_OK;
    case PH_ACT_COMPLETE: return NB_OK;
    }
    return nb_set_error(NB_ERR_INVALID_ARG, "unknown action");
}
