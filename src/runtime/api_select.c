/* runtime/api_select.c — nibble.h's kernel choice, how weights are held, the CPU probe and
 * the weight-path selector: plain-data copies of runtime/probe.h and runtime/selector.h,
 * weight paths as names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mmap.h"
#include "formats/nib.h"
#include "formats/source.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/api.h"
#include "runtime/probe.h"
#include "runtime/selector.h"

enum nb_status nb_set_isa(const char *isa, int allow_amx)
{
    return nb_kernels_configure(isa, allow_amx);
}

const char *nb_isa(void) { return nb_kernels_get()->isa; }

void nb_set_weight_copy(int on) { nb_file_set_copy(on); }

int nb_model_weights_copied(const struct nb_model *model)
{
    const struct nb_source *s = model ? nb_model_source(model) : NULL;
    if (!s || s->kind != NB_FILE_NIB) return 0;
    return s->file.anon || (s->nib && nb_nib_in_memory(s->nib));
}

enum nb_status nb_api_priority(const char *name, enum nb_priority *out)
{
    *out = NB_PRIORITY_BALANCED;
    if (!name || nb_priority_from_name(name, out)) return NB_OK;
    return nb_set_error(NB_ERR_INVALID_ARG,
                        "priority '%s' is not one of balanced, speed, fidelity, memory", name);
}

enum nb_status nb_api_target(const char *name, enum nb_target *out)
{
    *out = NB_TARGET_HOST;
    if (!name || nb_target_from_name(name, out)) return NB_OK;
    return nb_set_error(NB_ERR_INVALID_ARG, "target '%s' is not one of host, phone, arm", name);
}

struct nb_select_params nb_select_default_params(void)
{
    return (struct nb_select_params){.size = sizeof(struct nb_select_params)};
}

void nb_api_selection(struct nb_selection *out, const struct nb_choice *c, enum nb_priority prio,
                      int prio_given, enum nb_target target, int n_records)
{
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    nb_api_str(out->weight_path, sizeof out->weight_path, nb_wpath_name(c->path));
    nb_api_str(out->kernel, sizeof out->kernel, c->kernel);
    nb_api_str(out->kernel_run, sizeof out->kernel_run, c->kernel_run);
    out->head_bits = c->head_bits;
    nb_api_str(out->recipe, sizeof out->recipe, c->recipe);
    out->gptq = c->gptq;
    nb_api_str(out->record_key, sizeof out->record_key, c->record_key);
    out->bits_per_weight = c->bits_per_weight;
    out->runs_locally = c->runs_locally;
    out->verified = c->verified;
    if (c->record) nb_api_str(out->verified_by, sizeof out->verified_by, c->record->source);
    nb_api_str(out->priority, sizeof out->priority, nb_priority_name(prio));
    out->priority_given = prio_given;
    nb_api_str(out->target, sizeof out->target, nb_target_name(target));
    out->n_records = n_records;
    out->n_reasons = c->n_reasons < NB_SELECTION_MAX_REASONS ? c->n_reasons
                                                             : NB_SELECTION_MAX_REASONS;
    for (int i = 0; i < out->n_reasons; i++)
        nb_api_str(out->reasons[i], sizeof out->reasons[i], c->reasons[i]);
}

/* The probe as nibble.h's plain data, its JSON object included. */
static enum nb_status probe_info(struct nb_probe_info *out, const struct nb_probe *p)
{
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    nb_api_str(out->arch, sizeof out->arch, p->arch);
    nb_api_str(out->vendor, sizeof out->vendor, p->vendor);
    out->family = p->family;
    out->model = p->model;
    nb_api_str(out->cpu_name, sizeof out->cpu_name, p->model_name);
    nb_api_str(out->family_key, sizeof out->family_key, p->family_key);
    nb_probe_cpu_key(p, out->cpu_key, sizeof out->cpu_key, NULL);
    nb_probe_flags_str(p, out->features, sizeof out->features);
    if (!strcmp(p->arch, "x86_64")) { /* the flags of raw CPUID, whatever the OS enables */
        struct nb_probe q = *p;
        q.x86 = p->x86_cpuid;
        nb_probe_flags_str(&q, out->cpuid_features, sizeof out->cpuid_features);
    }
    out->xcr0 = p->xcr0;
    out->amx_permitted = p->amx_permitted;
    out->n_logical = p->n_logical;
    out->n_physical = p->n_physical;
    out->l1d_bytes = p->l1d_bytes;
    out->l2_bytes = p->l2_bytes;
    out->l3_bytes = p->l3_bytes;
    out->mem_total_bytes = p->mem_total_bytes;
    out->read_bw_gbs = p->read_bw_gbs;
    out->bw_threads = p->bw_threads;
    cJSON *o = nb_probe_to_json(p);
    char *js = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!js) return nb_set_error(NB_ERR_NOMEM, "probe: out of memory");
    size_t n = strlen(js);
    enum nb_status st = NB_OK;
    if (n + 1 > sizeof out->json)
        st = nb_set_error(NB_ERR_INTERNAL, "probe: its JSON (%zu bytes) outgrew the %zu of "
                          "struct nb_probe_info", n, sizeof out->json);
    else
        memcpy(out->json, js, n + 1);
    free(js);
    return st;
}

enum nb_status nb_api_select(const struct nb_select_params *sp, struct nb_probe *p,
                             struct nb_choice *c, struct nb_selection *out)
{
    struct nb_record *recs = NULL;
    enum nb_priority prio;
    enum nb_target target;
    int n = 0;
    enum nb_status st;
    if ((st = nb_api_priority(sp->priority, &prio)) || (st = nb_api_target(sp->target, &target)))
        return st;
    nb_probe_host(p, sp->measure_bw);
    struct nb_select_overrides ov = {sp->path, sp->path_from, sp->records_dir};
    if ((st = nb_records_load(sp->records_dir, &recs, &n))) goto done;
    if ((st = nb_select(p, prio, sp->priority != NULL, target, recs, n, &ov, c))) goto done;
    nb_api_selection(out, c, prio, sp->priority != NULL, target, n);
done:
    c->record = NULL; /* it pointed into recs */
    free(recs);
    return st;
}

enum nb_status nb_select_weight_path(const struct nb_select_params *params,
                                     struct nb_probe_info *probe, struct nb_selection *sel)
{
    static _Thread_local struct nb_probe p; /* large: off the stack */
    static _Thread_local struct nb_choice c;
    static _Thread_local struct nb_probe_info pi;
    static _Thread_local struct nb_selection s;
    struct nb_select_params sp = nb_select_default_params();
    enum nb_status st = nb_params_in(&sp, sizeof sp, params, "nb_select_params");
    if (st || (st = nb_api_select(&sp, &p, &c, &s))) return st;
    if (probe && (st = probe_info(&pi, &p))) return st;
    nb_api_out(probe, &pi, sizeof pi);
    nb_api_out(sel, &s, sizeof s);
    return NB_OK;
}
