/* nibble probe — what this CPU can do, what the OS allows, and the weight path the
 * selector picks for it (runtime/probe.h, runtime/selector.h). Human output or --json:
 * the probe object plus the decision at top level (weight_path, kernel, head_bits,
 * bits_per_weight, runs_locally, verified, reasons). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/env.h"
#include "core/wformat.h"
#include "runtime/probe.h"
#include "runtime/selector.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble probe [--json] [--explain] [--priority P] [--target T] [--no-bw]\n"
               "\n"
               "  --json          one JSON object: the probe and the weight-path decision\n"
               "  --explain       print the reasons of the decision (each cites its record)\n"
               "  --priority P    speed | fidelity | memory (default speed; agents: fidelity)\n"
               "  --target T      host | phone (default host)\n"
               "  --no-bw         skip the ~1 s read-bandwidth measurement\n"
               "\n"
               "Records: docs/measurements/*.json compiled in, plus $NIBBLE_MEASUREMENTS/*.json.\n"
               "NIBBLE_WEIGHT_PATH=P overrides the decision.\n");
}

static void human_size(char *buf, size_t size, double bytes)
{
    if (bytes <= 0)
        snprintf(buf, size, "?");
    else if (bytes >= 1 << 30)
        snprintf(buf, size, "%.1f GiB", bytes / (1 << 30));
    else if (bytes >= 1 << 20)
        snprintf(buf, size, "%.0f MiB", bytes / (1 << 20));
    else
        snprintf(buf, size, "%.0f KiB", bytes / 1024);
}

static void print_human(const struct nb_probe *p, const struct nb_choice *c, const char *prio,
                        const char *target, int n_records, int explain)
{
    char flags[512], raw_flags[512] = "", a[32], b[32], d[32], m[32];
    nb_probe_flags_str(p, flags, sizeof flags);
    printf("cpu        %s (%s, family key %s)\n", p->model_name[0] ? p->model_name : "?", p->arch,
           p->family_key);
    printf("features   %s\n", flags[0] ? flags : "(none of interest)");
    if (!strcmp(p->arch, "x86_64")) {
        struct nb_probe q = *p;
        q.x86 = p->x86_cpuid;
        nb_probe_flags_str(&q, raw_flags, sizeof raw_flags);
        if (strcmp(raw_flags, flags) != 0)
            printf("cpuid      %s (OS does not enable all)\n", raw_flags);
        printf("os         xcr0 0x%llx; AMX tile data: %s\n", (unsigned long long)p->xcr0,
               p->amx_permitted < 0 ? "n/a"
               : p->amx_permitted   ? "permitted"
                                    : "refused");
    }
    printf("cores      %d physical, %d logical%s\n", p->n_physical, p->n_logical,
           p->n_logical > p->n_physical ? " (SMT)" : "");
    human_size(a, sizeof a, (double)p->l1d_bytes);
    human_size(b, sizeof b, (double)p->l2_bytes);
    human_size(d, sizeof d, (double)p->l3_bytes);
    human_size(m, sizeof m, (double)p->mem_total_bytes);
    printf("caches     L1d %s, L2 %s, L3 %s\n", a, b, d);
    printf("memory     %s\n", m);
    if (p->read_bw_gbs > 0)
        printf("read bw    %.1f GB/s (%d threads, measured now)\n", p->read_bw_gbs, p->bw_threads);
    else
        printf("read bw    not measured (--no-bw)\n");
    printf("\ndecision   %s for %s on %s: %s, kernel %s, %d-bit head, %.3f bits per weight, %s%s\n",
           "weight path", prio, target, nb_wpath_name(c->path), c->kernel, c->head_bits,
           c->bits_per_weight, c->verified ? "verified" : "unverified",
           c->runs_locally ? "" : ", does not run in nibble there");
    if (explain) {
        printf("records    %d loaded\n", n_records);
        for (int i = 0; i < c->n_reasons; i++)
            printf("  - %s\n", c->reasons[i]);
    } else {
        printf("           (nibble probe --explain for the reasons)\n");
    }
}

static int print_json(const struct nb_probe *p, const struct nb_choice *c, const char *prio,
                      int prio_given, const char *target, int n_records)
{
    cJSON *o = nb_probe_to_json(p);
    if (!o) return 0;
    cJSON_AddStringToObject(o, "priority", prio);
    cJSON_AddBoolToObject(o, "priority_given", prio_given);
    cJSON_AddStringToObject(o, "target", target);
    cJSON_AddStringToObject(o, "weight_path", nb_wpath_name(c->path));
    cJSON_AddStringToObject(o, "kernel", c->kernel);
    cJSON_AddStringToObject(o, "kernel_run", c->kernel_run);
    cJSON_AddNumberToObject(o, "head_bits", c->head_bits);
    cJSON_AddNumberToObject(o, "bits_per_weight", c->bits_per_weight);
    cJSON_AddBoolToObject(o, "runs_locally", c->runs_locally);
    cJSON_AddBoolToObject(o, "verified", c->verified);
    if (c->record)
        cJSON_AddStringToObject(o, "verified_by", c->record->source);
    else
        cJSON_AddNullToObject(o, "verified_by");
    cJSON_AddNumberToObject(o, "records_loaded", n_records);
    cJSON *r = cJSON_AddArrayToObject(o, "reasons");
    for (int i = 0; r && i < c->n_reasons; i++)
        cJSON_AddItemToArray(r, cJSON_CreateString(c->reasons[i]));
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s) return 0;
    printf("%s\n", s);
    free(s);
    return 1;
}

int cmd_probe(int argc, char **argv)
{
    const char *cmd = "probe";
    int json = 0, explain = 0, bw = 1, prio_given = 0, rc = 1, n_records = 0;
    enum nb_priority prio = NB_PRIORITY_SPEED;
    enum nb_target target = NB_TARGET_HOST;
    struct nb_record *records = NULL;
    static struct nb_probe p;
    static struct nb_choice c;
    int no_bw = 0;
    const char *prio_name = NULL, *target_name = NULL;
    const struct arg_opt opts[] = {
        OPT_FLAG("--json", &json),
        OPT_FLAG("--explain", &explain),
        OPT_FLAG("--no-bw", &no_bw),
        OPT_CHOICE("--priority", &prio_name, "speed|fidelity|memory"),
        OPT_CHOICE("--target", &target_name, "host|phone"),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    bw = !no_bw;
    if (prio_name) prio_given = nb_priority_from_name(prio_name, &prio);
    if (target_name) nb_target_from_name(target_name, &target);
    nb_probe_host(&p, bw);
    struct nb_select_overrides ov;
    app_env_select(&ov);
    if (nb_records_load(ov.records_dir, &records, &n_records) != NB_OK) goto fail;
    if (nb_select(&p, prio, prio_given, target, records, n_records, &ov, &c) != NB_OK) goto fail;
    if (json) {
        if (!print_json(&p, &c, nb_priority_name(prio), prio_given, nb_target_name(target),
                        n_records)) {
            fprintf(stderr, "nibble probe: out of memory\n");
            goto done;
        }
    } else {
        print_human(&p, &c, nb_priority_name(prio), nb_target_name(target), n_records, explain);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "nibble probe: %s\n", nb_last_error());
done:
    free(records);
    return rc;
}
