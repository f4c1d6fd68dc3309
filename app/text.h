/* app/text.h — the CLI's conveniences over nibble.h: whole files, token ids and text in
 * malloc'd buffers (the library fills caller buffers; these size them), wall time. */
#ifndef NB_APP_TEXT_H
#define NB_APP_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "nibble.h"

/* Seconds on a monotonic clock. */
double app_time_s(void);
/* The whole of `path` ("-": standard input), at most `max` bytes, NUL-terminated, into
 * *buf (malloc'd). 0 after printing "nibble CMD: WHAT: PATH: why" to stderr. */
int app_read_all(const char *cmd, const char *what, const char *path, size_t max, char **buf,
                 size_t *n);
/* nb_tokenize_text into a malloc'd array (*ids; may be NULL when *n_ids is 0). */
enum nb_status app_tokenize(const struct nb_tokenizer *tok, const char *text, size_t len,
                            int add_special, int parse_special, int32_t **ids, int *n_ids);
/* nb_detokenize_text into a malloc'd string. */
enum nb_status app_detokenize(const struct nb_tokenizer *tok, const int32_t *ids, int n_ids,
                              int special, char **text, size_t *len);
/* nb_chat_apply into a malloc'd string. */
enum nb_status app_chat_apply(const struct nb_tokenizer *tok, const char *name,
                              const struct nb_chat_msg *msgs, int n_msgs, int add_assistant,
                              char **text);
/* The option of g that was given ("--json-schema", "--grammar", "--grammar-file"), or
 * NULL. */
struct app_grammar_opts;
const char *app_grammar_flag(const struct app_grammar_opts *g);
/* The grammar of --json-schema SCHEMA (JSON text, or else a file that holds it),
 * --grammar GBNF or --grammar-file FILE, for the model's vocabulary: 1 and *out (NULL
 * when none was given); 0 after printing why (two given, a file, the grammar's error). */
int app_grammar_open(const char *cmd, const struct app_grammar_opts *g,
                     const struct nb_tokenizer *tok, int n_vocab, struct nb_grammar **out);

#endif
