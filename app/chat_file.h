/* app/chat_file.h — a conversation of nibble chat as a JSON file (/save, /load): the
 * messages as OpenAI's API writes them, [{"role": "user", "content": "..."}, ...]. */
#ifndef NB_APP_CHAT_FILE_H
#define NB_APP_CHAT_FILE_H

#include "nibble.h"

/* Write msgs[0, n) to path. 1 on success; 0 after saying why on stderr. */
int app_chat_save(const char *path, const struct nb_chat_msg *msgs, int n);

/* Read a conversation written by app_chat_save (or {"messages": [...]}) and check it: every
 * message an object with a string "role" and "content"; a system message only first; then
 * user and assistant in turn, the last an assistant's; at most max messages. roles[i] get
 * literals ("system", "user", "assistant"), contents[i] malloc'd copies. 1 on success; 0
 * after saying why on stderr (nothing kept). */
int app_chat_load(const char *path, int max, const char **roles, char **contents, int *n);

#endif
