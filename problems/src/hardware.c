/* Hardware peaks (problems/hardware.json): dense flops per math dtype, HBM, NVLink. */
#include "pk_harness_internal.h"

#include <jansson.h>
#include <string.h>

static int read_peaks(const char *file, json_t *g, pk_hw_peaks *out, pk_error *err) {
    json_t *tflops = json_object_get(g, "tflops");
    for (int m = 0; m < PK_MATH_COUNT; m++) {
        json_t *v = json_object_get(tflops, pk_math_dtype_name((pk_math_dtype)m));
        out->tflops[m] = json_is_number(v) ? json_number_value(v) : 0;
        if (!(out->tflops[m] > 0))
            return pk_error_set(err, PK_ERR_INVALID,
                                "%s: entry %s needs a positive \"tflops\".\"%s\" (dense peaks "
                                "for bf16, fp16, fp8, tf32 and fp32)",
                                file, out->name, pk_math_dtype_name((pk_math_dtype)m));
    }
    out->hbm_tbps = json_number_value(json_object_get(g, "hbm_tbps"));
    out->nvlink_gbps = json_number_value(json_object_get(g, "nvlink_gbps"));
    if (!(out->hbm_tbps > 0) || !(out->nvlink_gbps > 0))
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s: entry %s needs positive hbm_tbps and nvlink_gbps", file,
                            out->name);
    return PK_OK;
}

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
                          gpu_name ? gpu_name : "");
    json_array_foreach(gpus, i, g) {
        const char *match = json_string_value(json_object_get(g, "match"));
        if (!match || !gpu_name || !strstr(gpu_name, match))
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", match);
        rc = read_peaks(hardware_json, g, out, err);
        break;
    }
    json_decref(root);
    return rc;
}
