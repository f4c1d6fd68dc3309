/* runtime/api.h — helpers shared by the files that implement nibble.h's versioned
 * structs (api_*.c, open.c): each struct starts with `size`, and the library reads or
 * writes only that many bytes of the caller's copy. */
#ifndef NB_RUNTIME_API_H
#define NB_RUNTIME_API_H

#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "core/params.h"
#include "runtime/selector.h"

/* The library's full output into the caller's struct (which may be shorter or longer:
 * its size field says). NULL dst: not wanted. */
static inline void nb_api_out(void *dst, const void *src, size_t src_size)
{
    if (!dst) return;
    size_t n;
    memcpy(&n, dst, sizeof n);
    if (n > sizeof(size_t))
        memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
               (n < src_size ? n : src_size) - sizeof(size_t));
}

/* A string into a fixed buffer, cut if it must be. */
static inline void nb_api_str(char *dst, size_t size, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= size) n = size - 1;
    if (n) memcpy(dst, s, n);
    dst[n] = '\0';
}

/* The public selection from the selector's choice. */
struct nb_selection;
void nb_api_selection(struct nb_selection *out, const struct nb_choice *c, enum nb_priority prio,
                      int prio_given, enum nb_target target, int n_records);

/* Parse the names of sp, probe this host, load the records and select: the decision in
 * *c (its record pointer cleared: the records are freed) and *out. */
struct nb_select_params;
enum nb_status nb_api_select(const struct nb_select_params *sp, struct nb_probe *p,
                             struct nb_choice *c, struct nb_selection *out);

/* "auto" for a model, as nb_model_open and nb_model_quantize both resolve it (one
 * default build, whichever call makes it): the selector's choice for `params` (a
 * quantized GGUF or an asymmetric GPTQ / AWQ checkpoint keeps its codes on w4a16 unless
 * the priority is speed) into qo: the path; the recipe and head width unless qo already
 * has a recipe or a bits budget; GPTQ with act-order on calib_path when the choice asks
 * for it and a text is given. The decision in *sel. */
struct nb_quantize_opts;
struct nb_source;
enum nb_status nb_auto_quantize_opts(struct nb_source *model,
                                     const struct nb_select_params *params,
                                     const char *calib_path, struct nb_quantize_opts *qo,
                                     struct nb_selection *sel);

/* Priority and target names into the selector's enums; NB_ERR_INVALID_ARG naming the
 * bad one. */
enum nb_status nb_api_priority(const char *name, enum nb_priority *out);
enum nb_status nb_api_target(const char *name, enum nb_target *out);

#endif
