/* formats/sniff.h — what kind of model a path holds, from its first bytes (not its name). */
#ifndef NB_FORMATS_SNIFF_H
#define NB_FORMATS_SNIFF_H

#include "core/error.h"

enum nb_file_kind {
    NB_FILE_UNKNOWN = 0,
    NB_FILE_DIR,     /* a directory (Hugging Face layout) */
    NB_FILE_GGUF,
    NB_FILE_NIB,
    NB_FILE_LLAMA2C, /* a plausible llama2.c checkpoint header */
};

/* NB_ERR_IO (naming the path) when it cannot be opened; else NB_OK and *out. */
enum nb_status nb_sniff_path(const char *path, enum nb_file_kind *out);

#endif
