/* eval/phone.h — a simulated phone for agent tasks (issue 18): deterministic, seeded,
 * no I/O.
 *
 * Apps: Home (the launcher), Settings (Network: Wi-Fi, Airplane mode; Bluetooth;
 * Display: Dark theme; Sound: Do not disturb; Location), Clock (alarms, and an alarm
 * editor with hour and minute fields), Messages (sent messages, each deletable; a
 * composer with To and Message fields), Contacts (a list of 10 that scrolls five at a
 * time; a contact's page with a Favourite switch and a Message button), and two apps
 * that do nothing for any task (Camera, Calendar).
 *
 * A screen is an accessibility tree flattened to a list of nodes (id, class, text,
 * clickable, checkable/checked). The ids are the same for every seed; the order of the
 * nodes of every screen (home icons, settings entries, switches, contacts) is a
 * permutation drawn from the seed, so a policy cannot learn positions.
 *
 * Actions: tap(id) of a clickable node on the screen, type(text) into the field last
 * tapped, back, home, scroll(up|down), task_complete. An action that names a node not on
 * the screen, types with no field focused or scrolls another way is invalid (the phone
 * does not change).
 */
#ifndef NB_EVAL_PHONE_H
#define NB_EVAL_PHONE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum ph_toggle { PH_WIFI, PH_BLUETOOTH, PH_AIRPLANE, PH_DARK, PH_DND, PH_LOCATION, PH_N_TOGGLES };

enum ph_app { PH_APP_HOME, PH_APP_SETTINGS, PH_APP_CLOCK, PH_APP_MESSAGES, PH_APP_CONTACTS,
              PH_APP_CAMERA, PH_APP_CALENDAR, PH_N_APPS };

enum ph_screen {
    PH_SCR_HOME,
    PH_SCR_SETTINGS,
    PH_SCR_NETWORK,
    PH_SCR_BLUETOOTH,
    PH_SCR_DISPLAY,
    PH_SCR_SOUND,
    PH_SCR_LOCATION,
    PH_SCR_CLOCK,
    PH_SCR_ALARM_EDIT,
    PH_SCR_MESSAGES,
    PH_SCR_COMPOSE,
    PH_SCR_CONTACTS,
    PH_SCR_CONTACT,
    PH_SCR_CAMERA,
    PH_SCR_CALENDAR,
    PH_N_SCREENS
};

enum ph_action_kind { PH_ACT_TAP, PH_ACT_TYPE, PH_ACT_BACK, PH_ACT_HOME, PH_ACT_SCROLL,
                      PH_ACT_COMPLETE };

#define PH_N_CONTACTS  10
#define PH_PAGE        5  /* contacts shown at once */
#define PH_MAX_ALARMS  8
#define PH_MAX_SENT    8
#define PH_TEXT        64 /* bytes of a field or a message, NUL included */
#define PH_ID          32
#define PH_MAX_NODES   24 /* Messages: title, New, 8 x (message, delete), status */
#define PH_BACK_DEPTH  8

struct ph_action {
    enum ph_action_kind kind;
    char arg[PH_TEXT]; /* tap: the id; type: the text; scroll: "up" / "down" */
};

struct ph_alarm {
    int hour, minute, on;
};
struct ph_sent {
    int contact; /* index into ph_contact_name */
    char text[PH_TEXT];
};

/* What tasks are judged on. */
struct ph_state {
    int toggle[PH_N_TOGGLES];
    int n_alarms;
    struct ph_alarm alarms[PH_MAX_ALARMS];
    int n_sent;
    struct ph_sent sent[PH_MAX_SENT];
    int favorite[PH_N_CONTACTS];
};

struct ph_node {
    char id[PH_ID];
    const char *cls; /* "TextView", "Button", "Switch", "EditText" */
    char text[160];  /* a status line quotes a typed field whole */
    int clickable;
    int checkable, checked;
};

struct ph_screen_view {
    enum ph_screen screen;
    enum ph_app app;
    int n_nodes;
    struct ph_node nodes[PH_MAX_NODES];
};

struct nb_phone {
    struct ph_state st;
    enum ph_screen screen;
    int n_back;
    enum ph_screen back[PH_BACK_DEPTH]; /* screens `back` returns to */
    int scroll;                         /* first contact shown on the Contacts list */
    int contact;                        /* the contact page shown (-1 none) */
    int focus;                          /* the focused field (PH_F_*), -1 none */
    char field[3][PH_TEXT];             /* alarm hour, alarm minute / to, message */
    char status[128];                   /* a one-line notice shown on the screen ("") */
    uint8_t order[PH_N_SCREENS][PH_MAX_NODES]; /* node permutation per screen */
    uint8_t contact_order[PH_N_CONTACTS];      /* the Contacts list's order */
};

/* Names the tasks use. */
extern const char *const ph_contact_name[PH_N_CONTACTS];
extern const char *const ph_toggle_name[PH_N_TOGGLES]; /* "wifi", "bluetooth", ... */
extern const char *const ph_app_name[PH_N_APPS];       /* "home", "settings", ... */
/* Index of a name (case-insensitive), -1 if unknown. */
int ph_contact_find(const char *name);
int ph_toggle_find(const char *name);
int ph_app_find(const char *name);

/* A phone in state `st` on the home screen, its screen orders drawn from `seed`. */
void ph_init(struct nb_phone *p, const struct ph_state *st, uint64_t seed);
/* The screen that holds a toggle's switch. */
enum ph_screen ph_toggle_screen(enum ph_toggle t);
/* The first screen of an app. */
enum ph_screen ph_app_screen(enum ph_app a);
/* The app a screen belongs to. */
enum ph_app ph_screen_app(enum ph_screen s);
/* The screen as nodes. */
void ph_view(const struct nb_phone *p, struct ph_screen_view *v);
/* The screen as compact text (one line per node: `id Class "text" [on|off] *` where *
 * marks a clickable node) or, json != 0, as a JSON object {app, screen, nodes: [{id,
 * class, text, clickable, checked?}]}. Returns the bytes it needed (as snprintf); the
 * text is cut to cap. */
size_t ph_render(const struct nb_phone *p, int json, char *buf, size_t cap);
/* Apply an action. NB_OK when it was valid (task_complete changes nothing); else
 * NB_ERR_INVALID_ARG with a message naming why, and the phone is unchanged. */
enum nb_status ph_apply(struct nb_phone *p, const struct ph_action *a);

/* splitmix64: the phone's and the tasks' one random source. */
uint64_t ph_rand(uint64_t *s);

#endif
