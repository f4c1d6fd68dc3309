/* runtime/recipe.h — how many bits each tensor of a quantized model gets.
 *
 * A recipe gives every matrix a width: 4 (the build's int4 grid: w4a8 or w4a16), 6 (GGUF
 * Q6_K blocks nibble writes, quant/kquant.h, run by the block formats' integer kernels; a
 * shape Q6_K cannot take gets the recipe's 4-bit form), 8 (GGUF Q8_0 blocks on the same
 * kernels for a GEMM — int8 activations per 32, where int8 rows ran on float activations at
 * a fraction of the speed; the embeddings, a gather, and a shape Q8_0 cannot take: int8
 * rows) or 16 (bf16). Matrices fall in classes (q, k, v, o, gate, up, down
 * per layer; the output head; the embeddings, a row gather); a Spark head gate follows q.
 * Named recipes (docs/quantization.md, "Recipes"):
 *
 *   speed     every matrix 4-bit, embeddings and head included, at the build's group
 *   balanced  the layers 4-bit; the head and the embeddings 6-bit (Q6_K), stored once
 *             when the head is tied (the head's records, which the gather decodes):
 *             measured on kjv-7m and phone-agent-tiny, the two matrices whose rounding
 *             costs most (docs/quantization.md, "6-bit head and embeddings"); where Q6_K
 *             does not fit, the head in 4-bit groups of 32 and the embeddings in
 *             asymmetric groups of 64
 *   fidelity  4-bit, with v and down at 8 bits in every layer, the head and the
 *             embeddings at 8 (Q8_0 on the GEMMs: v, down and the head, which a tied
 *             model's embeddings share)
 *   uniform   the layers at 4 bits, the head and the embeddings at 8 (quantize's
 *             recipe when none is named)
 *   q3 .. q8  the ladder against llama.cpp's rungs (docs/quantization.md, "The ladder"):
 *             q3 = speed (Q3_K_M), q4 = balanced (Q4_0, Q4_K_M), q5 = balanced with k,
 *             v and down at 8 (Q5_K_M), q6 = q5 with up at 6 (Q6_K),
 *             q8 = every matrix at 8 (Q8_0)
 *
 * 4-bit embeddings always use the asymmetric w4a16 grid: they are a row gather, not a
 * GEMM, so the build's activation type does not matter to them. And a budget
 * (`--bpw B`, nb_recipe_budget): the largest rung within B bits per weight, then the
 * 6- and 8-bit steps that pay most while the file's tensors stay within B. The resolved
 * table is printed by quantize and stored in the .nib header ("recipe"). */
#ifndef NB_RUNTIME_RECIPE_H
#define NB_RUNTIME_RECIPE_H

/* Bumped whenever a named recipe's widths change: the warm-start cache's key holds it, so
 * an entry built by an older "balanced" is not taken for the new one (5: --bpw starts from
 * the ladder's rungs and has 6-bit steps; q8's GPTQ dampening 0.02). */
#define NB_RECIPE_VERSION 5

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "core/wformat.h"
#include "model/model.h"

/* classes of a layer's matrices */
enum nb_tclass { NB_TC_Q, NB_TC_K, NB_TC_V, NB_TC_O, NB_TC_GATE, NB_TC_UP, NB_TC_DOWN,
                 NB_TC_LAYER_COUNT };

struct nb_recipe {
    char name[32];   /* "speed", "balanced", "fidelity", "bpw 4.50" */
    int n_layers;
    uint8_t bits[NB_MAX_LAYERS][NB_TC_LAYER_COUNT];
    uint8_t head_bits, embd_bits;
    int head_group, embd_group; /* int4 group of the head and the embeddings (0: the
                                   build's); 4-bit embeddings use the w4a16 grid */
    double damp; /* GPTQ's dampening when none is asked for (0: gptq's 0.01); q8: 0.02,
                    measured (docs/quantization.md, "8 bits as Q8_0 blocks") */
};

const char *nb_tclass_name(enum nb_tclass c);
/* The named recipe for n_layers (NULL: uniform; NB_ERR_INVALID_ARG for an unknown
 * name). */
enum nb_status nb_recipe_named(const char *name, int n_layers, struct nb_recipe *r);
/* The block format a width stands for on the int4 paths (quant/kquant.h), where w's shape
 * takes it: 6 is Q6_K (K a multiple of 256), 8 on a GEMM (`linear`) is Q8_0 (K a multiple
 * of 32); 16-row records for a GEMM, rows for a gather. NB_WF_COUNT: none (6: the recipe's
 * 4-bit form; 8: int8 rows, as a gather's 8 always is: fewer bytes, and no GEMM). */
enum nb_wformat nb_recipe_block(const struct nb_weight *w, int bits, int linear,
                                uint64_t *bytes /* its stored bytes, or NULL */);
/* The block format a width of 6 or 8 gives w in a build of `path` (nb_recipe_block), or
 * NB_WF_COUNT: not an int4 path, no such width or shape, or w has 4-bit checkpoint codes
 * the int4 path keeps (they stay at 4 bits whatever the recipe says; an exported lm_head
 * comes back as it went out). quantize writes that format and GPTQ sweeps on its grid. */
enum nb_wformat nb_recipe_block_of(const struct nb_model *m, enum nb_wpath path,
                                   const struct nb_weight *w, int bits, int linear);
/* Per-class widths over r: "v=8,down=6,head=6" (classes q, k, v, o, gate, up, down, head,
 * embd; widths 4, 6, 8, 16), as llama-quantize's --tensor-type sets a type per tensor
 * class. The name gets "+spec". NB_ERR_INVALID_ARG naming the bad item. NULL or "": none. */
enum nb_status nb_recipe_set_bits(struct nb_recipe *r, const char *spec);
/* The path a width stands for in a build whose int4 path is `path`. */
enum nb_wpath nb_recipe_path(enum nb_wpath path, int bits);

/* A recipe's finer head and embedding groups kept only where they are finer than the
 * build's group and divide n_embd (else 0: the build's). */
void nb_recipe_fit_groups(struct nb_recipe *r, const struct nb_model *m, int group);
/* 1 when the head is tied to the embeddings and r gives both one width: quantize stores
 * one copy, the head's, which the embedding gather reads. */
int nb_recipe_shared_head(const struct nb_model *m, const struct nb_recipe *r);
/* The plan of a float source's build in int4 path `path` with groups of `group` under r
 * (its groups fitted): the bytes of every tensor as quantize writes them (matrices in
 * their formats, one copy of a shared head, f32 vectors; not the tokenizer or the header)
 * and the model's parameters (a tied head once). Computed from the shapes alone.
 * NB_ERR_INVALID_ARG when a matrix fits no format of its width. */
enum nb_status nb_recipe_plan(const struct nb_model *m, enum nb_wpath path, int group,
                              const struct nb_recipe *r, uint64_t *bytes, int64_t *params);

struct nb_act_stats;
/* The budget recipe (--bpw): the largest rung of the ladder (q3, q4, q5, q6, q8) whose
 * plan is within bpw bits per parameter (nb_recipe_plan), then the widening steps (4 to 6
 * and 6 to 8 bits; 4 to 8 where Q6_K does not fit) that remove the most output error per
 * extra byte, while the plan stays within the budget. The error of each class of each
 * layer, the head and the embeddings at widths 4, 6 and 8 is measured on 64 sampled rows
 * quantized as quantize stores them, weighted by `stats`' mean squared input activation
 * (may be NULL: unweighted). r gets the result; `path` is an int4 path.
 * NB_ERR_INVALID_ARG when even q3 does not fit (the message names its bits per weight). */
enum nb_status nb_recipe_budget(const struct nb_model *m, enum nb_wpath path, int group,
                                double bpw, const struct nb_act_stats *stats,
                                int n_threads, struct nb_recipe *r);

/* The table: one line per class, its widths over the layers ("v  8 (all layers)",
 * "down  8 (layers 0-3, 24-27), 4 (others)"), into buf. */
void nb_recipe_table(const struct nb_recipe *r, char *buf, size_t size);
/* {"name":..., "embeddings":4, "head":4, "q":4, "v":[8,8,...]} (a list when the width
 * differs between layers). */
cJSON *nb_recipe_to_json(const struct nb_recipe *r);

#endif
