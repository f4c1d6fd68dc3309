/* nibble_synth.h — synthetic models with real shapes, for tests and
 * benchmarks (`nibble synth`).
 * Part of libnibble's public API; see nibble.h for the conventions (statuses,
 * nb_last_error, versioned structs). */
#ifndef NIBBLE_SYNTH_H
#define NIBBLE_SYNTH_H

#include "nibble.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- synthetic models
 * Random-weight models at real shapes, written as GGUF with llama.cpp's tensor names
 * and a minimal byte-level BPE vocabulary (`nibble synth`), so nibble and llama.cpp can
 * be timed on identical files. The bytes depend only on shape, dtype and seed. */

struct nb_synth_shape_info {
    size_t size;
    const char *name; /* "qwen3-1.7b", ... (static strings) */
    const char *arch; /* general.architecture: "llama", "qwen3", "spark" */
    const char *desc;
    int n_layers, n_embd, n_heads, n_kv_heads, head_dim, n_ff, n_vocab, n_ctx;
    int64_t n_params; /* embedding counted once when tied */
};
/* The built-in shapes: index 0 .. nb_synth_shape_count() - 1. */
NB_API int nb_synth_shape_count(void);
/* NB_ERR_INVALID_ARG for an index out of range. */
NB_API enum nb_status nb_synth_shape_get(int i, struct nb_synth_shape_info *out);
/* By name; NB_ERR_NOT_FOUND naming it (and the shapes there are) when unknown. */
NB_API enum nb_status nb_synth_shape_find(const char *name, struct nb_synth_shape_info *out);

struct nb_synth_params {
    size_t size;
    const char *dtype; /* "f16" (default), "bf16" or "f32": matrices and embedding */
    uint64_t seed;     /* default 1 */
    int n_threads;     /* generation threads; 0: all cores (the bytes do not depend on it) */
};
NB_API struct nb_synth_params nb_synth_default_params(void);
/* Write the shape named `shape` to `path` (via path.tmp + rename). NB_ERR_NOT_FOUND for
 * an unknown shape, NB_ERR_INVALID_ARG for an unknown dtype. */
NB_API enum nb_status nb_synth_write_file(const char *shape, const struct nb_synth_params *params,
                                          const char *path);

#ifdef __cplusplus
}
#endif
#endif /* NIBBLE_SYNTH_H */
