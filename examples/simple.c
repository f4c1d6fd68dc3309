/* examples/simple.c — open a model as `nibble run` does ("auto": quantized once into the
 * warm-start cache), tokenize a prompt, generate greedily, print the text as it comes.
 *   cc simple.c $(pkg-config --cflags --libs nibble) -o simple
 *   ./simple MODEL.gguf "In the beginning" 32 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nibble.h>

static int failed;

/* Each generated token: its text once complete (UTF-8 split over tokens is held back). */
static int on_token(int32_t id, void *user)
{
    const char *text;
    size_t len;
    enum nb_text_event ev = nb_text_out_feed(user, id, &text, &len);
    failed = ev == NB_TEXT_ERROR;
    fwrite(text, 1, len, stdout);
    return ev != NB_TEXT_MORE; /* an end-of-generation token stops */
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL PROMPT [N_TOKENS]\n", argv[0]);
        return 2;
    }
    int n_predict = argc > 3 ? atoi(argv[3]) : 64, n_ids = 0, rc = 1;
    struct nb_model *model = NULL;
    struct nb_tokenizer *tok = NULL;
    struct nb_ctx *ctx = NULL;
    struct nb_sampler *smp = NULL;
    struct nb_text_out *out = NULL;
    struct nb_sampler_params sp = nb_sampler_default_params(); /* temperature 0: greedy */
    struct nb_model_info info;
    int32_t ids[1024];
    const char *text;
    size_t len;
    if (nb_model_open(&model, argv[1], NULL, NULL) != NB_OK) goto done; /* NULL: defaults */
    nb_model_get_info(model, &info);
    if (nb_tokenizer_from_model(&tok, model) != NB_OK || /* BOS first, special tokens read */
        nb_tokenize_text(tok, argv[2], strlen(argv[2]), 1, 1, ids, 1024, &n_ids) != NB_OK ||
        nb_ctx_init(&ctx, model, NULL) != NB_OK || nb_text_out_init(&out, tok, NULL) != NB_OK ||
        nb_sampler_init(&smp, &sp, info.n_vocab) != NB_OK ||
        nb_generate(ctx, 0, smp, ids, n_ids, n_predict, 1, on_token, out, NULL) != NB_OK || failed)
        goto done;
    nb_text_out_flush(out, &text, &len); /* what the detokenizer still holds */
    printf("%.*s\n", (int)len, text);
    rc = 0;
done:
    if (rc) fprintf(stderr, "simple: %s\n", nb_last_error());
    nb_text_out_free(out);
    nb_sampler_free(smp);
    nb_ctx_free(ctx);
    nb_tokenizer_free(tok);
    nb_model_free(model);
    return rc;
}
