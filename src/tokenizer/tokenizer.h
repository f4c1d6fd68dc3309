/* tokenizer/tokenizer.h — text <-> token ids for the model families nibble runs.
 *
 * Two algorithms behind one interface:
 *   NB_TOK_SPM  SentencePiece-style BPE: merge the adjacent pair whose merged piece has
 *               the highest score (Llama 1/2, Mistral, TinyLlama, kjv-7m). Spaces become
 *               U+2581 '▁', an optional dummy-prefix space, <0xNN> byte fallback.
 *   NB_TOK_BPE  merge-rank BPE (GPT-2 style): merge the adjacent pair with the lowest
 *               rank in the merges list. Either byte-level (Qwen2/3, Llama 3, SmolLM,
 *               DeepSeek: every byte is mapped to a printable code point) or over raw
 *               characters with byte fallback (Gemma's tokenizer.json).
 *
 * Sources: GGUF metadata (tokenizer.ggml.model = llama | gpt2), llama2.c tokenizer.bin,
 * a Hugging Face tokenizer.json (+ tokenizer_config.json), or a SentencePiece
 * tokenizer.model (+ tokenizer_config.json). See docs/tokenizers.md.
 *
 * Text handed to nb_tokenize may be any bytes: invalid UTF-8 is replaced by U+FFFD
 * the way the WHATWG decoder (JavaScript's TextDecoder) does, one U+FFFD per maximal
 * invalid subpart. Decoded text is always valid UTF-8.
 *
 * A tokenizer is immutable after loading and may be shared between threads;
 * nb_tokenize allocates its own scratch space.
 */
#ifndef NB_TOKENIZER_TOKENIZER_H
#define NB_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

struct nb_gguf;
struct nb_tokenizer;

enum nb_tok_algo { NB_TOK_SPM = 1, NB_TOK_BPE = 2 };

/* Token types (the values of GGUF tokenizer.ggml.token_type and SentencePiece). */
enum nb_tok_type {
    NB_TOKTYPE_NORMAL = 1,
    NB_TOKTYPE_UNKNOWN = 2,
    NB_TOKTYPE_CONTROL = 3,      /* special: BOS, EOS, <|im_start|>, ... */
    NB_TOKTYPE_USER_DEFINED = 4, /* added token matched as a whole, printed as text */
    NB_TOKTYPE_UNUSED = 5,
    NB_TOKTYPE_BYTE = 6, /* <0xNN> */
};

/* ---------------------------------------------------------------- loading
 * Each loader validates what it reads (ids in range, merges naming known pieces,
 * special ids present) and fails with NB_ERR_FORMAT and a message naming the file
 * and the key; a format or option we do not implement is NB_ERR_UNSUPPORTED. */

/* From GGUF metadata (tokenizer.ggml.*): model llama (SPM) or gpt2 (byte-level BPE),
 * tokens, scores, token_type, merges, bos/eos/eot ids, add_bos/add_eos,
 * add_space_prefix, tokenizer.ggml.pre, tokenizer.chat_template. */
enum nb_status nb_tokenizer_load_gguf(struct nb_tokenizer **out, const struct nb_gguf *g);
/* llama2.c tokenizer.bin: i32 max_token_length, then per token f32 score, i32 len,
 * bytes. n_vocab > 0: read exactly that many tokens (the checkpoint's vocab_size);
 * 0: read to the end of the file. <unk>=0, <s>=1, </s>=2, BOS added, dummy prefix. */
/* The same from bytes in memory (e.g. a blob of a .nib); `name` for errors. */
enum nb_status nb_tokenizer_load_llama2c_mem(struct nb_tokenizer **out, const void *data,
                                             size_t size, const char *name, int n_vocab);
enum nb_status nb_tokenizer_load_llama2c(struct nb_tokenizer **out, const char *path, int n_vocab);
/* A Hugging Face tokenizer: `path` is a tokenizer.json, or a directory holding
 * tokenizer.json or a SentencePiece tokenizer.model, with an optional
 * tokenizer_config.json beside it (bos/eos tokens, add_bos_token, chat_template). */
enum nb_status nb_tokenizer_load_hf(struct nb_tokenizer **out, const char *path);
/* From in-memory JSON texts (config_json may be NULL); `name` for errors. For fuzzing. */
enum nb_status nb_tokenizer_load_hf_json(struct nb_tokenizer **out, const char *json, size_t len,
                                         const char *config_json, size_t config_len,
                                         const char *name);
/* The same with its own name for the tokenizer_config.json text in errors (e.g. files
 * embedded in a .nib: "m.nib (tokenizer_config.json embedded from ...)"). */
enum nb_status nb_tokenizer_load_hf_json_cfg(struct nb_tokenizer **out, const char *json,
                                             size_t len, const char *name,
                                             const char *config_json, size_t config_len,
                                             const char *config_name);
/* A SentencePiece ModelProto (tokenizer.model) held in memory. */
enum nb_status nb_tokenizer_load_spm_model(struct nb_tokenizer **out, const void *data, size_t size,
                                           const char *name);
/* A SentencePiece tokenizer.model in memory plus its tokenizer_config.json text (may be
 * NULL), as a directory holding both would load; `name` and `config_name` for errors. */
enum nb_status nb_tokenizer_load_spm_model_cfg(struct nb_tokenizer **out, const void *data,
                                               size_t size, const char *name,
                                               const char *config_json, size_t config_len,
                                               const char *config_name);
/* The llama2.c tokenizer of a checkpoint: X.tok.bin beside X.bin, else tokenizer.bin in
 * its folder (or the path itself when it is a .tok.bin). NB_ERR_NOT_FOUND if neither. */
enum nb_status nb_tokenizer_llama2c_path(const char *model_path, char *out, size_t size);
/* The tokenizer that goes with an opened model source (formats/source.h): a GGUF file
 * (its parsed metadata), a directory (tokenizer.json, else tokenizer.model), a
 * tokenizer.json file, or a llama2.c checkpoint X.bin (X.tok.bin beside it, else
 * tokenizer.bin in its directory). A .nib is NB_ERR_INVALID_ARG: its embedded tokenizer
 * is read by nb_tokenizer_for_source (runtime/model_tokenizer.h), which callers holding
 * any model should use. */
struct nb_source;
enum nb_status nb_tokenizer_load_source(struct nb_tokenizer **out, const struct nb_source *src);
void nb_tokenizer_free(struct nb_tokenizer *tok);

/* ---------------------------------------------------------------- properties */
enum nb_tok_algo nb_tokenizer_algo(const struct nb_tokenizer *tok);
int nb_tokenizer_n_vocab(const struct nb_tokenizer *tok);
/* -1 when the tokenizer has none. */
int nb_tokenizer_bos(const struct nb_tokenizer *tok);
int nb_tokenizer_eos(const struct nb_tokenizer *tok);
int nb_tokenizer_eot(const struct nb_tokenizer *tok); /* <|im_end|>, <|eot_id|>, ... */
/* Does nb_tokenize(add_special=1) put BOS first? */
int nb_tokenizer_adds_bos(const struct nb_tokenizer *tok);
/* End of generation: EOS, EOT or another end-of-turn token of the vocabulary. */
int nb_tokenizer_is_eog(const struct nb_tokenizer *tok, int32_t id);
/* Special (control) token, not printed by default when decoding. */
int nb_tokenizer_is_special(const struct nb_tokenizer *tok, int32_t id);
/* The vocabulary entry of `id` as stored (e.g. "▁the", "Ġthe", "<0x0A>"), NUL-terminated;
 * NULL for an id out of range. Valid until nb_tokenizer_free. */
const char *nb_token_piece(const struct nb_tokenizer *tok, int32_t id);
/* The id of a piece given exactly as stored, or -1. */
int32_t nb_token_lookup(const struct nb_tokenizer *tok, const char *piece, size_t len);
/* The chat template text from the tokenizer's source (GGUF tokenizer.chat_template or
 * tokenizer_config.json chat_template), or NULL. */
const char *nb_tokenizer_chat_template(const struct nb_tokenizer *tok);
/* Short description: "spm", "bpe-byte-level", "bpe-byte-fallback" + source. */
const char *nb_tokenizer_desc(const struct nb_tokenizer *tok);

/* ---------------------------------------------------------------- encoding
 * Tokenize `len` bytes of `text`. add_special: put BOS first (and EOS last) when the
 * tokenizer's own config says so. parse_special: special tokens written in the text
 * ("<|im_start|>", "<s>") become their ids; 0 treats them as plain text (for
 * untrusted input; added tokens that are not special still match). *ids is malloc'd
 * (free it); *n_ids its length. */
enum nb_status nb_tokenize(const struct nb_tokenizer *tok, const char *text, size_t len,
                           int add_special, int parse_special, int32_t **ids, int *n_ids);
/* nb_tokenize for untrusted sizes: more than max_tokens ids (> 0) is NB_ERR_RANGE ("more
 * than N tokens"), found as early as the text allows (a text longer than max_tokens times
 * the longest piece before any merge), so the memory spent stays in proportion to
 * max_tokens, not to the text. 0: no limit. */
enum nb_status nb_tokenize_max(const struct nb_tokenizer *tok, const char *text, size_t len,
                               int add_special, int parse_special, int max_tokens, int32_t **ids,
                               int *n_ids);
/* nb_tokenize with parse_special 1, except that a special token's text becomes its id only
 * where none of its bytes is marked untrusted (untrusted[i] != 0: byte i came from a user,
 * nb_chat_render_marked's from_msg). Text between the special tokens is encoded as one
 * section, so the ids are those of nb_tokenize wherever no special token is refused.
 * NB_ERR_INVALID_ARG when text is not valid UTF-8 (the marks would not line up).
 * max_tokens as nb_tokenize_max's (0: no limit). */
enum nb_status nb_tokenize_marked(const struct nb_tokenizer *tok, const char *text, size_t len,
                                  int add_special, const uint8_t *untrusted, int max_tokens,
                                  int32_t **ids, int *n_ids);

/* ---------------------------------------------------------------- decoding
 * A streaming detokenizer: feed ids one at a time, get back only complete UTF-8.
 * Bytes of a character split over several tokens are held until it is complete;
 * bytes that cannot become valid UTF-8 come out as U+FFFD. Special tokens are skipped
 * unless NB_DETOK_SPECIAL; after BOS, an SPM tokenizer with a dummy prefix drops one
 * leading space (the inverse of the prefix). */
enum { NB_DETOK_SPECIAL = 1 };
struct nb_detok {
    const struct nb_tokenizer *tok;
    int flags;
    int32_t prev; /* previous id fed, -1 at start */
    uint8_t pend[4];
    int n_pend;
    char *out; /* output buffer, grown as needed */
    size_t out_len, out_cap;
};
void nb_detok_init(struct nb_detok *d, const struct nb_tokenizer *tok, int flags);
/* Append the text of `id`; *text (valid until the next call) gets the complete UTF-8
 * now available, *len its length (may be 0). */
enum nb_status nb_detok_feed(struct nb_detok *d, int32_t id, const char **text, size_t *len);
/* End of stream: whatever is held, with U+FFFD for an incomplete character. */
enum nb_status nb_detok_flush(struct nb_detok *d, const char **text, size_t *len);
void nb_detok_free(struct nb_detok *d);
/* The bytes `id` decodes to on its own, before UTF-8 is checked (a byte token is its
 * raw byte): *bytes points into the tokenizer. NB_ERR_INVALID_ARG out of range. */
enum nb_status nb_token_bytes(const struct nb_tokenizer *tok, int32_t id, const char **bytes,
                              size_t *len);
/* Decode a whole sequence into a malloc'd NUL-terminated string. */
enum nb_status nb_detokenize(const struct nb_tokenizer *tok, const int32_t *ids, int n_ids,
                             int flags, char **out, size_t *out_len);

/* ---------------------------------------------------------------- stop strings
 * Generation stops when the generated text contains a stop string. The matcher
 * holds back text that might be the start of a stop string, so a caller that
 * prints only what nb_stop_feed releases never prints a stop string or a part of it. */
struct nb_stop {
    char **stops;
    int n_stops;
    size_t max_len;
    char *buf;
    size_t off, len, cap; /* held text is buf[off, off + len) */
};
/* Copies the strings (empty strings are ignored). */
enum nb_status nb_stop_init(struct nb_stop *s, const char *const *stops, int n_stops);
/* Add text; *emit, *n_emit: text that is safe to print now. Returns 1 when a stop
 * string was found (the text before it has been released, the rest dropped), else 0. */
int nb_stop_feed(struct nb_stop *s, const char *text, size_t len, const char **emit,
                 size_t *n_emit);
/* End of generation without a stop: the held-back text. */
void nb_stop_flush(struct nb_stop *s, const char **emit, size_t *n_emit);
void nb_stop_free(struct nb_stop *s);

/* ---------------------------------------------------------------- chat templates
 * A small renderer for the chat templates nibble knows, recognised from their Jinja
 * source. Output matches the Jinja rendering of the model's own template (checked
 * against @huggingface/jinja in tests/npm). */
enum nb_chat_kind {
    NB_CHAT_UNKNOWN = 0,
    NB_CHAT_CHATML, /* <|im_start|>role\n...<|im_end|>\n (Qwen 2 and 2.5, SmolLM) */
    NB_CHAT_QWEN3,  /* ChatML + Qwen3's <think> handling of assistant turns */
    NB_CHAT_LLAMA3, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    NB_CHAT_LLAMA2, /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    NB_CHAT_GEMMA,  /* <start_of_turn>user\n...<end_of_turn>\n, assistant = model */
};
/* struct nb_chat_msg {role, content} is public: nibble.h. */
/* Options of a recognised template that change its output. */
struct nb_chat_template {
    enum nb_chat_kind kind;
    int gen_prompt_always;      /* the template appends the assistant header regardless */
    const char *default_system; /* used when the messages have no system turn, or NULL */
};
/* Recognise a template's Jinja source. An unrecognised one is NB_ERR_UNSUPPORTED with
 * a message quoting its start and suggesting --chat-template NAME. */
enum nb_status nb_chat_template_detect(const char *jinja, struct nb_chat_template *out);
/* By name: "chatml", "qwen3", "llama3", "llama2", "gemma". */
enum nb_status nb_chat_template_by_name(const char *name, struct nb_chat_template *out);
const char *nb_chat_kind_name(enum nb_chat_kind kind);
/* The one rule nibble chat and nibble serve pick a built-in family by: `name` when given
 * (NB_ERR_INVALID_ARG when unknown); else the one the model's template (`jinja`, may be
 * NULL) is recognised as; else ChatML, and *note (may be NULL) is the sentence to say
 * once ("no chat template in the model: using ChatML; --chat-template NAME picks
 * another"), NULL otherwise. */
enum nb_status nb_chat_template_pick(const char *name, const char *jinja,
                                     struct nb_chat_template *out, const char **note);
/* Render messages as the template does. bos/eos: the texts of the tokenizer's BOS
 * and EOS tokens (the templates' bos_token / eos_token; NULL = ""). *out malloc'd.
 * Invalid conversations (roles not alternating where the template requires it) are
 * NB_ERR_INVALID_ARG, as the template's raise_exception would be. */
enum nb_status nb_chat_render(const struct nb_chat_template *tpl, const struct nb_chat_msg *msgs,
                              int n_msgs, int add_generation_prompt, const char *bos,
                              const char *eos, char **out);
/* nb_chat_render, and *from_msg (malloc'd, one byte per byte of *out) marks the bytes
 * that came from the messages (roles and contents: 1) apart from the template's own (0),
 * for nb_tokenize_marked: a user who types "<|im_end|>" writes text, not the control
 * token that ends the turn. */
enum nb_status nb_chat_render_marked(const struct nb_chat_template *tpl,
                                     const struct nb_chat_msg *msgs, int n_msgs,
                                     int add_generation_prompt, const char *bos, const char *eos,
                                     char **out, uint8_t **from_msg);

/* Tool use (the OpenAI shapes): a message may be an assistant turn with tool calls or a
 * tool's result (role "tool"); `tools` is the request's array of tool definitions (a cJSON
 * array, or NULL: none offered). */
struct cJSON;
struct nb_chat_call {
    const char *name;
    const struct cJSON *arguments; /* an object (the client's JSON text parsed), or a string */
};
struct nb_chat_tmsg {
    const char *role; /* "system", "user", "assistant", "tool" */
    const char *content;
    const struct nb_chat_call *calls; /* assistant: [n_calls] */
    int n_calls;
};
/* nb_chat_render_marked with tools, as the families' own templates render them: ChatML and
 * Qwen3 as Qwen's (a system block listing the tools as JSON in <tools></tools> with the
 * instruction to answer in <tool_call></tool_call>; results as <tool_response> in a user
 * turn; calls as <tool_call> JSON), Llama 3 as Llama 3.1's JSON format (the tools in the
 * first user turn, results as ipython turns, a call as {"name", "parameters"}; "Today
 * Date" is today's, UTC, as strftime_now gives it). Names, descriptions, arguments and
 * results are marked as message bytes. Other families: NB_ERR_UNSUPPORTED. */
enum nb_status nb_chat_render_tools(const struct nb_chat_template *tpl,
                                    const struct nb_chat_tmsg *msgs, int n_msgs,
                                    const struct cJSON *tools, int add_generation_prompt,
                                    const char *bos, const char *eos, char **out,
                                    uint8_t **from_msg);

#endif
