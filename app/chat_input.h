/* app/chat_input.h — nibble chat's input: one message at a time from standard input.
 *
 * At a terminal the line is edited and kept in a history (libedit: arrows, Ctrl-R; the
 * history file is app_env_chat_history's), the prompt "> " goes to stdout and Ctrl-C is
 * caught: during a reply it stops the reply (chat_input_interrupted), at the prompt it
 * drops what was typed and a second one in a row quits. Elsewhere (a pipe, a file) lines
 * are read as they are, no prompt, and Ctrl-C is left to kill the process.
 *
 * A message may span lines, both ways: a line ending in '\' goes on onto the next (the
 * '\' becomes a newline, as llama-cli); a line beginning with """ opens a block that the
 * first line ending in """ closes (the quotes dropped, newlines kept, as ollama). */
#ifndef NB_APP_CHAT_INPUT_H
#define NB_APP_CHAT_INPUT_H

#include <stddef.h>

enum chat_in {
    CHAT_IN_MSG,  /* a message: in->msg */
    CHAT_IN_EOF,  /* end of input (Ctrl-D at a terminal) */
    CHAT_IN_QUIT, /* Ctrl-C twice in a row at the prompt */
};

struct chat_input {
    int tty;     /* stdin is a terminal: prompt, Ctrl-C caught, libedit when built with it */
    int editing; /* libedit reads the lines */
    int block;   /* the message came from more than one line (never a /command) */
    char *msg;   /* the message read (valid until the next read) */
    size_t len, cap;
    char *line; /* the line buffer of getline */
    size_t line_cap;
    char history[4096]; /* the history file ("" none) */
};

/* Set up for reading stdin (at a terminal: the Ctrl-C handler, the history loaded). */
void chat_input_open(struct chat_input *in);
/* The next message: CHAT_IN_MSG with in->msg (no trailing newline), else why none. */
enum chat_in chat_input_read(struct chat_input *in);
/* The history written, buffers freed, Ctrl-C given back to its default. */
void chat_input_close(struct chat_input *in);
/* Ctrl-C came since the message was read (a reply's token callback asks: stop then). */
int chat_input_interrupted(void);

#endif
