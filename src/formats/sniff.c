/* formats/sniff.c — what kind of model a path holds, from its first bytes. */
#include "formats/sniff.h"

#include <string.h>
#include <sys/stat.h>

#include "core/mmap.h"
#include "formats/llama2c.h"
#include "formats/nib.h"

enum nb_status nb_sniff_path(const char *path, enum nb_file_kind *out)
{
    struct stat sb;
    *out = NB_FILE_UNKNOWN;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        *out = NB_FILE_DIR;
        return NB_OK;
    }
    struct nb_mapped_file f;
    enum nb_status st = nb_file_map(&f, path);
    if (st) return st;
    if (f.size >= 8 && !memcmp(f.data, NB_NIB_MAGIC, 8)) *out = NB_FILE_NIB;
    else if (f.size >= 4 && !memcmp(f.data, "GGUF", 4)) *out = NB_FILE_GGUF;
    else if (nb_llama2c_sniff(f.data, f.size)) *out = NB_FILE_LLAMA2C;
    nb_file_unmap(&f);
    return NB_OK;
}
