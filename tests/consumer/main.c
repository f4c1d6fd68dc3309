/* A program that knows nibble only through its installed header and library:
 *   consumer [MODEL]   prints the version; with MODEL, loads it and runs a greedy step. */
#include <stdio.h>
#include <string.h>

#include <nibble.h>

int main(int argc, char **argv)
{
    if (strcmp(nb_version(), NIBBLE_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: header %s, library %s\n", NIBBLE_VERSION_STRING, nb_version());
        return 1;
    }
    printf("nibble %s\n", nb_version());
    if (argc < 2) return 0;
    struct nb_open_params p = nb_open_default_params();
    struct nb_model *m = NULL;
    struct nb_tokenizer *tok = NULL;
    struct nb_ctx *ctx = NULL;
    struct nb_sampler *s = NULL;
    struct nb_sampler_params sp = nb_sampler_default_params();
    struct nb_ctx_params cp = nb_ctx_default_params();
    struct nb_model_info info;
    int32_t ids[64];
    int n = 0, rc = 1;
    p.path = "source";
    cp.n_ctx = 64;
    if (nb_model_open(&m, argv[1], &p, NULL) != NB_OK || nb_tokenizer_load(&tok, argv[1]) != NB_OK ||
        nb_tokenize_text(tok, "In the beginning", 16, 1, 1, ids, 64, &n) != NB_OK)
        goto done;
    nb_model_get_info(m, &info);
    if (nb_ctx_init(&ctx, m, &cp) != NB_OK || nb_sampler_init(&s, &sp, info.n_vocab) != NB_OK)
        goto done;
    struct nb_batch b = {.n_tokens = n, .token = ids, .pos = (int32_t[]){0, 1, 2, 3}};
    static float logits[1 << 20];
    if (n != 4 || info.n_vocab > (1 << 20) || nb_decode(ctx, &b, logits) != NB_OK) goto done;
    printf("%s: %d ids, next %d\n", info.arch, n, nb_sampler_sample(s, logits));
    rc = 0;
done:
    if (rc) fprintf(stderr, "consumer: %s\n", nb_last_error());
    nb_sampler_free(s);
    nb_ctx_free(ctx);
    nb_tokenizer_free(tok);
    nb_model_free(m);
    return rc;
}
