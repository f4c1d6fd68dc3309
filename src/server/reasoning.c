/* server/reasoning.c — where a chat answer's reasoning is: the text a thinking model
 * (Qwen3, DeepSeek-R1) writes between <think> and </think> before its answer, which
 * the API returns as message.reasoning_content (delta.reasoning_content in a stream), as
 * vLLM's and llama.cpp's reasoning parsers do. */
#include <string.h>

#include "server/server.h"

static const char k_open[] = "<think>", k_close[] = "</think>";
#define OPEN_N  (sizeof k_open - 1)
#define CLOSE_N (sizeof k_close - 1)

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Does text[0..n) (n < the tag's length) begin the tag? */
static int tag_prefix(const char *text, size_t n, const char *tag)
{
    return n < strlen(tag) && !memcmp(text, tag, n);
}

void srv_think_split(const char *text, size_t len, int open, int done, struct srv_think *t)
{
    size_t w = 0;
    memset(t, 0, sizeof *t);
    while (w < len && is_space(text[w]))
        w++;
    if (len - w >= OPEN_N && !memcmp(text + w, k_open, OPEN_N)) {
        t->found = 1;
        t->r_from = w + OPEN_N;
    } else if (open) {
        t->found = 1; /* the prompt ended inside <think>: the answer starts as reasoning */
        if (!done && tag_prefix(text + w, len - w, k_open)) {
            t->r_to = t->c_from = t->safe = 0; /* "<thi": the tag again, or reasoning */
            return;
        }
    } else if (!done && tag_prefix(text + w, len - w, k_open)) {
        return; /* only whitespace or the start of "<think>" so far: nothing settled */
    } else {
        t->safe = len; /* no reasoning: all of it is content */
        return;
    }
    const char *end = NULL;
    for (size_t i = t->r_from; !end && i + CLOSE_N <= len; i++)
        if (!memcmp(text + i, k_close, CLOSE_N)) end = text + i;
    if (!end) {
        /* reasoning to the end; in a stream, not the bytes that may begin "</think>" */
        size_t hold = 0;
        for (size_t k = CLOSE_N - 1; !done && k > 0 && !hold; k--)
            if (len - t->r_from >= k && !memcmp(text + len - k, k_close, k)) hold = k;
        t->r_to = len - hold;
        t->c_from = len;
        t->safe = t->r_to;
        return;
    }
    t->r_to = (size_t)(end - text);
    t->c_from = t->r_to + CLOSE_N;
    while (t->c_from < len && is_space(text[t->c_from]))
        t->c_from++; /* the blank lines between the reasoning and the answer */
    t->safe = len;
}
