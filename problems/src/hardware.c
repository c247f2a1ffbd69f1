/* Hardware peaks (problems/hardware.json) and the communication-aware roofline. */
#include "pk_harness_internal.h"

#include <jansson.h>
#include <string.h>

int pk_hw_peaks_find(const char *hardware_json, const char *gpu_name, pk_hw_peaks *out,
                     pk_error *err) {
    json_error_t je;
    json_t *root = json_load_file(hardware_json, 0, &je);
    if (!root)
        return pk_error_set(err, PK_ERR_IO, "%s: %s", hardware_json, je.text);
    json_t *gpus = json_object_get(root, "gpus");
    size_t i;
    json_t *g;
    int rc = pk_error_set(err, PK_ERR_NOT_FOUND, "%s: no entry matches GPU \"%s\"", hardware_json,
                          gpu_name);
    json_array_foreach(gpus, i, g) {
        const char *match = json_string_value(json_object_get(g, "match"));
        if (!match || !gpu_name || !strstr(gpu_name, match))
            continue;
        snprintf(out->name, sizeof out->name, "%s", match);
        out->bf16_tflops = json_number_value(json_object_get(g, "bf16_tflops"));
        out->hbm_tbps = json_number_value(json_object_get(g, "hbm_tbps"));
        out->nvlink_gbps = json_number_value(json_object_get(g, "nvlink_gbps"));
        if (out->bf16_tflops <= 0 || out->hbm_tbps <= 0 || out->nvlink_gbps <= 0)
            rc = pk_error_set(err, PK_ERR_INVALID, "%s: entry %s needs positive peaks",
                              hardware_json, match);
        else
            rc = PK_OK;
        break;
    }
    json_decref(root);
    return rc;
}

double pk_roofline_us(const pk_problem *p, const pk_problem_sizes *sz, const pk_hw_peaks *hw) {
    double total_s = 0;
    for (int i = 0; i < p->n_phases; i++) {
        double t_flop = sz->flops[i] / (hw->bf16_tflops * 1e12);
        double t_hbm = sz->hbm_bytes[i] / (hw->hbm_tbps * 1e12);
        double t_nvl = sz->nvlink_bytes[i] / (hw->nvlink_gbps * 1e9);
        double t = t_flop > t_hbm ? t_flop : t_hbm;
        total_s += t > t_nvl ? t : t_nvl;
    }
    return total_s * 1e6;
}
