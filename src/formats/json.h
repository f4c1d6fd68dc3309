/* formats/json.h — JSON files through cJSON, with errors that name the file, the
 * line and column of a syntax error, and the key of a value of the wrong type. */
#ifndef NB_FORMATS_JSON_H
#define NB_FORMATS_JSON_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "core/error.h"

#define NB_JSON_MAX_FILE (64u << 20) /* config / tokenizer files are far smaller */

/* Parse a file; on success *out must be released with cJSON_Delete. */
enum nb_status nb_json_load(const char *path, cJSON **out);
/* Parse a buffer of `len` bytes (need not be NUL-terminated; a NUL byte inside is
 * an error). `name` for errors; a syntax error reads "name:LINE:COL: ...". */
enum nb_status nb_json_parse(const char *buf, size_t len, const char *name, cJSON **out);

/* Typed getters for object members. A missing key (or obj == NULL) leaves
 * *out = dflt and returns NB_OK; a present key of the wrong type (or a
 * non-integral / out-of-range number for the int getter), or an obj that is not
 * an object, is NB_ERR_FORMAT naming `name` and the key. *out is dflt then. */
enum nb_status nb_json_get_int(const cJSON *obj, const char *key, int64_t dflt, int64_t *out,
                               const char *name);
enum nb_status nb_json_get_num(const cJSON *obj, const char *key, double dflt, double *out,
                               const char *name);
enum nb_status nb_json_get_bool(const cJSON *obj, const char *key, int dflt, int *out,
                                const char *name);
/* String value (points into the cJSON tree) or dflt. */
enum nb_status nb_json_get_str(const cJSON *obj, const char *key, const char *dflt,
                               const char **out, const char *name);

#endif
