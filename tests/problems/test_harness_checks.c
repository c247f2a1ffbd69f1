/* Result JSON and libelf symbol checks (the rooflines: test_roofline.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_harness_internal.h"

static void result_json_round_trip(void **state) {
    (void)state;
    pk_eval_result r, back;
    pk_eval_result_init(&r);
    r.status = PK_STATUS_INCORRECT;
    snprintf(r.reason, sizeof r.reason, "trial 1: wrong");
    pk_eval_result_add_check(&r, "symbols.entry_point", 1, "solution defined");
    r.n_trials = 2;
    r.trials[0].passed = 1;
    r.trials[1].inputs_modified = 1;
    r.trials[1].n_mismatch = 1;
    r.trials[1].mismatch[0] = (pk_rank_mismatch){1, "y", 17, 2.5, -0.25};
    r.has_timing = 1;
    r.candidate.median_us = 123.5;
    r.candidate.cv = 0.01;
    r.speedup = 1.25;
    r.roofline_floor_us = 100.5;
    r.roofline_no_overlap_us = 160.25;
    r.world_size = 4;
    r.n_hung = 1;
    r.hung_ranks[0] = 3;
    snprintf(r.launcher, sizeof r.launcher, "mpi");
    r.stages.compile_ms = 812.5;
    r.stdout_tail = strdup("hello");
    char *json = pk_eval_result_to_json(&r);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"status\":\"incorrect\""));
    pk_error err;
    assert_int_equal(pk_eval_result_from_json(json, &back, &err), PK_OK);
    assert_int_equal(back.status, PK_STATUS_INCORRECT);
    assert_string_equal(back.reason, r.reason);
    assert_int_equal(back.n_checks, 1);
    assert_string_equal(back.checks[0].name, "symbols.entry_point");
    assert_int_equal(back.n_trials, 2);
    assert_true(back.trials[1].inputs_modified);
    assert_int_equal(back.trials[1].mismatch[0].index, 17);
    assert_true(back.trials[1].mismatch[0].got == -0.25);
    assert_true(back.candidate.median_us == 123.5);
    assert_true(back.speedup == 1.25);
    assert_non_null(strstr(json, "\"roofline_floor_us\":100.5"));
    assert_non_null(strstr(json, "\"roofline_no_overlap_us\":160.25"));
    assert_true(back.roofline_floor_us == 100.5);
    assert_true(back.roofline_no_overlap_us == 160.25);
    assert_int_equal(back.hung_ranks[0], 3);
    assert_string_equal(back.launcher, "mpi");
    assert_true(back.stages.compile_ms == 812.5);
    assert_string_equal(back.stdout_tail, "hello");
    assert_null(back.compile_log);
    free(json);
    pk_eval_result_free(&r);
    pk_eval_result_free(&back);
    assert_int_equal(pk_eval_result_from_json("{\"status\": \"great\"}", &back, &err),
                     PK_ERR_INVALID);
    assert_int_equal(pk_eval_result_from_json("[1]", &back, &err), PK_ERR_INVALID);
}

/* The trajectory store holds results written before the two rooflines were told apart: their
 * one roofline_us (the sum of phases, then also the floor; single-phase problems, where the
 * two agree) reads as both. */
static void result_json_reads_old_roofline(void **state) {
    (void)state;
    pk_eval_result r;
    pk_error err;
    assert_int_equal(pk_eval_result_from_json("{\"status\":\"correct\",\"has_timing\":true,"
                                              "\"speedup\":1.45,\"roofline_us\":140.4}",
                                              &r, &err),
                     PK_OK);
    assert_true(r.roofline_floor_us == 140.4);
    assert_true(r.roofline_no_overlap_us == 140.4);
    pk_eval_result_free(&r);
    /* New keys win; an old key beside them is ignored. */
    assert_int_equal(pk_eval_result_from_json("{\"status\":\"correct\",\"roofline_us\":9,"
                                              "\"roofline_floor_us\":3,"
                                              "\"roofline_no_overlap_us\":5}",
                                              &r, &err),
                     PK_OK);
    assert_true(r.roofline_floor_us == 3 && r.roofline_no_overlap_us == 5);
    pk_eval_result_free(&r);
    assert_int_equal(pk_eval_result_from_json("{\"status\":\"incorrect\"}", &r, &err), PK_OK);
    assert_true(r.roofline_floor_us == 0 && r.roofline_no_overlap_us == 0);
    pk_eval_result_free(&r);
}

/* A candidate may print any bytes; the JSON (store, check --json) must still be produced. */
static void result_json_repairs_invalid_utf8(void **state) {
    (void)state;
    pk_eval_result r, back;
    pk_eval_result_init(&r);
    pk_eval_result_init(&back);
    r.status = PK_STATUS_RUNTIME_ERROR;
    r.stdout_tail = strdup("ok \xff\xfe bytes");
    r.stages.run_init_ms = 640.25;
    snprintf(r.reason, sizeof r.reason, "bad \xc3");
    char *json = pk_eval_result_to_json(&r);
    assert_non_null(json);
    pk_error err;
    assert_int_equal(pk_eval_result_from_json(json, &back, &err), PK_OK);
    assert_string_equal(back.stdout_tail, "ok \xef\xbf\xbd\xef\xbf\xbd bytes");
    assert_string_equal(back.reason, "bad \xef\xbf\xbd");
    assert_true(back.stages.run_init_ms == 640.25);
    free(json);
    pk_eval_result_free(&r);
    pk_eval_result_free(&back);
}

static void checks_list_is_bounded(void **state) {
    (void)state;
    pk_eval_result r;
    pk_eval_result_init(&r);
    for (int i = 0; i < PK_EVAL_MAX_CHECKS; i++)
        assert_int_equal(pk_eval_result_add_check(&r, "c", 1, "%d", i), i);
    assert_int_equal(pk_eval_result_add_check(&r, "c", 1, "full"), -1);
}

static pk_problem problem;

static int elf_setup(void **state) {
    (void)state;
    memset(&problem, 0, sizeof problem);
    problem.entry = "solution";
    problem.signature = "int solution(...)";
    problem.device_gpu = 1;
    problem.forbidden_calls.n = 1;
    problem.forbidden_calls.items[0] = "ncclAllReduce";
    return 0;
}

static pk_eval_result check(const char *fixture) {
    pk_eval_result r;
    pk_eval_result_init(&r);
    r.status = PK_STATUS_CORRECT; /* stands for "nothing fired yet" */
    char path[512];
    snprintf(path, sizeof path, "%s/%s.so", PK_FIXTURE_DIR, fixture);
    pk_error err;
    assert_int_equal(pk_elf_check(path, &problem, &r, &err), PK_OK);
    return r;
}

static void elf_accepts_a_clean_object(void **state) {
    (void)state;
    pk_eval_result r = check("fx_ok");
    assert_int_equal(r.status, PK_STATUS_CORRECT);
    for (int i = 0; i < r.n_checks; i++)
        assert_true(r.checks[i].passed);
}

static void elf_rejects_interposition(void **state) {
    (void)state;
    pk_eval_result r = check("fx_interpose");
    assert_int_equal(r.status, PK_STATUS_REJECTED);
    assert_string_equal(r.rule, "interposition");
    assert_non_null(strstr(r.reason, "cudaEventElapsedTime"));
}

static void elf_rejects_forbidden_call(void **state) {
    (void)state;
    pk_eval_result r = check("fx_forbidden");
    assert_int_equal(r.status, PK_STATUS_REJECTED);
    assert_string_equal(r.rule, "forbidden_call");
    assert_non_null(strstr(r.reason, "ncclAllReduce"));
    problem.forbidden_calls.n = 0; /* the same object passes where the call is allowed */
    r = check("fx_forbidden");
    problem.forbidden_calls.n = 1;
    assert_int_equal(r.status, PK_STATUS_CORRECT);
}

static void elf_rejects_unlisted_symbols(void **state) {
    (void)state;
    pk_eval_result r = check("fx_unknown");
    assert_int_equal(r.status, PK_STATUS_REJECTED);
    assert_string_equal(r.rule, "symbol_allowlist");
    assert_non_null(strstr(r.reason, "getenv"));
    assert_non_null(strstr(r.reason, "fopen"));
}

/* cuFFT's symbols are allowed only where the problem links it ("libraries": ["cufft"]). */
static void elf_allows_cufft_only_where_linked(void **state) {
    (void)state;
    pk_eval_result r = check("fx_cufft");
    assert_int_equal(r.status, PK_STATUS_REJECTED);
    assert_string_equal(r.rule, "symbol_allowlist");
    assert_non_null(strstr(r.reason, "cufftExecC2C"));
    problem.link_cublas = 1; /* cuBLAS is not cuFFT */
    r = check("fx_cufft");
    assert_int_equal(r.status, PK_STATUS_REJECTED);
    problem.link_cufft = 1;
    r = check("fx_cufft");
    problem.link_cufft = 0;
    problem.link_cublas = 0;
    assert_int_equal(r.status, PK_STATUS_CORRECT);
}

static void elf_requires_the_entry_point(void **state) {
    (void)state;
    pk_eval_result r = check("fx_noentry");
    assert_int_equal(r.status, PK_STATUS_FORMAT_ERROR);
    assert_non_null(strstr(r.reason, "solution"));
}

static void elf_reports_non_elf_files(void **state) {
    (void)state;
    pk_eval_result r;
    pk_eval_result_init(&r);
    pk_error err;
    assert_int_not_equal(pk_elf_check(PK_PROBLEMS_SRC "/hardware.json", &problem, &r, &err), PK_OK);
    assert_int_not_equal(pk_elf_check("/nonexistent.so", &problem, &r, &err), PK_OK);
}

static pk_eval_result scan(const char *fixture) {
    pk_eval_result r;
    pk_eval_result_init(&r);
    r.status = PK_STATUS_CORRECT;
    char path[512];
    snprintf(path, sizeof path, "%s/%s.so", PK_FIXTURE_DIR, fixture);
    pk_error err;
    assert_int_equal(pk_elf_scan_syscalls(path, &r, &err), PK_OK);
    return r;
}

/* syscall, sysenter and int 0x80 in host code are rejected, naming the instruction and where;
 * objects without them pass (every ELF fixture here, and the symbol-clean ones above). */
static void elf_rejects_raw_syscalls(void **state) {
    (void)state;
    const char *bad[][2] = {
        {"fx_syscall", "`syscall`"}, {"fx_sysenter", "`sysenter`"}, {"fx_int80", "`int 0x80`"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pk_eval_result r = scan(bad[i][0]);
        assert_int_equal(r.status, PK_STATUS_REJECTED);
        assert_string_equal(r.rule, "raw_syscall");
        assert_non_null(strstr(r.reason, bad[i][1]));
        assert_non_null(strstr(r.reason, ".text+0x"));
        assert_int_equal(r.n_checks, 1);
        assert_false(r.checks[0].passed);
        /* The symbol checks alone would have let it through. */
        r = check(bad[i][0]);
        assert_int_equal(r.status, PK_STATUS_CORRECT);
    }
    const char *good[] = {"fx_ok", "fx_interpose", "fx_forbidden", "fx_unknown", "fx_noentry"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        pk_eval_result r = scan(good[i]);
        assert_int_equal(r.status, PK_STATUS_CORRECT);
        assert_true(r.checks[0].passed);
    }
    pk_eval_result r;
    pk_eval_result_init(&r);
    pk_error err;
    assert_int_not_equal(pk_elf_scan_syscalls(PK_PROBLEMS_SRC "/hardware.json", &r, &err), PK_OK);
}

static void symbol_patterns(void **state) {
    (void)state;
    assert_true(pk_symbol_matches("nccl*", "ncclAllReduce"));
    assert_false(pk_symbol_matches("nccl*", "xnccl"));
    assert_true(pk_symbol_matches("memcpy", "memcpy"));
    assert_false(pk_symbol_matches("memcpy", "memcpy2"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(result_json_round_trip),
        cmocka_unit_test(result_json_reads_old_roofline),
        cmocka_unit_test(result_json_repairs_invalid_utf8),
        cmocka_unit_test(checks_list_is_bounded),
        cmocka_unit_test_setup(elf_accepts_a_clean_object, elf_setup),
        cmocka_unit_test_setup(elf_rejects_interposition, elf_setup),
        cmocka_unit_test_setup(elf_rejects_forbidden_call, elf_setup),
        cmocka_unit_test_setup(elf_rejects_unlisted_symbols, elf_setup),
        cmocka_unit_test_setup(elf_allows_cufft_only_where_linked, elf_setup),
        cmocka_unit_test_setup(elf_requires_the_entry_point, elf_setup),
        cmocka_unit_test_setup(elf_reports_non_elf_files, elf_setup),
        cmocka_unit_test_setup(elf_rejects_raw_syscalls, elf_setup),
        cmocka_unit_test(symbol_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
