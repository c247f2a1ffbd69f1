/* The roofline of a problem on one GPU: the floor that even perfect overlap cannot beat (it
 * rejects impossible times) and the no-overlap roofline (phases one after another). */
#include "pk_harness_internal.h"

#include <stdio.h>

void pk_roofline_compute(const pk_problem *p, const pk_problem_sizes *sz, const pk_hw_peaks *hw,
                         pk_roofline *out) {
    double math_s[PK_MATH_COUNT] = {0}, hbm_s = 0, nvl_s = 0, no_overlap_s = 0;
    for (int i = 0; i < p->n_phases; i++) {
        pk_math_dtype m = p->phases[i].math;
        double t_flop = sz->flops[i] / (hw->tflops[m] * 1e12);
        double t_hbm = sz->hbm_bytes[i] / (hw->hbm_tbps * 1e12);
        double t_nvl = sz->nvlink_bytes[i] / (hw->nvlink_gbps * 1e9);
        math_s[m] += t_flop;
        hbm_s += t_hbm;
        nvl_s += t_nvl;
        double t = t_flop > t_hbm ? t_flop : t_hbm;
        no_overlap_s += t > t_nvl ? t : t_nvl;
    }
    /* Each resource's total is a bound on its own. Math of different dtypes is kept apart
     * (max, not sum): a phase's flops may run on other units (elementwise bf16 adds on the
     * CUDA cores beside an fp8 MMA on the tensor cores), and a sum would then overstate. */
    static const char *const math_label[PK_MATH_COUNT] = {[PK_MATH_BF16] = "bf16 math",
                                                          [PK_MATH_FP16] = "fp16 math",
                                                          [PK_MATH_FP8] = "fp8 math",
                                                          [PK_MATH_TF32] = "tf32 math",
                                                          [PK_MATH_FP32] = "fp32 math"};
    double floor_s = hbm_s;
    out->bound_by = "HBM";
    if (nvl_s > floor_s) {
        floor_s = nvl_s;
        out->bound_by = "NVLink";
    }
    for (int m = 0; m < PK_MATH_COUNT; m++)
        if (math_s[m] > floor_s) {
            floor_s = math_s[m];
            out->bound_by = math_label[m];
        }
    out->floor_us = floor_s * 1e6;
    out->no_overlap_us = no_overlap_s * 1e6;
}

void pk_roofline_judge(const pk_roofline *rl, const char *hw_name, pk_eval_result *res) {
    res->roofline_floor_us = rl->floor_us;
    res->roofline_no_overlap_us = rl->no_overlap_us;
    double limit_us = PK_ROOFLINE_MARGIN * rl->floor_us;
    double t = res->candidate.median_us;
    int ok = !(t < limit_us);
    pk_eval_result_add_check(res, "roofline_floor", ok,
                             "median %.2f us vs roofline floor %.2f us (%s-bound, perfect "
                             "overlap; rejected below %g x floor = %.2f us); no-overlap "
                             "roofline %.2f us (%s)",
                             t, rl->floor_us, rl->bound_by, PK_ROOFLINE_MARGIN, limit_us,
                             rl->no_overlap_us, hw_name);
    if (ok)
        return;
    res->status = PK_STATUS_REJECTED;
    snprintf(res->rule, sizeof res->rule, "roofline_floor");
    snprintf(res->reason, sizeof res->reason,
             "%.2f us is below %g x the roofline floor %.2f us (%s-bound; even perfect overlap "
             "of compute and communication cannot beat the floor): impossible",
             t, PK_ROOFLINE_MARGIN, rl->floor_us, rl->bound_by);
}
