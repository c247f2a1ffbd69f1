/* The compile cache key (pk_job_compile_key) hashes the nvcc flags, so an object compiled with
 * NCCL's device API (-DPK_DEVICE_API=1, "device_api": true) is never reused for a problem
 * without it, nor one linked against cuBLAS for a problem without "libraries": ["cublas"] (or
 * cuFFT without ["cufft"]). Only pk_job_create runs: no nvcc, no GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_harness.h"
#include "pk_problem_spec.h"

/* The flags as one string (problems/src/pk_job.h, the harness's internal header). */
void pk_job_compile_flags(const pk_job *job, char *out, size_t cap);

#define SOURCE "extern \"C\" int solution(const pk_ctx *ctx) { return 0; }\n"

static char root[64];

static void key_of(const pk_problem *p, char out[65]) {
    pk_eval_opts o;
    memset(&o, 0, sizeof o);
    o.work_root = root;
    o.seed = 1;
    pk_eval_result res;
    pk_eval_result_init(&res);
    pk_error err = {0};
    pk_job *job = NULL;
    assert_int_equal(pk_job_create(p, SOURCE, &o, &job, &res, &err), PK_OK);
    snprintf(out, 65, "%s", pk_job_compile_key(job));
    assert_int_equal(strlen(out), 64);
    pk_job_free(job);
    pk_eval_result_free(&res);
}

static void key_covers_device_api_and_libraries(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_error err = {0};
    assert_int_equal(pk_problem_load_dir(PK_TEST_PROBLEMS "/pkb/13_gemm_allreduce", "pkb",
                                         "13_gemm_allreduce", NULL, &p, &err),
                     PK_OK);
    assert_int_equal(p->device_gpu, 1);
    assert_int_equal(p->device_api, 1); /* meta.json: "device_api": true */
    assert_int_equal(p->link_cublas, 1);
    char api_blas[65], again[65], blas[65], api[65], plain[65];
    key_of(p, api_blas);
    key_of(p, again);
    assert_string_equal(api_blas, again); /* same source, same flags: the same key */
    p->device_api = 0;
    key_of(p, blas);
    p->link_cublas = 0;
    key_of(p, plain);
    p->device_api = 1;
    key_of(p, api);
    const char *keys[] = {api_blas, blas, plain, api};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            assert_string_not_equal(keys[i], keys[j]);
    pk_problem_free(p);
}

/* "libraries": ["cufft"] (pkb/72's FFT convolution) links -lcufft: a key of its own, and the
 * flags keep the order of the flags without it (device API, cuBLAS, then cuFFT), so the keys of
 * problems without cuFFT do not change. */
static void key_covers_cufft(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_error err = {0};
    assert_int_equal(pk_problem_load_dir(PK_TEST_PROBLEMS "/pkb/72_hyena_forward_cp", "pkb",
                                         "72_hyena_forward_cp", NULL, &p, &err),
                     PK_OK);
    assert_int_equal(p->link_cufft, 1);
    assert_int_equal(p->link_cublas, 0);
    char fft[65], plain[65], both[65];
    key_of(p, fft);
    p->link_cufft = 0;
    key_of(p, plain);
    p->link_cufft = 1;
    p->link_cublas = 1;
    key_of(p, both);
    assert_string_not_equal(fft, plain);
    assert_string_not_equal(fft, both);
    assert_string_not_equal(plain, both);
    pk_problem_free(p);
}

static void flags_of(const pk_problem *p, char *out, size_t cap) {
    pk_eval_opts o;
    memset(&o, 0, sizeof o);
    o.work_root = root;
    o.seed = 1;
    pk_eval_result res;
    pk_eval_result_init(&res);
    pk_error err = {0};
    pk_job *job = NULL;
    assert_int_equal(pk_job_create(p, SOURCE, &o, &job, &res, &err), PK_OK);
    pk_job_compile_flags(job, out, cap);
    pk_job_free(job);
    pk_eval_result_free(&res);
}

/* Every combination of the device API, cuBLAS and cuFFT has its own key, and the flags hold
 * -lcufft exactly when linked, after cuBLAS's (one fixed order, pkb/59-60 and 72 alike). */
static void key_covers_every_library_combination(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_error err = {0};
    assert_int_equal(pk_problem_load_dir(PK_TEST_PROBLEMS "/pkb/13_gemm_allreduce", "pkb",
                                         "13_gemm_allreduce", NULL, &p, &err),
                     PK_OK);
    assert_int_equal(p->link_cufft, 0);
    char keys[8][65], flags[512];
    for (int bits = 0; bits < 8; bits++) {
        p->device_api = bits & 1;
        p->link_cublas = (bits >> 1) & 1;
        p->link_cufft = (bits >> 2) & 1;
        key_of(p, keys[bits]);
        flags_of(p, flags, sizeof flags);
        assert_int_equal(strstr(flags, "-lcufft") != NULL, (bits >> 2) & 1);
        assert_int_equal(strstr(flags, "-lcublas ") != NULL, (bits >> 1) & 1);
        assert_int_equal(strstr(flags, "-DPK_DEVICE_API=1") != NULL, bits & 1);
        if (bits == 7) /* one order: cuBLAS before cuFFT */
            assert_true(strstr(flags, "-lcublasLt -lcufft") != NULL);
    }
    for (int i = 0; i < 8; i++)
        for (int j = i + 1; j < 8; j++)
            assert_string_not_equal(keys[i], keys[j]);
    pk_problem_free(p);
}

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/pk-test-compile-key-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_covers_device_api_and_libraries),
        cmocka_unit_test(key_covers_cufft),
        cmocka_unit_test(key_covers_every_library_combination),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
