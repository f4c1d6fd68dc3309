/* formats/json.c — JSON files through cJSON, with errors that say where.
 *
 * cJSON reports a syntax error as a pointer into the buffer (through
 * return_parse_end, which unlike cJSON_GetErrorPtr() is thread-safe); we turn it
 * into a 1-based line and column. The buffer is always copied into a
 * NUL-terminated one first, so cJSON never reads past the caller's bytes.
 */
#include "formats/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/mmap.h"

/* Line and column (1-based) of byte `pos` of `buf`. */
static void line_col(const char *buf, size_t pos, size_t *line, size_t *col)
{
    size_t l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (buf[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}

enum nb_status nb_json_parse(const char *buf, size_t len, const char *name, cJSON **out)
{
    enum nb_status st = NB_OK;
    char *copy = NULL;
    *out = NULL;
    if (!name) name = "<json>";
    if (!buf && len) return nb_set_error(NB_ERR_INVALID_ARG, "%s: NULL buffer", name);
    if (len > NB_JSON_MAX_FILE) {
        return nb_set_error(NB_ERR_FORMAT, "%s: JSON of %zu bytes is larger than the limit of %u",
                            name, len, NB_JSON_MAX_FILE);
    }
    const char *nul = len ? memchr(buf, '\0', len) : NULL;
    if (nul) {
        size_t line, col;
        line_col(buf, (size_t)(nul - buf), &line, &col);
        return nb_set_error(NB_ERR_FORMAT, "%s:%zu:%zu: NUL byte in JSON text", name, line, col);
    }
    copy = malloc(len + 1);
    if (!copy) return nb_set_error(NB_ERR_NOMEM, "%s: out of memory", name);
    if (len) memcpy(copy, buf, len);
    copy[len] = '\0';
    const char *end = NULL;
    /* The length includes the terminating NUL: cJSON's require_null_terminated
     * check wants to see it. */
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
    if (!root) {
        size_t pos = (end && end >= copy && end <= copy + len) ? (size_t)(end - copy) : len;
        size_t line, col;
        line_col(copy, pos, &line, &col);
        if (pos >= len)
            st = nb_set_error(NB_ERR_FORMAT, "%s:%zu:%zu: JSON syntax error: unexpected end", name,
                              line, col);
        else
            st = nb_set_error(NB_ERR_FORMAT, "%s:%zu:%zu: JSON syntax error near '%.16s'", name,
                              line, col, copy + pos);
        goto fail;
    }
    free(copy);
    *out = root;
    return NB_OK;
fail:
    free(copy);
    return st;
}

enum nb_status nb_json_load(const char *path, cJSON **out)
{
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    enum nb_status st = nb_file_read_all(path, NB_JSON_MAX_FILE, &buf, &len);
    if (st != NB_OK) return st;
    st = nb_json_parse(buf, len, path, out);
    free(buf);
    return st;
}

/* The member `key` of `obj`, or NULL when absent; an `obj` that is not an object
 * is an error. */
static enum nb_status member(const cJSON *obj, const char *key, const char *name,
                             const cJSON **item)
{
    *item = NULL;
    if (!name) name = "<json>";
    if (!obj) return NB_OK;
    if (!cJSON_IsObject(obj))
        return nb_set_error(NB_ERR_FORMAT, "%s: looking up '%s' in a value that is not an object",
                            name, key);
    *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    return NB_OK;
}

enum nb_status nb_json_get_int(const cJSON *obj, const char *key, int64_t dflt, int64_t *out,
                               const char *name)
{
    const cJSON *it;
    *out = dflt;
    enum nb_status st = member(obj, key, name, &it);
    if (st != NB_OK || !it) return st;
    if (!name) name = "<json>";
    if (!cJSON_IsNumber(it))
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' must be an integer", name, key);
    double v = it->valuedouble;
    /* 2^63 is exactly representable; every double below it converts safely. */
    if (!isfinite(v) || v != floor(v) || v < -9223372036854775808.0 || v >= 9223372036854775808.0)
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' must be an integer in the int64 range, not %g",
                            name, key, v);
    *out = (int64_t)v;
    return NB_OK;
}

enum nb_status nb_json_get_num(const cJSON *obj, const char *key, double dflt, double *out,
                               const char *name)
{
    const cJSON *it;
    *out = dflt;
    enum nb_status st = member(obj, key, name, &it);
    if (st != NB_OK || !it) return st;
    if (!cJSON_IsNumber(it))
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' must be a number", name ? name : "<json>",
                            key);
    *out = it->valuedouble;
    return NB_OK;
}

enum nb_status nb_json_get_bool(const cJSON *obj, const char *key, int dflt, int *out,
                                const char *name)
{
    const cJSON *it;
    *out = dflt;
    enum nb_status st = member(obj, key, name, &it);
    if (st != NB_OK || !it) return st;
    if (!cJSON_IsBool(it))
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' must be true or false", name ? name : "<json>",
                            key);
    *out = cJSON_IsTrue(it) ? 1 : 0;
    return NB_OK;
}

enum nb_status nb_json_get_str(const cJSON *obj, const char *key, const char *dflt,
                               const char **out, const char *name)
{
    const cJSON *it;
    *out = dflt;
    enum nb_status st = member(obj, key, name, &it);
    if (st != NB_OK || !it) return st;
    if (!cJSON_IsString(it) || !it->valuestring)
        return nb_set_error(NB_ERR_FORMAT, "%s: '%s' must be a string", name ? name : "<json>",
                            key);
    *out = it->valuestring;
    return NB_OK;
}
