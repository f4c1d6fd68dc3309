/* tests/helpers/llama2c_writer.h — build llama2.c checkpoints in memory for tests.
 *
 * Every weight element gets a value that the test can recompute from the tensor
 * name: nbt_l2c_value(tag, i) for f32 tensors, and for v2 the int8 value
 * nbt_l2c_q(tag, i) with scale nbt_l2c_scale(tag, group). */
#ifndef NBT_LLAMA2C_WRITER_H
#define NBT_LLAMA2C_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "formats/llama2c.h"

/* Tag of a tensor name as exposed by the reader ("tok_embeddings", "norm",
 * "output", "layers.L.KIND"); -1 for an unknown name. */
int nbt_l2c_tag(const char *name);
float nbt_l2c_value(int tag, int64_t i);
int8_t nbt_l2c_q(int tag, int64_t i);
float nbt_l2c_scale(int tag, int64_t group);

/* The tests' tiny shape: dim 8, hidden 12, 2 layers, 2 heads / 1 kv head, vocab 5,
 * seq_len 6 (group 4 for version 2). */
struct nb_llama2c_config nbt_l2c_tiny(int version, int shared_classifier);

/* A complete checkpoint of config `c` (c->version 0, 1 or 2; for legacy the sign
 * of the written vocab_size follows c->shared_classifier). malloc'd; NULL on OOM. */
uint8_t *nbt_l2c_build(const struct nb_llama2c_config *c, size_t *size);

#endif
