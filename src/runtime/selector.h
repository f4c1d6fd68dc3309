/* runtime/selector.h — choose the weight path for a device, from its probe and the
 * measurement records (docs/measurements/<name>.json, written by `nibble bench --record`).
 *
 * Rules (docs/selector.md has the reasoning):
 *   target phone            w8a16 export; nibble does not run there; never verified.
 *   target arm              the choice for an Arm CPU: this host's when it is one, else
 *                           a generic armv8.2-a CPU with dotprod (the reasons say what
 *                           an armv8.0 core without it would run); never verified.
 *   NIBBLE_WEIGHT_PATH=P     P, whatever the rules below say (the reasons say so).
 *   priority fidelity       w4a16 with an 8-bit head.
 *   priority memory         the int4 path with the fewest bits per weight, 4-bit head.
 *   priority speed          w4a8 / w4a16, whichever recorded the faster tg with the
 *                           record keys of this CPU (same model shape and threads);
 *                           without such a pair: w4a8 where it has a dot-product kernel
 *                           (VNNI, AVX2, AMX, Arm asimddp), else w4a16.
 * No NEON kernel has been measured on Arm hardware: every Arm choice says "unverified"
 * until a record with its key exists (tests ran under qemu-aarch64 only).
 * "Verified" means a record exists with the record key (runtime/probe.h: vendor, family,
 * model, path, kernel and the features it uses) of the run the selector predicts here.
 * Every reason that uses a record cites its file. A record that cannot be keyed is
 * ignored, and the reasons say which and why.
 * Records of tests run on a filled context (bench -d, n_depth > 0) are loaded but are
 * no evidence: the rules compare speeds from an empty cache.
 */
#ifndef NB_RUNTIME_SELECTOR_H
#define NB_RUNTIME_SELECTOR_H

#include <stddef.h>

#include "core/error.h"
#include "kernels/kernels.h"
#include "core/wformat.h"
#include "runtime/probe.h"

enum nb_priority { NB_PRIORITY_SPEED = 0, NB_PRIORITY_FIDELITY, NB_PRIORITY_MEMORY,
                   NB_PRIORITY_BALANCED };
enum nb_target { NB_TARGET_HOST = 0, NB_TARGET_PHONE, NB_TARGET_ARM };

/* "speed" | "fidelity" | "memory"; "host" | "phone" | "arm". from_name: 1 and *out on a
 * match. */
const char *nb_priority_name(enum nb_priority p);
int nb_priority_from_name(const char *name, enum nb_priority *out);
const char *nb_target_name(enum nb_target t);
int nb_target_from_name(const char *name, enum nb_target *out);

/* ---------------------------------------------------------------- records */

struct nb_record_figs {
    int present;  /* the record has this test */
    int n_tokens; /* n_prompt (pp) or n_gen (tg) */
    double best_ts, median_ts, mean_ts, stddev_ts, spread_pct;
    int samples;
};

/* One measurement record (one model, one weight path, one thread count, one CPU). */
struct nb_record {
    char source[128];    /* file name it came from ("x.json") */
    char family_key[64]; /* cpu.family_key (the old coarse key; "" if absent): not matched */
    char cpu_key[NB_CPU_KEY_LEN]; /* cpu.cpu_key, or made from cpu.vendor/family/model */
    char key[NB_RECORD_KEY_LEN];  /* record_key, or derived from the cpu fields and kernel
                                     (older records); "": cannot be keyed, never matched */
    int key_derived;              /* 1: key derived (the record has no record_key) */
    char key_note[200];           /* key "": why */
    char cpu_name[128];  /* cpu.name */
    char kernel[32];     /* the kernel that ran ("avx512vnni", "avx2", "ref", ...) */
    enum nb_wpath path;  /* weight_path */
    int head_bits;       /* 0: unknown */
    double bits_per_weight;
    int threads;
    char commit[48];
    char date[32];
    char model_file[128];
    char arch[32]; /* model_shape.arch */
    int n_layers, n_embd, n_vocab;
    struct nb_record_figs pp, tg;
    int n_depth; /* tokens in the context under the tests (bench -d; 0: none, as in
                    records written before depth existed). Only 0 is evidence. */
    double read_bw_gbs, roofline_fraction;
};

/* Parse one record (the JSON text of a docs/measurements file). `source` names it in
 * errors and in reasons. Required: kernel, weight_path (a known path), threads >= 1,
 * and a tg or pp object with a positive best_ts; n_depth, when present, a whole number
 * >= 0. NB_ERR_FORMAT with "record SOURCE: ..." naming the first problem.
 * The key: the record's `record_key` string when it has one (records written since
 * keys existed), else derived with nb_record_key from cpu.vendor, cpu.family,
 * cpu.model, cpu.flags, weight_path and kernel (the ISA level the run used is read off
 * the kernel name and the flags). A record without what that needs still parses, with
 * key "" and key_note saying why: the selector ignores it and says so. */
enum nb_status nb_record_parse(const char *json, size_t len, const char *source,
                               struct nb_record *out);

/* The records this build was compiled with (docs/measurements/<name>.json at configure
 * time) plus those in the folder named by $NIBBLE_MEASUREMENTS (if set), every <name>.json in it. A
 * record that does not parse is skipped with a warning on stderr (log). *out is malloc'd (free()
 * it; may be NULL when *n == 0). */
enum nb_status nb_records_load(const char *extra_dir, struct nb_record **out, int *n);
/* Only the compiled-in ones (same ownership). */
enum nb_status nb_records_load_builtin(struct nb_record **out, int *n);
/* Append the *.json records of a folder to *recs (realloc'd), in name order. */
enum nb_status nb_records_load_dir(const char *dir, struct nb_record **recs, int *n);

/* The commit this build was configured from (`git rev-parse --short HEAD`), or "unknown". */
const char *nb_build_commit(void);

/* ---------------------------------------------------------------- selection */

#define NB_SELECT_MAX_REASONS 12
#define NB_SELECT_REASON_LEN  400

struct nb_choice {
    enum nb_wpath path;
    char kernel[64];        /* what to call it: "avx512vnni", "amx (not built: avx512vnni)" */
    char kernel_run[32];    /* the kernel this build dispatches for it ("ref": scalar) */
    int head_bits;          /* 4 or 8 (output head) */
    char recipe[16];        /* runtime/recipe.h: bits per matrix */
    int gptq;               /* quantize with GPTQ (act-order) on a calibration text */
    double bits_per_weight; /* of the linear layers, from the layout (2048x2048, G=128) */
    int runs_locally;       /* nibble runs this path on the device (maybe on the slow ref) */
    int verified;           /* a record with record_key: same CPU, path, kernel, features */
    char cpu_key[NB_CPU_KEY_LEN];     /* the probe's ("" if it has none) */
    char record_key[NB_RECORD_KEY_LEN]; /* of this choice on this probe ("": none) */
    const struct nb_record *record; /* that record (points into the caller's array) */
    int n_reasons;
    char reasons[NB_SELECT_MAX_REASONS][NB_SELECT_REASON_LEN];
};

/* What the caller overrides (the CLI: from NIBBLE_WEIGHT_PATH and NIBBLE_MEASUREMENTS;
 * the library reads no environment). Any field may be NULL. */
struct nb_select_overrides {
    const char *path;        /* a weight-path name that replaces the choice ("auto": none) */
    const char *path_source; /* who said so, quoted in the reason and errors */
    const char *records_dir; /* extra measurement records, besides the compiled-in ones */
};

/* Choose a weight path. priority_given: 0 when the user did not say (then the reasons
 * carry the agentic-use warning). ov (may be NULL): see above; NB_ERR_INVALID_ARG when
 * ov->path names no weight path. */
enum nb_status nb_select(const struct nb_probe *probe, enum nb_priority priority,
                         int priority_given, enum nb_target target, const struct nb_record *records,
                         int n_records, const struct nb_select_overrides *ov,
                         struct nb_choice *out);

/* The kernel name this build dispatches for `path` on a CPU with these features at its
 * best level (nb_kernels_fill decides, as for the dispatcher): "avx512vnni",
 * "avxvnni", "avx2", "avx512", "ref", and "amx" for w4a8 where the probe
 * has AMX-INT8 + AVX-512 VNNI and amx_permitted == 1 (the dispatcher still self-checks
 * it on first use and keeps VNNI if that fails or NIBBLE_AMX=0). */
const char *nb_select_kernel_for(const struct nb_probe *probe, enum nb_wpath path);
/* The same name read off a filled kernel table (what really ran, a level cap included). */
const char *nb_select_kernel_of_table(const struct nb_kernels *k, enum nb_wpath path);
/* The record key (runtime/probe.h) of `path` on the probe: nb_select_kernel_for's kernel
 * at this build's best level for it. Returns nb_record_key's answer. */
int nb_select_record_key(const struct nb_probe *probe, enum nb_wpath path, char *buf,
                         size_t size, const char **why);

/* For `--path auto`: probe this host (no bandwidth), load the records, select.
 * name: "auto" or a path name. *path is set; *head_bits is set from the choice when
 * head_bits is non-NULL and *head_bits == 0 (not chosen by the user). `choice` (may
 * be NULL) receives the whole decision. NB_ERR_INVALID_ARG for an unknown name. */
enum nb_status nb_select_resolve(const char *name, enum nb_priority priority, int priority_given,
                                 const struct nb_select_overrides *ov, enum nb_wpath *path,
                                 int *head_bits, struct nb_choice *choice);

#endif
