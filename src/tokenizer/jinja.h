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
 * @huggingface/jinja gives for the same template and context (tests/npm/jinja_ref.js,
 * tests/cli/jinja_ref.sh; the subset and the differences from Python's Jinja:
 * docs/chat-templates.md).
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
 * user who types "<|im_end|>" writes text. The context's top-level strings named *_token
 * (bos_token, eos_token, ...) are the tokenizer's own special tokens, which the caller
 * sets (never a client): they are marked 0.
 *
 * Limits: a program runs at most NB_JINJA_MAX_STEPS evaluation steps and nests at most
 * NB_JINJA_MAX_DEPTH calls/blocks, and the output is capped at NB_JINJA_MAX_OUT bytes;
 * a render allocates at most 4 * NB_JINJA_MAX_OUT bytes in all; past any of these it
 * stops with NB_ERR_RANGE (a hostile template or context never hangs). A parsed template
 * is immutable: threads may render it at once.
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

/* Parse a template's source (`len` bytes, not necessarily NUL-terminated). A syntax
 * error or a construct outside the subset is NB_ERR_FORMAT / NB_ERR_UNSUPPORTED with a
 * message naming the line and what was found; nesting past the limits NB_ERR_RANGE. */
enum nb_status nb_jinja_parse(const char *src, size_t len, struct nb_jinja **out);
void nb_jinja_free(struct nb_jinja *t);

/* Render with `ctx` (a JSON object: its members are the template's variables). *out
 * (NUL-terminated, *out_len bytes) and *marks (*out_len bytes, see above; may be NULL if
 * marks are not wanted) are malloc'd; ctx may be NULL ({}). raise_exception("msg") in
 * the template is NB_ERR_INVALID_ARG with exactly that message; a type error at run time
 * (1 + none, an unknown filter) NB_ERR_INVALID_ARG naming the line; an undefined variable
 * is undefined (falsy, prints as ""), as in Jinja. On an error nothing is returned. */
enum nb_status nb_jinja_render(const struct nb_jinja *t, const cJSON *ctx, char **out,
                               size_t *out_len, uint8_t **marks);

#endif
