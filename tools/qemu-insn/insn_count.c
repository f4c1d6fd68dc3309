/* insn_count — a qemu TCG plugin (user mode) that counts the guest instructions a
 * program executes, for bench/arm_insn.sh (instructions per token under emulation:
 * docs/arm.md). Host-side code: built with the host compiler, loaded by qemu-aarch64:
 *   qemu-aarch64 -cpu max -plugin build/qemu-insn/libinsn_count.so,out=FILE prog args
 * At exit it writes "insns N" (a decimal count) to FILE, or through qemu_plugin_outs
 * (qemu's log, shown with -d plugin) when no out= is given. Errors go to stderr.
 *
 * Debian's qemu-user 7.2 exports the plugin API but ships no qemu-plugin.h, so the few
 * calls used here are declared below from qemu's documented plugin API (docs/devel/
 * tcg-plugins.rst), API version 1, the one 7.2 accepts. Every guest thread (vCPU) adds
 * into one atomic counter, once per executed translation block, by the block's
 * instruction count: exact, whatever the number of threads.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the qemu plugin API (user-visible declarations, version 1) ---- */
#define PLUGIN_EXPORT __attribute__((visibility("default")))
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;                  /* opaque: a translation block being translated */
typedef struct qemu_info_t qemu_info_t; /* opaque here: never read */
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);
/* qemu refuses a plugin that does not name the API version it was written for */
PLUGIN_EXPORT int qemu_plugin_version = 1;
PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                      char **argv);
/* ---- */

static _Atomic uint64_t g_insns;
static char g_out[4096]; /* out=FILE, or "" for qemu's log */

/* Runs before every execution of a block: adds its instruction count (the userdata). */
static void on_tb_exec(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    atomic_fetch_add_explicit(&g_insns, (uint64_t)(uintptr_t)userdata, memory_order_relaxed);
}

/* Runs once per translated block: attaches on_tb_exec with the block's length. */
static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
                                         (void *)(uintptr_t)n);
}

/* Runs when the guest exits: writes the total to out= (stderr when it cannot) or qemu's log. */
static void on_guest_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    char line[64];
    snprintf(line, sizeof line, "insns %llu\n",
             (unsigned long long)atomic_load_explicit(&g_insns, memory_order_relaxed));
    if (g_out[0]) {
        FILE *f = fopen(g_out, "w");
        if (f) {
            fputs(line, f);
            if (fclose(f) == 0) return;
        }
        fprintf(stderr, "insn_count: cannot write %s: %s", g_out, line);
        return;
    }
    qemu_plugin_outs(line);
}

/* Entry point qemu calls after loading the plugin: argv holds "key=value" options
 * (only out=FILE). Returns 0, or -1 (qemu then stops) on an unknown option. */
PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                      char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4) && strlen(argv[i] + 4) < sizeof g_out) {
            strcpy(g_out, argv[i] + 4);
        } else {
            fprintf(stderr, "insn_count: unknown option '%s' (only out=FILE)\n", argv[i]);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_guest_exit, NULL);
    return 0;
}
