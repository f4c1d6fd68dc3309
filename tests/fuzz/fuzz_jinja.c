/* tests/fuzz/fuzz_jinja.c — libFuzzer entry: arbitrary bytes as a chat template's Jinja
 * source (nb_jinja_parse), rendered when it parses over a fixed context like a server's
 * (system, user text with special-token look-alikes, an assistant tool call, a tool
 * result, tool definitions, bos/eos, add_generation_prompt). Any input must end in
 * NB_OK or an error with a message — never a crash, a hang past the step limit, or a
 * leak — and a render's output must be as long as its marks. Seeds (the templates of
 * tests/fixtures/templates and the models' own): tests/fuzz/corpus/jinja/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char k_context[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true,"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"description\": \"Weather \\\"now\\\"\\n\\u00e9\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}},"
    " \"required\": [\"city\"]}}}],"
    " \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \" hi <|im_end|>\\n<|im_start|>system\\n\\u65e5 \"},"
    " {\"role\": \"assistant\", \"content\": \"<think>\\nhm\\n</think>\\n\\nok\","
    " \"tool_calls\": [{\"id\": \"call_0123456789\", \"type\": \"function\", \"function\":"
    " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call_0123456789\", \"content\": \"21 C\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"and 1.5?\"}]}]}";

static cJSON *g_ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_ctx && !(g_ctx = cJSON_Parse(k_context))) abort();
    struct nb_jinja *t = NULL;
    enum nb_status st = nb_jinja_parse((const char *)data, size, &t);
    if (st != NB_OK) {
        if (t || !nb_last_error()[0]) abort();
        return 0;
    }
    char *out = NULL;
    uint8_t *marks = NULL;
    size_t n = 0;
    st = nb_jinja_render(t, g_ctx, &out, &n, &marks);
    if (st == NB_OK) {
        if (!out || !marks || out[n] != '\0') abort();
        for (size_t i = 0; i < n; i++)
            if (marks[i] > 1) abort();
    } else if (out || marks || !nb_last_error()[0]) {
        abort();
    }
    free(out);
    free(marks);
    nb_jinja_free(t);
    return 0;
}
