/* runtime/quantize.h — turn a float checkpoint into a .nib file of one weight path. */
#ifndef NB_RUNTIME_QUANTIZE_H
#define NB_RUNTIME_QUANTIZE_H

#include <stdint.h>

#include "core/error.h"
#include "core/wformat.h"

struct nb_quantize_opts {
    enum nb_wpath path; /* for every linear layer */
    int group;          /* int4 group size: 32, 64, 128 */
    int head_bits;      /* 4 (the path's int4 grid), 8 (w8a16) or 16 (bf16); 0: default */
    int embd_bits;      /* 4 (the path's int4 grid, rows), 8 (int8 rows) or 16 (bf16); 0:
                           the recipe's */
    /* int4 paths: a named recipe (runtime/recipe.h: speed, balanced, fidelity, q3..q8; NULL:
     * "uniform", the layers at 4 bits, head and embeddings at 8) or, when bpw > 0, the
     * budget recipe of bpw bits per weight; head_bits / embd_bits override either */
    const char *recipe;
    double bpw;
    const char *bits;   /* per-class widths over the recipe (nb_recipe_set_bits), or NULL */
    int search;         /* 1: MSE scale search (default), 0: absmax */
    const char *calib_path; /* text file: weight the error by mean squared activations */
    int calib_tokens;       /* use at most this many tokens of it (0: all) */
    /* GPTQ (quant/gptq.h) on every int4 matrix, Hessians from calib_path (required) */
    int gptq;
    int act_order;     /* GPTQ sweeps columns by descending H_ii */
    double gptq_damp;  /* 0: the default (1% of mean diag H) */
    int n_threads;
    /* int4 weights on disk: NB_LAYOUT_X16 (default: what the fast kernels read) or
     * NB_LAYOUT_ROWS (row-major; matrices whose rows are not a multiple of 16 always are) */
    int layout;
    /* rows per repack step into X16 (0: the whole matrix; identical bytes, for timing) */
    int64_t repack_rows;
    /* the source's content hash when the caller already has it (nb_source_hash); else
     * quantize computes it */
    int have_source_hash;
    uint64_t source_hash;
    /* progress(done, total, user) after each tensor; may be NULL */
    void (*progress)(int64_t done, int64_t total, void *user);
    /* row(...) once per tensor for the report; may be NULL */
    void (*report)(const char *name, const char *kind, int64_t n_out, int64_t n_in,
                   uint64_t bytes, double rel_rms, void *user);
    void *user;
};

struct nb_quantize_result {
    uint64_t linear_bytes; /* stored bytes of the linear weights (head included) */
    int64_t linear_params;
    uint64_t file_bytes;
    int64_t file_params; /* every parameter stored */
    double bpw_linear, bpw_file;
    double seconds;
    char recipe[32];        /* the recipe's name */
    char recipe_table[2048]; /* its widths per class (nb_recipe_table) */
};

void nb_quantize_default_opts(struct nb_quantize_opts *o);
/* The int4 layout files are written in (anything but NB_LAYOUT_ROWS means X16): what the
 * header records and the warm-start cache's key includes. */
static inline int nb_quantize_opts_layout(const struct nb_quantize_opts *o)
{
    return o->layout == NB_LAYOUT_ROWS ? NB_LAYOUT_ROWS : NB_LAYOUT_X16;
}
/* What the options alone make impossible (GPTQ without a calibration text), before any
 * file is opened: NB_ERR_INVALID_ARG naming it. nb_quantize_file checks it too. */
enum nb_status nb_quantize_check_opts(const struct nb_quantize_opts *opts);
/* Quantize the opened source model (formats/source.h) into a new .nib at out_path
 * (written atomically: core/outfile.h). An out_path that is the source itself, or a
 * file of the source folder, is refused (NB_ERR_INVALID_ARG) before anything is read. */
struct nb_source;
enum nb_status nb_quantize_file(struct nb_source *src, const struct nb_quantize_opts *opts,
                                const char *out_path, struct nb_quantize_result *res);
/* The same into an anonymous in-memory file: *fd_out (the caller closes it). */
enum nb_status nb_quantize_memory(struct nb_source *src, const struct nb_quantize_opts *opts,
                                  int *fd_out, struct nb_quantize_result *res);

#endif
