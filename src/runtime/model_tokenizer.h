/* runtime/model_tokenizer.h — the tokenizer that goes with a model file, and its
 * copy inside a .nib (so a packed file is self-contained). */
#ifndef NB_RUNTIME_MODEL_TOKENIZER_H
#define NB_RUNTIME_MODEL_TOKENIZER_H

#include "core/error.h"
#include "formats/nib.h"
#include "tokenizer/tokenizer.h"

/* The tokenizer of an opened model source: a .nib's embedded copy, otherwise what
 * nb_tokenizer_load_source finds. */
struct nb_source;
enum nb_status nb_tokenizer_for_source(struct nb_tokenizer **out, const struct nb_source *src);

/* The tokenizer files of a source model as .nib blobs ("tokenizer/<what>").
 * Buffers are malloc'd and listed in *owned (free each, then the array). */
struct nb_blob_list {
    void **p;
    int n;
};
enum nb_status nb_tokenizer_embed(struct nb_nib_writer *w, const struct nb_source *src,
                                  struct nb_blob_list *owned);
void nb_blob_list_free(struct nb_blob_list *l);

#endif
