/* app/chat_input.c — nibble chat's input: lines (libedit at a terminal), messages over
 * several lines, Ctrl-C (chat_input.h). */
#include "app/chat_input.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef NIBBLE_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "app/env.h"

#define HISTORY_MAX 1000 /* lines kept in the history file */

static volatile sig_atomic_t g_sigint; /* Ctrl-C since the current read began */

static void on_sigint(int sig)
{
    (void)sig;
    g_sigint = 1;
}

int chat_input_interrupted(void) { return g_sigint != 0; }

void chat_input_open(struct chat_input *in)
{
    memset(in, 0, sizeof *in);
    in->tty = isatty(0);
    if (!in->tty) return;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a read at the prompt returns */
#ifdef NIBBLE_HAVE_LIBEDIT
    in->editing = 1;
    stifle_history(HISTORY_MAX);
    if (app_env_chat_history(in->history, sizeof in->history)) read_history(in->history);
#endif
}

void chat_input_close(struct chat_input *in)
{
#ifdef NIBBLE_HAVE_LIBEDIT
    if (in->editing && in->history[0] && write_history(in->history) != 0)
        fprintf(stderr, "nibble chat: the history was not written to %s\n", in->history);
#endif
    if (in->tty) signal(SIGINT, SIG_DFL);
    free(in->line);
    free(in->msg);
    in->line = in->msg = NULL;
}

/* One line, without its newline, into *out: 1; 0 at the end of input; -1 when Ctrl-C came. */
static int read_line(struct chat_input *in, const char *prompt, char **out)
{
#ifdef NIBBLE_HAVE_LIBEDIT
    if (in->editing) {
        free(in->line);
        in->line = readline(prompt); /* NULL at the end of input, or on Ctrl-C (EINTR) */
        if (!in->line) return g_sigint ? -1 : 0;
        if (in->line[0]) add_history(in->line);
        *out = in->line;
        return 1;
    }
#endif
    if (in->tty) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    ssize_t got = getline(&in->line, &in->line_cap, stdin);
    if (got < 0) {
        clearerr(stdin);
        return g_sigint ? -1 : 0;
    }
    while (got > 0 && (in->line[got - 1] == '\n' || in->line[got - 1] == '\r'))
        in->line[--got] = '\0';
    *out = in->line;
    return 1;
}

/* One more line of the message (after a newline unless it is the first): 0 out of memory. */
static int add_piece(struct chat_input *in, int *n_pieces, const char *s, size_t n)
{
    size_t sep = *n_pieces > 0;
    if (in->len + sep + n + 1 > in->cap) {
        size_t cap = (in->len + sep + n + 1) * 2;
        char *m = realloc(in->msg, cap);
        if (!m) return 0;
        in->msg = m;
        in->cap = cap;
    }
    if (sep) in->msg[in->len++] = '\n';
    memcpy(in->msg + in->len, s, n);
    in->len += n;
    in->msg[in->len] = '\0';
    (*n_pieces)++;
    return 1;
}

static int ends_quotes(const char *s, size_t n) { return n >= 3 && !strcmp(s + n - 3, "\"\"\""); }

enum chat_in chat_input_read(struct chat_input *in)
{
    int in_block = 0, more = 0, n_pieces = 0, ctrl_c = 0, ok = 1;
    in->len = 0;
    in->block = 0;
    g_sigint = 0;
    for (;;) {
        char *l;
        int r = read_line(in, in_block || more ? "... " : "> ", &l);
        if (r < 0) { /* Ctrl-C: what was typed dropped; twice in a row quits */
            g_sigint = 0;
            if (ctrl_c) return CHAT_IN_QUIT;
            ctrl_c = 1;
            in->len = 0;
            in_block = more = n_pieces = in->block = 0;
            printf("\n(Ctrl-C again, /bye or Ctrl-D quits)\n");
            fflush(stdout);
            continue;
        }
        if (r == 0) /* the end of input sends an unfinished block as it is */
            return n_pieces ? CHAT_IN_MSG : CHAT_IN_EOF;
        ctrl_c = 0;
        size_t n = strlen(l);
        if (in_block) { /* a line ending in """ closes the block (an empty rest adds nothing) */
            int closes = ends_quotes(l, n);
            if (closes && n > 3) ok = add_piece(in, &n_pieces, l, n - 3);
            else if (!closes) ok = add_piece(in, &n_pieces, l, n);
            if (!ok) break;
            if (closes) return CHAT_IN_MSG;
            continue;
        }
        more = 0;
        if (!strncmp(l, "\"\"\"", 3)) { /* opens a block; """text""" is one on one line */
            in->block = in_block = 1;
            l += 3, n -= 3;
            if (ends_quotes(l, n)) {
                if (!add_piece(in, &n_pieces, l, n - 3)) break;
                return CHAT_IN_MSG;
            }
            if (n && !add_piece(in, &n_pieces, l, n)) break;
            continue;
        }
        if (n && l[n - 1] == '\\') { /* goes on onto the next line */
            in->block = more = 1;
            if (!add_piece(in, &n_pieces, l, n - 1)) break;
            continue;
        }
        if (!add_piece(in, &n_pieces, l, n)) break;
        return CHAT_IN_MSG;
    }
    fprintf(stderr, "nibble chat: out of memory\n");
    return CHAT_IN_EOF;
}
