/* The rooflines (problems/src/roofline.c, hardware.c): the floor that rejects impossible times
 * is a true lower bound, also for kernels that overlap their phases; flops count at the peak
 * of their phase's dtype; NVLink bytes count per direction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_harness_internal.h"

static char tmp_dir[128];

static int make_tmp(void **state) {
    (void)state;
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/pk-test-roofline-%d", (int)getpid());
    pk_error err;
    return pk_mkdir_p(tmp_dir, &err);
}

static int remove_tmp(void **state) {
    (void)state;
    pk_rm_rf(tmp_dir);
    return 0;
}

static void write_text(const char *dir, const char *name, const char *text) {
    pk_error err;
    char *path = pk_path_join(dir, name);
    assert_int_equal(pk_mkdir_p(dir, &err), PK_OK);
    assert_int_equal(pk_write_file(path, text, strlen(text), &err), PK_OK);
    free(path);
}

/* A GPU problem "t/<name>" with the given roofline phases (a JSON array). */
static int load_phases(const char *name, const char *phases, pk_problem **p, pk_error *err) {
    char dir[256], meta[2048];
    snprintf(dir, sizeof dir, "%s/t/%s", tmp_dir, name);
    snprintf(meta, sizeof meta,
             "{\"id\": \"%s\", \"title\": \"t\", \"category\": \"Other\", \"device\": \"gpu\", "
             "\"signature\": \"s\", \"dims\": {\"n\": 1000}, \"args\": [{\"name\": \"x\", "
             "\"dtype\": \"bf16\", \"role\": \"input\", \"count\": \"n\"}], "
             "\"roofline\": {\"phases\": %s}}",
             name, phases);
    write_text(dir, "meta.json", meta);
    write_text(dir, "prompt.md", "prompt");
    return pk_problem_load_dir(dir, "t", name, NULL, p, err);
}

/* Round peaks that make the arithmetic plain: flops/us per dtype, bytes/us. */
static const pk_hw_peaks peaks = {
    .name = "TestGPU",
    .tflops = {[PK_MATH_BF16] = 1000,
               [PK_MATH_FP16] = 1000,
               [PK_MATH_FP8] = 2000,
               [PK_MATH_TF32] = 500,
               [PK_MATH_FP32] = 50},
    .hbm_tbps = 4.0,
    .nvlink_gbps = 500,
};

static pk_roofline roofline_of(const char *name, const char *phases) {
    pk_problem *p = NULL;
    pk_problem_sizes sz;
    pk_error err;
    pk_roofline rl;
    assert_int_equal(load_phases(name, phases, &p, &err), PK_OK);
    assert_int_equal(pk_problem_sizes_at(p, p->world_size, &sz, &err), PK_OK);
    pk_roofline_compute(p, &sz, &peaks, &rl);
    pk_problem_free(p);
    return rl;
}

/* A correct, timed candidate with this median, judged against rl. */
static pk_eval_result judged(const pk_roofline *rl, double median_us) {
    pk_eval_result r;
    pk_eval_result_init(&r);
    r.status = PK_STATUS_CORRECT;
    r.has_timing = 1;
    r.candidate.median_us = median_us;
    pk_roofline_judge(rl, "TestGPU", &r);
    return r;
}

static void assert_accepted(const pk_eval_result *r) {
    assert_int_equal(r->status, PK_STATUS_CORRECT);
    assert_int_equal(r->n_checks, 1);
    assert_string_equal(r->checks[0].name, "roofline_floor");
    assert_true(r->checks[0].passed);
    assert_string_equal(r->rule, "");
}

static void assert_rejected(const pk_eval_result *r) {
    assert_int_equal(r->status, PK_STATUS_REJECTED);
    assert_string_equal(r->rule, "roofline_floor");
    assert_false(r->checks[0].passed);
    assert_non_null(strstr(r->reason, "roofline floor"));
}

/* The acceptance case of issue 20: a GEMM (1 ms of bf16 math, 0.5 ms of HBM) and an
 * all-reduce (0.6 ms of NVLink). Phases in sequence take 1.6 ms; a kernel that hides the
 * all-reduce behind the GEMM needs only 1 ms, the floor. */
static void overlap_below_the_sum_is_not_rejected(void **state) {
    (void)state;
    pk_roofline rl = roofline_of("gemm_ar", "[{\"name\": \"gemm\", \"flops\": \"1000000000*n\", "
                                            "\"hbm_bytes\": \"2000000*n\"}, "
                                            "{\"name\": \"allreduce\", \"nvlink_bytes\": "
                                            "\"300000*n\", \"hbm_bytes\": \"400000*n\"}]");
    assert_true(fabs(rl.floor_us - 1000.0) < 1e-9);      /* max(1000 math, 600 HBM, 600 NVLink) */
    assert_true(fabs(rl.no_overlap_us - 1600.0) < 1e-9); /* 1000 + max(100 HBM, 600 NVLink) */
    assert_string_equal(rl.bound_by, "bf16 math");

    pk_eval_result r = judged(&rl, 1200.0); /* overlapped: below the sum, above the floor */
    assert_accepted(&r);
    assert_true(r.roofline_floor_us == rl.floor_us);
    assert_true(r.roofline_no_overlap_us == rl.no_overlap_us);
    assert_non_null(strstr(r.checks[0].detail, "roofline floor 1000.00 us"));
    assert_non_null(strstr(r.checks[0].detail, "no-overlap roofline 1600.00 us"));
    pk_eval_result_free(&r);

    r = judged(&rl, 950.0); /* below the floor, within the safety margin (0.9 x floor) */
    assert_accepted(&r);
    pk_eval_result_free(&r);

    r = judged(&rl, 899.0); /* below 0.9 x floor: impossible */
    assert_rejected(&r);
    assert_true(r.roofline_floor_us == rl.floor_us && r.roofline_no_overlap_us == rl.no_overlap_us);
    pk_eval_result_free(&r);

    r = judged(&rl, 1.0);
    assert_rejected(&r);
    pk_eval_result_free(&r);
}

/* Each resource is totalled over the phases: two HBM-bound phases add up in the floor. */
static void resources_are_totalled_over_phases(void **state) {
    (void)state;
    pk_roofline rl = roofline_of("two_hbm", "[{\"name\": \"a\", \"hbm_bytes\": \"4000000*n\", "
                                            "\"nvlink_bytes\": \"100000*n\"}, "
                                            "{\"name\": \"b\", \"hbm_bytes\": \"4000000*n\", "
                                            "\"nvlink_bytes\": \"100000*n\"}]");
    assert_true(fabs(rl.floor_us - 2000.0) < 1e-9); /* 1000 + 1000 us of HBM */
    assert_true(fabs(rl.no_overlap_us - 2000.0) < 1e-9);
    assert_string_equal(rl.bound_by, "HBM");
    pk_eval_result r = judged(&rl, 1500.0); /* overlap cannot hide HBM behind HBM */
    assert_rejected(&r);
    pk_eval_result_free(&r);
}

/* fp8 math counts at the fp8 peak: an fp8 GEMM twice as fast as the bf16 peak allows is
 * possible, and must not be rejected against the bf16 floor. */
static void fp8_phase_uses_the_fp8_peak(void **state) {
    (void)state;
    pk_roofline bf16 = roofline_of("g_bf16", "[{\"flops\": \"1000000000*n\"}]");
    pk_roofline fp8 = roofline_of("g_fp8", "[{\"flops\": \"1000000000*n\", \"dtype\": \"fp8\"}]");
    pk_roofline tf32 =
        roofline_of("g_tf32", "[{\"flops\": \"1000000000*n\", \"dtype\": \"tf32\"}]");
    pk_roofline fp32 = roofline_of("g_fp32", "[{\"flops\": \"1000000000*n\", \"dtype\": \"f32\"}]");
    assert_true(fabs(bf16.floor_us - 1000.0) < 1e-9);
    assert_true(fabs(fp8.floor_us - 500.0) < 1e-9);
    assert_true(fabs(tf32.floor_us - 2000.0) < 1e-9);
    assert_true(fabs(fp32.floor_us - 20000.0) < 1e-9);
    assert_string_equal(fp8.bound_by, "fp8 math");
    pk_eval_result r = judged(&fp8, 700.0);
    assert_accepted(&r);
    pk_eval_result_free(&r);
    r = judged(&bf16, 700.0);
    assert_rejected(&r);
    pk_eval_result_free(&r);
    /* Math of different dtypes is not summed (the units may differ): the floor is the larger. */
    pk_roofline mixed =
        roofline_of("g_mixed", "[{\"flops\": \"1000000000*n\", \"dtype\": \"fp8\"}, "
                               "{\"flops\": \"400000000*n\", \"dtype\": \"bf16\"}]");
    assert_true(fabs(mixed.floor_us - 500.0) < 1e-9);
    assert_true(fabs(mixed.no_overlap_us - 900.0) < 1e-9);
}

static void phase_dtype_is_checked(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_error err;
    assert_int_equal(load_phases("bad_dtype", "[{\"flops\": 1, \"dtype\": \"int4\"}]", &p, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "roofline.phases.dtype"));
    assert_int_equal(
        load_phases("default_dtype", "[{\"flops\": 1}, {\"dtype\": \"fp16\"}]", &p, &err), PK_OK);
    assert_int_equal(p->phases[0].math, PK_MATH_BF16);
    assert_int_equal(p->phases[1].math, PK_MATH_FP16);
    pk_problem_free(p);
}

/* The shipped peaks: dense datasheet figures for every math dtype. */
static void shipped_peaks(void **state) {
    (void)state;
    const char *hw_json = PK_PROBLEMS_SRC "/hardware.json";
    pk_hw_peaks h200, h100;
    pk_error err;
    assert_int_equal(pk_hw_peaks_find(hw_json, "NVIDIA H200", &h200, &err), PK_OK);
    assert_int_equal(pk_hw_peaks_find(hw_json, "NVIDIA H100 80GB HBM3", &h100, &err), PK_OK);
    assert_string_equal(h200.name, "H200");
    assert_string_equal(h100.name, "H100");
    for (int m = 0; m < PK_MATH_COUNT; m++)
        assert_true(h200.tflops[m] > 0 && h100.tflops[m] > 0);
    /* Hopper: fp8 runs at twice bf16, fp16 as bf16, tf32 at half, fp32 on the CUDA cores. */
    assert_true(fabs(h200.tflops[PK_MATH_FP8] - 2 * h200.tflops[PK_MATH_BF16]) < 1);
    assert_true(h200.tflops[PK_MATH_FP16] == h200.tflops[PK_MATH_BF16]);
    assert_true(fabs(2 * h200.tflops[PK_MATH_TF32] - h200.tflops[PK_MATH_BF16]) < 1);
    assert_true(h200.tflops[PK_MATH_FP32] < h200.tflops[PK_MATH_TF32]);
    assert_true(h200.hbm_tbps > h100.hbm_tbps);
    assert_true(h200.nvlink_gbps > 400);
    assert_int_equal(pk_hw_peaks_find(hw_json, "Tesla K80", &h200, &err), PK_ERR_NOT_FOUND);

    /* A file in the old format (one bf16 figure) is an error that says what is missing. */
    write_text(tmp_dir, "old_hw.json",
               "{\"gpus\": [{\"match\": \"H200\", \"bf16_tflops\": 989, \"hbm_tbps\": 4.8, "
               "\"nvlink_gbps\": 478}]}");
    char *old = pk_path_join(tmp_dir, "old_hw.json");
    assert_int_equal(pk_hw_peaks_find(old, "NVIDIA H200", &h200, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "\"tflops\""));
    free(old);
}

/* The all-reduce of docs/problems.md, as shipped: each rank sends and receives
 * 2(W-1)/W x 2n bytes in each direction, against the per-direction NVLink figure. */
static void allreduce_worked_example(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_problem_sizes sz;
    pk_hw_peaks hw;
    pk_error err;
    assert_int_equal(pk_problem_load_dir(PK_PROBLEMS_SRC "/collectives/allreduce", "collectives",
                                         "allreduce", NULL, &p, &err),
                     PK_OK);
    assert_int_equal(pk_hw_peaks_find(PK_PROBLEMS_SRC "/hardware.json", "NVIDIA H200", &hw, &err),
                     PK_OK);
    const int worlds[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        int w = worlds[i];
        assert_int_equal(pk_problem_sizes_at(p, w, &sz, &err), PK_OK);
        double n = (double)sz.dims[0], bytes = 2.0 * (w - 1) / w * 2 * n;
        pk_roofline rl;
        pk_roofline_compute(p, &sz, &hw, &rl);
        assert_string_equal(rl.bound_by, "NVLink");
        assert_true(fabs(rl.floor_us - bytes / (hw.nvlink_gbps * 1e3)) < 1e-6 * rl.floor_us);
        assert_true(rl.no_overlap_us == rl.floor_us); /* one phase */
    }
    pk_problem_free(p);
    /* The single-GPU diagnostic: no peer, no NVLink bytes, even where the formula does not
     * vanish at W = 1 (broadcast's 2 n); the floor is the HBM traffic. */
    assert_int_equal(pk_problem_load_dir(PK_PROBLEMS_SRC "/collectives/broadcast", "collectives",
                                         "broadcast", NULL, &p, &err),
                     PK_OK);
    assert_int_equal(pk_problem_sizes_at(p, 1, &sz, &err), PK_OK);
    assert_true(sz.nvlink_bytes[0] == 0);
    pk_roofline rl;
    pk_roofline_compute(p, &sz, &hw, &rl);
    assert_string_equal(rl.bound_by, "HBM");
    assert_int_equal(pk_problem_sizes_at(p, 2, &sz, &err), PK_OK);
    assert_true(sz.nvlink_bytes[0] > 0);
    pk_problem_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(overlap_below_the_sum_is_not_rejected),
        cmocka_unit_test(resources_are_totalled_over_phases),
        cmocka_unit_test(fp8_phase_uses_the_fp8_peak),
        cmocka_unit_test(phase_dtype_is_checked),
        cmocka_unit_test(shipped_peaks),
        cmocka_unit_test(allreduce_worked_example),
    };
    return cmocka_run_group_tests(tests, make_tmp, remove_tmp);
}
