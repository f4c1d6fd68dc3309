/* model/config.h — building struct nb_config from each source format. */
#ifndef NB_MODEL_CONFIG_H
#define NB_MODEL_CONFIG_H

#include "formats/gguf.h"
#include "formats/json.h"
#include "formats/llama2c.h"
#include "model/model.h"

/* From GGUF metadata under the architecture's prefix ("<arch>.block_count", ...). */
enum nb_status nb_config_from_gguf(struct nb_config *c, const struct nb_gguf *g);
/* From a parsed Hugging Face config.json; `what` names the file for errors. */
enum nb_status nb_config_from_hf(struct nb_config *c, const cJSON *root, const char *what);
/* From a llama2.c checkpoint header. */
enum nb_status nb_config_from_llama2c(struct nb_config *c, const struct nb_llama2c_config *h,
                                      const char *what);

/* nibble's own JSON form, stored in .nib headers (round-trips every field). */
cJSON *nb_config_to_json(const struct nb_config *c);
enum nb_status nb_config_from_json(struct nb_config *c, const cJSON *o, const char *what);

#endif
