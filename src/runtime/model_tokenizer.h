/* runtime/model_tokenizer.h — the tokenizer that goes with a model file, and its
 * copy inside a .nib (so a packed file is self-contained). */
#ifndef NB_RUNTIME_MODEL_TOKENIZER_H
#define NB_RUNTIME_MODEL_TOKENIZER_H

#include "core/error.h"
#include "formats/nib.h"
#include "tokenizer/tokenizer.h"

/* For a .nib: its embedded tokenizer; otherwise what nb_tokenizer_load_for_model finds. */
enum nb_status nb_tokenizer_for_model(struct nb_tokenizer **out, const char *model_path);

/* The tokenizer files of a source model as .nib blobs ("tokenizer/<what>").
 * Buffers are malloc'd and listed in *owned (free each, then the array). */
struct nb_blob_list {
    void **p;
    int n;
};
enum nb_status nb_tokenizer_embed(struct nb_nib_writer *w, const char *src_path,
                                  struct nb_blob_list *owned);
void nb_blob_list_free(struct nb_blob_list *l);

#endif
