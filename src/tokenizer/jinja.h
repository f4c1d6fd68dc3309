/* tokenizer/jinja.h — a Jinja subset for chat templates.
 *
 * The chat templates stored in GGUF (tokenizer.chat_template) and in Hugging Face's
 * tokenizer_config.json are Jinja programs. This interpreter runs the subset those
 * templates use (Qwen2.5/Qwen3 with tools, Llama 3.x with tools, Gemma, Mistral, ChatML):
 * text, {{ }}, {% if/elif/else %}, {% for ... in ... %} with loop.* and `if` filters,
 * {% set %} (namespace() attributes included), {% macro %}, whitespace control ({%- -%}),
 * literals (strings, numbers, lists, dicts, true/false/none), arithmetic, comparison,
 * `in`, `is defined` / `is none` / `is string` ... tests, `~`, slices and attribute/item
 * access, the filters and string/dict methods the templates call (tojson, trim, length,
 * upper, lower, join, replace, startswith, endswith, split, strip, items, ...),
 * raise_exception() and strftime_now(). Output is byte for byte what
 * @huggingface/jinja gives for the same template and context (tests/npm).
 *
 * Data comes in as JSON (cJSON): the context object holds messages, tools,
 * add_generation_prompt, bos_token, eos_token, ... as the caller builds it.
 *
 * Marks: every output byte is marked 1 when it comes from a string of the context (a
 * message's content, a tool's description: data) and 0 when it comes from the template's
 * own text or string literals. Strings carry their marks through concatenation, slicing,
 * filters and methods (a result byte keeps the mark of the byte it came from; bytes a
 * filter makes up, as tojson's quotes, are marked as the value they describe). The
 * tokenizer matches special tokens only over bytes marked 0 (nb_tokenize_marked), so a
 * user who types "<|im_end|>" writes text.
 *
 * Limits: a program runs at most NB_JINJA_MAX_STEPS evaluation steps and nests at most
 * NB_JINJA_MAX_DEPTH calls/blocks, and the output is capped at NB_JINJA_MAX_OUT bytes;
 * past them it stops with NB_ERR_RANGE (a hostile template or context never hangs).
 */
#ifndef NB_TOKENIZER_JINJA_H
#define NB_TOKENIZER_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "nibble.h"

#define NB_JINJA_MAX_STEPS (1 << 24)
#define NB_JINJA_MAX_DEPTH 64
#define NB_JINJA_MAX_OUT   (64u << 20)

struct nb_jinja; /* a parsed template */

/* Parse a template's source. A syntax error or a construct outside the subset is
 * NB_ERR_FORMAT / NB_ERR_UNSUPPORTED with a message naming the line and what was found. */
enum nb_status nb_jinja_parse(const char *src, size_t len, struct nb_jinja **out);
void nb_jinja_free(struct nb_jinja *t);

/* Render with `ctx` (a JSON object: its members are the template's variables). *out
 * (NUL-terminated, *out_len bytes) and *marks (*out_len bytes, see above; may be NULL if
 * marks are not wanted) are malloc'd. raise_exception("msg") in the template is
 * NB_ERR_INVALID_ARG with that message; an undefined variable is undefined (falsy, prints
 * as ""), as in Jinja. */
enum nb_status nb_jinja_render(const struct nb_jinja *t, const cJSON *ctx, char **out,
                               size_t *out_len, uint8_t **marks);

#endif
