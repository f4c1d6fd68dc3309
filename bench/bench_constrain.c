/* bench/bench_constrain.c — the per-token cost of constrained decoding (runtime/constrain.c)
 * on a real vocabulary (a model's tokenizer) and on a synthetic one of Qwen's size
 * (151936 tokens of 1..10 bytes): the one-token check (the sampler's choice fits: the usual
 * case), an argmax pass (the greedy fallback walks up to 16), and the full mask.
 *   bench_constrain [MODEL]     (default ../shared/models/kjv-7m/kjv-7m-f32.gguf)
 * Each measures a forced JSON decode from random logits, so the states are the ones a
 * decode goes through; prints microseconds per token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "runtime/constrain.h"
#include "tokenizer/tokenizer.h"

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A byte-level-like vocabulary: the 256 bytes, then words of letters with a leading space
 * or punctuation, JSON-ish pieces; the last token is the end of generation. */
static void synthetic(struct nb_vocab_bytes *v, int n)
{
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ \"{}[]:,0123456789.-_\n";
    uint64_t s = 7;
    v->n_vocab = n;
    v->off = malloc(sizeof *v->off * ((size_t)n + 1));
    v->kind = malloc((size_t)n);
    v->bytes = malloc((size_t)n * 10);
    uint32_t at = 0;
    for (int i = 0; i < n; i++) {
        v->off[i] = at;
        v->kind[i] = i == n - 1 ? NB_VTOK_EOG : NB_VTOK_TEXT;
        if (i < 256) {
            v->bytes[at++] = (char)i;
            continue;
        }
        int len = 1 + (int)(rng_next(&s) % 10);
        for (int k = 0; k < len; k++)
            v->bytes[at++] = alpha[rng_next(&s) % (sizeof alpha - 1)];
    }
    v->off[n] = at;
}

static void run(const char *name, const struct nb_vocab_bytes *v)
{
    struct nb_gram g = {0};
    nb_gram_object(&g);
    float *logits = malloc(sizeof *logits * (size_t)v->n_vocab);
    uint64_t s = 42;
    int steps = 0, n_check = 0;
    double t_check = 0, t_mask = 0, t_argmax = 0;
    struct nb_cons c;
    nb_cons_start(&g, &c);
    for (int run_i = 0; run_i < 20 && steps < 3000; run_i++) {
        nb_cons_start(&g, &c);
        for (int step = 0; step < 200; step++, steps++) {
            if (!c.closing && 200 - step - 1 <= nb_cons_cost(&g, &c)) c.closing = 1;
            for (int i = 0; i < v->n_vocab; i++)
                logits[i] = (float)(rng_next(&s) >> 40) / (float)(1 << 24);
            double t0 = nb_time_s();
            int best = 0;
            for (int i = 1; i < v->n_vocab; i++)
                if (logits[i] > logits[best]) best = i;
            double t1 = nb_time_s();
            nb_cons_allows(&g, v, &c, best, 0);
            double t2 = nb_time_s();
            nb_cons_mask(&g, v, &c, 0, logits);
            double t3 = nb_time_s();
            t_argmax += t1 - t0;
            t_check += t2 - t1;
            t_mask += t3 - t2;
            n_check++;
            best = 0;
            for (int i = 1; i < v->n_vocab; i++)
                if (logits[i] > logits[best]) best = i;
            if (v->kind[best] == NB_VTOK_EOG) break;
            nb_cons_feed(&g, &c, v->bytes + v->off[best], v->off[best + 1] - v->off[best]);
        }
    }
    printf("%-28s %7d tokens: check %6.2f us, argmax pass %7.1f us, full mask %8.1f us per token "
           "(%d tokens decoded)\n",
           name, v->n_vocab, 1e6 * t_check / n_check, 1e6 * t_argmax / n_check,
           1e6 * t_mask / n_check, n_check);
    free(logits);
    nb_gram_free(&g);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "../shared/models/kjv-7m/kjv-7m-f32.gguf";
    struct nb_tokenizer *t = NULL;
    struct nb_vocab_bytes v;
    if (nb_tokenizer_load(&t, path) == NB_OK &&
        nb_vocab_bytes_init(&v, t, nb_tokenizer_n_vocab(t)) == NB_OK) {
        run(path, &v);
        nb_vocab_bytes_free(&v);
        nb_tokenizer_free(t);
    } else {
        fprintf(stderr, "%s: %s (skipped)\n", path, nb_last_error());
    }
    struct nb_vocab_bytes q = {0};
    synthetic(&q, 151936);
    nb_vocab_bytes_classify(&q);
    run("synthetic (Qwen's size)", &q);
    nb_vocab_bytes_free(&q);
    return 0;
}
