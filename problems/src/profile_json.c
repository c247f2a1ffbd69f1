/* A profile's raw data as JSON, kept in the trajectory store (the result's profile.raw) for
 * ablations and read back by `pkgym eval` to draw the timeline. */
#include "pk_profile.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static json_t *num(double v) {
    return v < 0 ? json_null() : json_real(v);
}

static double get(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

char *pk_profile_data_to_json(const pk_profile_data *d) {
    json_t *kernels = json_array(), *iv = json_array();
    for (int i = 0; i < d->n_kernels; i++) {
        const pk_prof_kernel *k = &d->kernels[i];
        json_t *stalls = json_object();
        for (int s = 0; s < k->n_stalls; s++)
            json_object_set_new(stalls, k->stall[s], json_real(k->stall_val[s]));
        json_array_append_new(
            kernels, json_pack("{s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "rank",
                               k->rank, "name", k->name, "duration_ns", num(k->duration_ns),
                               "dram_pct", num(k->dram_pct), "sm_pct", num(k->sm_pct), "tensor_pct",
                               num(k->tensor_pct), "fma_pct", num(k->fma_pct), "occupancy_pct",
                               num(k->occupancy_pct), "nvl_tx_bytes", num(k->nvl_tx_bytes),
                               "nvl_rx_bytes", num(k->nvl_rx_bytes), "stalls", stalls));
    }
    static const char *const kinds[] = {"compute", "comm", "copy"};
    for (int i = 0; i < d->n_iv; i++) {
        const pk_prof_interval *v = &d->iv[i];
        json_array_append_new(iv, json_pack("{s:i, s:s, s:i, s:f, s:f, s:s}", "rank", v->rank,
                                            "kind", kinds[v->kind], "stream", v->stream, "start_ns",
                                            v->start_ns, "end_ns", v->end_ns, "name", v->name));
    }
    json_t *o = json_pack("{s:s, s:i, s:b, s:b, s:f, s:b, s:b, s:s, s:s, s:o, s:o}", "level",
                          pk_profile_level_name(d->level), "world", d->world, "nvlink_measured",
                          d->nvlink_measured, "nvlink_inaccessible", d->nvlink_inaccessible,
                          "roofline_nvlink_bytes", d->roofline_nvlink_bytes, "trace_ok",
                          d->trace_ok, "ncu_ok", d->ncu_ok, "trace_error", d->trace_error,
                          "ncu_error", d->ncu_error, "kernels", kernels, "timeline", iv);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

int pk_profile_data_from_json(const char *json, pk_profile_data *d, pk_error *err) {
    memset(d, 0, sizeof *d);
    json_error_t je;
    json_t *o = json_loads(json ? json : "", 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return pk_error_set(err, PK_ERR_INVALID, "profile JSON: %s", je.text);
    }
    d->level = pk_profile_level_parse(json_string_value(json_object_get(o, "level")));
    if (d->level < 0)
        d->level = PK_PROFILE_NONE;
    d->world = (int)json_integer_value(json_object_get(o, "world"));
    d->nvlink_measured = json_is_true(json_object_get(o, "nvlink_measured"));
    d->nvlink_inaccessible = json_is_true(json_object_get(o, "nvlink_inaccessible"));
    d->roofline_nvlink_bytes = get(o, "roofline_nvlink_bytes");
    if (d->roofline_nvlink_bytes < 0)
        d->roofline_nvlink_bytes = 0;
    d->trace_ok = json_is_true(json_object_get(o, "trace_ok"));
    d->ncu_ok = json_is_true(json_object_get(o, "ncu_ok"));
    snprintf(d->trace_error, sizeof d->trace_error, "%s",
             json_string_value(json_object_get(o, "trace_error")) ?: "");
    snprintf(d->ncu_error, sizeof d->ncu_error, "%s",
             json_string_value(json_object_get(o, "ncu_error")) ?: "");
    json_t *ks = json_object_get(o, "kernels"), *ivs = json_object_get(o, "timeline");
    size_t nk = json_array_size(ks), ni = json_array_size(ivs);
    d->kernels = nk ? calloc(nk, sizeof *d->kernels) : NULL;
    d->iv = ni ? calloc(ni, sizeof *d->iv) : NULL;
    if ((nk && !d->kernels) || (ni && !d->iv)) {
        json_decref(o);
        pk_profile_data_free(d);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nk; i++) {
        const json_t *k = json_array_get(ks, i);
        pk_prof_kernel *x = &d->kernels[d->n_kernels++];
        x->rank = (int)json_integer_value(json_object_get(k, "rank"));
        snprintf(x->name, sizeof x->name, "%s",
                 json_string_value(json_object_get(k, "name")) ?: "");
        x->duration_ns = get(k, "duration_ns");
        x->dram_pct = get(k, "dram_pct");
        x->sm_pct = get(k, "sm_pct");
        x->tensor_pct = get(k, "tensor_pct");
        x->fma_pct = get(k, "fma_pct");
        x->occupancy_pct = get(k, "occupancy_pct");
        x->nvl_tx_bytes = get(k, "nvl_tx_bytes");
        x->nvl_rx_bytes = get(k, "nvl_rx_bytes");
        const char *name;
        json_t *v;
        json_object_foreach(json_object_get(k, "stalls"), name, v) {
            if (x->n_stalls == PK_PROF_STALLS)
                break;
            snprintf(x->stall[x->n_stalls], sizeof x->stall[0], "%s", name);
            x->stall_val[x->n_stalls++] = json_number_value(v);
        }
    }
    for (size_t i = 0; i < ni; i++) {
        const json_t *v = json_array_get(ivs, i);
        pk_prof_interval *x = &d->iv[d->n_iv++];
        x->rank = (int)json_integer_value(json_object_get(v, "rank"));
        x->stream = (int)json_integer_value(json_object_get(v, "stream"));
        const char *kind = json_string_value(json_object_get(v, "kind"));
        x->kind = kind && !strcmp(kind, "comm")   ? PK_PROF_COMM
                  : kind && !strcmp(kind, "copy") ? PK_PROF_COPY
                                                  : PK_PROF_COMPUTE;
        x->start_ns = get(v, "start_ns");
        x->end_ns = get(v, "end_ns");
        snprintf(x->name, sizeof x->name, "%s",
                 json_string_value(json_object_get(v, "name")) ?: "");
    }
    json_decref(o);
    return PK_OK;
}
