/* nibble cache — the warm-start cache of packed models: list it, clear it.
 *
 *   nibble cache list     one line per entry: size, weight path, source, file
 *   nibble cache clear    remove every entry no writer holds (running models keep theirs)
 *   nibble cache dir      print the folder ($XDG_CACHE_HOME/nibble, else ~/.cache/nibble) */
#include <stdio.h>
#include <string.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/env.h"
#include "nibble.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble cache list | clear | dir\n"
               "\n"
               "The warm-start cache holds float models quantized on first use by run and\n"
               "bench ($XDG_CACHE_HOME/nibble, else ~/.cache/nibble).\n"
               "  list    one line per entry: size, weight path, source model, file\n"
               "  clear   remove every entry that no nibble is writing right now\n"
               "  dir     print the folder\n");
}

struct totals {
    int n;
    unsigned long long bytes;
};

static void print_entry(const char *path, uint64_t bytes, const char *weight_path,
                        const char *source, void *user)
{
    struct totals *t = user;
    printf("%9.1f MiB  %-6s  %s  %s\n", (double)bytes / (1 << 20), weight_path ? weight_path : "?",
           source ? source : "(unreadable: rebuilt on next use)", path);
    t->n++;
    t->bytes += bytes;
}

int cmd_cache(int argc, char **argv)
{
    const char *cmd = "cache";
    for (int i = 1; i < argc; i++) /* nibble cache --help, nibble cache clear --help */
        if (arg_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
    if (argc != 2) {
        usage(stderr);
        return 1;
    }
    char dir[3072];
    const char *why;
    if (!app_env_cache_dir(dir, sizeof dir, &why)) {
        fprintf(stderr, "nibble %s: no cache folder: %s\n", cmd, why);
        return 1;
    }
    if (!strcmp(argv[1], "dir")) {
        printf("%s\n", dir);
        return 0;
    }
    if (!strcmp(argv[1], "list")) {
        struct totals t = {0};
        if (nb_cache_entries(dir, print_entry, &t) != NB_OK) {
            fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
            return 1;
        }
        fprintf(stderr, "nibble %s: %d entries, %.1f MiB in %s\n", cmd, t.n,
                (double)t.bytes / (1 << 20), dir);
        return 0;
    }
    if (!strcmp(argv[1], "clear")) {
        int removed, busy;
        uint64_t freed;
        int ok = nb_cache_clear(dir, &removed, &busy, &freed) == NB_OK;
        if (!ok) fprintf(stderr, "nibble %s: %s\n", cmd, nb_last_error());
        printf("removed %d files (%.1f MiB) from %s", removed, (double)freed / (1 << 20), dir);
        if (busy) printf("; %d being written by another nibble, left alone", busy);
        printf("\n");
        return ok ? 0 : 1;
    }
    fprintf(stderr, "nibble %s: unknown action '%s' (list, clear or dir)\n", cmd, argv[1]);
    return 1;
}
