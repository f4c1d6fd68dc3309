/* nibble probe — what this CPU can do, what the OS allows, and the weight path the
 * selector picks for it (nb_select_weight_path). Human output or --json:
 * the probe object plus the decision at top level (weight_path, kernel, head_bits,
 * bits_per_weight, runs_locally, verified, reasons). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "app/args.h"
#include "app/commands.h"
#include "app/env.h"
#include "nibble.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nibble probe [--json] [--explain] [--priority P] [--target T] [--no-bw]\n"
               "\n"
               "  --json          one JSON object: the probe and the weight-path decision\n"
               "  --explain       print the reasons of the decision (each cites its record)\n"
               "  --priority P    balanced | speed | fidelity | memory (default balanced;\n"
               "                  agents: fidelity)\n"
               "  --target T      host | arm | phone (default host; arm: an Arm CPU, this\n"
               "                  one when it is, else one with dotprod: docs/arm.md)\n"
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

static void print_human(const struct nb_probe_info *p, const struct nb_selection *c,
                        int explain)
{
    char a[32], b[32], d[32], m[32];
    printf("cpu        %s (%s, cpu key %s)\n", p->cpu_name[0] ? p->cpu_name : "?", p->arch,
           p->cpu_key[0] ? p->cpu_key : "none: records cannot vouch for it");
    printf("features   %s\n", p->features[0] ? p->features : "(none of interest)");
    if (!strcmp(p->arch, "x86_64")) {
        if (strcmp(p->cpuid_features, p->features) != 0)
            printf("cpuid      %s (OS does not enable all)\n", p->cpuid_features);
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
    /* an int4 choice's head and embeddings are its recipe's (balanced: Q6_K where the device
     * has the kernel), not the selector's head_bits */
    char head[48];
    const int int4 = !strcmp(c->weight_path, "w4a8") || !strcmp(c->weight_path, "w4a16");
    if (c->recipe[0] && int4)
        snprintf(head, sizeof head, "recipe %s", c->recipe);
    else
        snprintf(head, sizeof head, "%d-bit head", c->head_bits);
    printf("\ndecision   %s for %s on %s: %s, kernel %s, %s, %.3f bits per weight, %s%s\n",
           "weight path", c->priority, c->target, c->weight_path, c->kernel, head,
           c->bits_per_weight, c->verified ? "verified" : "unverified",
           c->runs_locally ? "" : ", does not run in nibble there");
    if (c->record_key[0])
        printf("record key %s%s%s\n", c->record_key, c->verified ? ": " : " (no record has it)",
               c->verified ? c->verified_by : "");
    if (explain) {
        printf("records    %d loaded\n", c->n_records);
        for (int i = 0; i < c->n_reasons; i++)
            printf("  - %s\n", c->reasons[i]);
    } else {
        printf("           (nibble probe --explain for the reasons)\n");
    }
}

/* The probe's JSON object (the library's) plus the decision at top level. */
static int print_json(const struct nb_probe_info *p, const struct nb_selection *c)
{
    cJSON *o = cJSON_Parse(p->json);
    if (!o) return 0;
    cJSON_AddStringToObject(o, "priority", c->priority);
    cJSON_AddBoolToObject(o, "priority_given", c->priority_given);
    cJSON_AddStringToObject(o, "target", c->target);
    cJSON_AddStringToObject(o, "weight_path", c->weight_path);
    cJSON_AddStringToObject(o, "kernel", c->kernel);
    cJSON_AddStringToObject(o, "kernel_run", c->kernel_run);
    cJSON_AddNumberToObject(o, "head_bits", c->head_bits);
    cJSON_AddNumberToObject(o, "bits_per_weight", c->bits_per_weight);
    cJSON_AddBoolToObject(o, "runs_locally", c->runs_locally);
    cJSON_AddBoolToObject(o, "verified", c->verified);
    if (c->record_key[0])
        cJSON_AddStringToObject(o, "record_key", c->record_key);
    else
        cJSON_AddNullToObject(o, "record_key");
    if (c->verified_by[0])
        cJSON_AddStringToObject(o, "verified_by", c->verified_by);
    else
        cJSON_AddNullToObject(o, "verified_by");
    cJSON_AddNumberToObject(o, "records_loaded", c->n_records);
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
    int json = 0, explain = 0, no_bw = 0;
    static struct nb_probe_info p = {.size = sizeof p};
    static struct nb_selection c = {.size = sizeof c};
    struct nb_select_params sp = nb_select_default_params();
    const struct arg_opt opts[] = {
        OPT_FLAG("--json", &json),
        OPT_FLAG("--explain", &explain),
        OPT_FLAG("--no-bw", &no_bw),
        OPT_CHOICE("--priority", &sp.priority, "balanced|speed|fidelity|memory"),
        OPT_CHOICE("--target", &sp.target, "host|arm|phone"),
        OPT_END};
    int parsed = arg_parse(cmd, opts, argc, argv, usage);
    if (parsed <= 0) return parsed < 0 ? 1 : 0;
    sp.measure_bw = !no_bw;
    app_env_select(&sp);
    if (nb_select_weight_path(&sp, &p, &c) != NB_OK) {
        fprintf(stderr, "nibble probe: %s\n", nb_last_error());
        return 1;
    }
    if (json) {
        if (!print_json(&p, &c)) {
            fprintf(stderr, "nibble probe: out of memory\n");
            return 1;
        }
    } else {
        print_human(&p, &c, explain);
    }
    return 0;
}
