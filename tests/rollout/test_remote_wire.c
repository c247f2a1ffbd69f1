/* The broker <-> worker wire: every field of a job and of an evaluation result survives the
 * round trip exactly (doubles at full precision), malformed frames and wrong types are
 * refused with an error instead of being half-read, and the worker's announcement needs the
 * same protocol version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_mp.h"
#include "pk_wire.h"

static void fill_result(pk_eval_result *r) {
    pk_eval_result_init(r);
    r->status = PK_STATUS_INCORRECT;
    snprintf(r->reason, sizeof r->reason, "trial 1: rank 1 wrong \xc3\xa9");
    snprintf(r->rule, sizeof r->rule, "some_rule");
    for (int i = 0; i < 3; i++)
        pk_eval_result_add_check(r, i == 1 ? "roofline_floor" : "symbols", i != 1, "detail %d", i);
    r->n_trials = 2;
    r->trials[1].passed = 0;
    r->trials[1].max_abs_err = 1.0 / 3.0;
    r->trials[1].max_rel_err = 2e-300;
    r->trials[1].inputs_modified = 1;
    r->trials[1].n_mismatch = 2;
    r->trials[1].mismatch[1] = (pk_rank_mismatch){
        .rank = 1, .arg = "y", .index = 123456789012LL, .expected = 3.141592653589793, .got = -0.0};
    r->trials[0].passed = 1;
    r->has_timing = 1;
    r->candidate = (pk_timing){1.0000000000000002, 0.0123456789012345, 0.9, 1.1, 20, 5};
    r->reference = (pk_timing){2.718281828459045, 0.5, 2.0, 3.0, 21, 6};
    r->speedup = 2.718281828459045 / 1.0000000000000002;
    r->roofline_floor_us = 0.123456789123456789;
    r->roofline_no_overlap_us = 0.2345678912345678;
    r->trials_planned = 7;
    r->baseline = (pk_baseline_used){2.718281828459045, 0.00123, 99, 1.7e9 + 0.125, 1};
    r->world_size = 8;
    r->n_hung = 2;
    r->hung_ranks[0] = 3;
    r->hung_ranks[1] = 7;
    r->exit_code = -2;
    r->signal = 9;
    snprintf(r->launcher, sizeof r->launcher, "mpi");
    snprintf(r->gpu_name, sizeof r->gpu_name, "NVIDIA H200");
    r->stages = (pk_stage_times){1.5, 2.5,  3.5,   4.5,    5.5,  6.5,   7.5,    8.5,
                                 9.5, 10.5, 11.25, 12.125, 13.5, 14.75, 15.875, 16.0625};
    r->compile_log = strdup("warning: x\n");
    r->stdout_tail = strdup("");
    r->stderr_tail = NULL;
}

static void assert_results_equal(const pk_eval_result *a, const pk_eval_result *b) {
    assert_int_equal(a->status, b->status);
    assert_string_equal(a->reason, b->reason);
    assert_string_equal(a->rule, b->rule);
    assert_int_equal(a->n_checks, b->n_checks);
    assert_memory_equal(a->checks, b->checks, (size_t)a->n_checks * sizeof *a->checks);
    assert_int_equal(a->n_trials, b->n_trials);
    for (int i = 0; i < a->n_trials; i++) {
        const pk_trial_verdict *x = &a->trials[i], *y = &b->trials[i];
        assert_int_equal(x->passed, y->passed);
        assert_true(x->max_abs_err == y->max_abs_err && x->max_rel_err == y->max_rel_err);
        assert_int_equal(x->inputs_modified, y->inputs_modified);
        assert_int_equal(x->n_mismatch, y->n_mismatch);
        for (int k = 0; k < x->n_mismatch; k++) {
            assert_int_equal(x->mismatch[k].rank, y->mismatch[k].rank);
            assert_string_equal(x->mismatch[k].arg, y->mismatch[k].arg);
            assert_true(x->mismatch[k].index == y->mismatch[k].index);
            assert_true(x->mismatch[k].expected == y->mismatch[k].expected);
            assert_true(x->mismatch[k].got == y->mismatch[k].got);
        }
    }
    assert_int_equal(a->has_timing, b->has_timing);
    assert_memory_equal(&a->candidate, &b->candidate, sizeof a->candidate);
    assert_memory_equal(&a->reference, &b->reference, sizeof a->reference);
    assert_true(a->speedup == b->speedup); /* bit-exact, not 10 digits */
    assert_true(a->roofline_floor_us == b->roofline_floor_us);
    assert_true(a->roofline_no_overlap_us == b->roofline_no_overlap_us);
    assert_int_equal(a->trials_planned, b->trials_planned);
    assert_memory_equal(&a->baseline, &b->baseline, sizeof a->baseline);
    assert_int_equal(a->world_size, b->world_size);
    assert_int_equal(a->n_hung, b->n_hung);
    assert_memory_equal(a->hung_ranks, b->hung_ranks, sizeof a->hung_ranks);
    assert_int_equal(a->exit_code, b->exit_code);
    assert_int_equal(a->signal, b->signal);
    assert_string_equal(a->launcher, b->launcher);
    assert_string_equal(a->gpu_name, b->gpu_name);
    assert_memory_equal(&a->stages, &b->stages, sizeof a->stages);
    assert_true((a->compile_log == NULL) == (b->compile_log == NULL));
    if (a->compile_log)
        assert_string_equal(a->compile_log, b->compile_log);
    assert_string_equal(a->stdout_tail, b->stdout_tail);
    assert_null(b->stderr_tail);
}

static void unpack_one(msgpack_sbuffer *sb, msgpack_unpacked *u, int expect_type) {
    int type = 0;
    pk_error err;
    assert_int_equal(pk_wire_decode(sb->data, sb->size, u, &type, &err), PK_OK);
    assert_int_equal(type, expect_type);
}

static void test_result_round_trip(void **state) {
    (void)state;
    pk_wire_result r, back;
    memset(&r, 0, sizeof r);
    fill_result(&r.result);
    r.id = UINT64_MAX - 5;
    r.attempt = 2;
    r.code = PK_WIRE_OK;
    r.worker_ms = 12.000000000000002;
    r.baseline = (pk_wire_baseline){"NVIDIA H200", "580.159", "22809", 2, 31.000000000000004};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(pk_wire_pack_result(&sb, &r), PK_OK);
    msgpack_unpacked u;
    unpack_one(&sb, &u, PK_WIRE_RESULT);
    pk_error err;
    assert_int_equal(pk_wire_unpack_result(&u.data, &back, &err), PK_OK);
    assert_true(back.id == r.id);
    assert_int_equal(back.attempt, 2);
    assert_int_equal(back.code, PK_WIRE_OK);
    assert_true(back.worker_ms == r.worker_ms);
    assert_memory_equal(&back.baseline, &r.baseline, sizeof r.baseline);
    assert_results_equal(&r.result, &back.result);
    pk_wire_result_free(&back);
    pk_wire_result_free(&r);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

static void test_error_result_has_no_verdict(void **state) {
    (void)state;
    pk_wire_result r, back;
    memset(&r, 0, sizeof r);
    pk_eval_result_init(&r.result);
    r.id = 7;
    r.attempt = 1;
    r.code = PK_WIRE_MISSING_PROBLEM;
    snprintf(r.message, sizeof r.message, "worker w lacks the module of problem 'x'");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(pk_wire_pack_result(&sb, &r), PK_OK);
    msgpack_unpacked u;
    unpack_one(&sb, &u, PK_WIRE_RESULT);
    assert_null(pk_mp_get(&u.data, "result"));
    pk_error err;
    assert_int_equal(pk_wire_unpack_result(&u.data, &back, &err), PK_OK);
    assert_int_equal(back.code, PK_WIRE_MISSING_PROBLEM);
    assert_string_equal(back.message, r.message);
    pk_wire_result_free(&back);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

static void test_job_round_trip(void **state) {
    (void)state;
    pk_wire_job j, back;
    memset(&j, 0, sizeof j);
    j.id = 42;
    j.attempt = 1;
    j.kind = PK_JOB_EVAL;
    j.problem = "collectives/allreduce";
    j.version = "0123456789abcdef";
    j.source = "```cuda\n__global__ void k() {}\n```";
    j.opts.trials = 3;
    j.opts.seed = 0xfedcba9876543210ull;
    j.opts.compile_timeout_ms = 1000;
    j.opts.run_timeout_ms = 2000;
    j.opts.skip_timing = 1;
    j.opts.world_size = 4;
    j.opts.baseline_us = 17.123456789012345;
    j.baseline = (pk_wire_baseline){"NVIDIA H200", "580.159", "22809", 4, 17.123456789012345};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(pk_wire_pack_job(&sb, &j), PK_OK);
    msgpack_unpacked u;
    unpack_one(&sb, &u, PK_WIRE_JOB);
    pk_error err;
    assert_int_equal(pk_wire_unpack_job(&u.data, &back, &err), PK_OK);
    assert_true(back.id == 42 && back.attempt == 1 && back.kind == PK_JOB_EVAL);
    assert_string_equal(back.problem, j.problem);
    assert_string_equal(back.version, j.version);
    assert_string_equal(back.source, j.source);
    assert_int_equal(back.opts.trials, 3);
    assert_true(back.opts.seed == j.opts.seed);
    assert_int_equal(back.opts.compile_timeout_ms, 1000);
    assert_int_equal(back.opts.run_timeout_ms, 2000);
    assert_int_equal(back.opts.skip_timing, 1);
    assert_int_equal(back.opts.reference_as_candidate, 0);
    assert_int_equal(back.opts.world_size, 4);
    assert_true(back.opts.baseline_us == j.opts.baseline_us);
    assert_memory_equal(&back.baseline, &j.baseline, sizeof j.baseline);
    assert_null(back.opts.work_root);
    assert_null(back.opts.launcher);
    pk_wire_job_free(&back);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

/* Packs a raw map given as alternating keys and string values. */
static void pack_raw(msgpack_sbuffer *sb, int n, const char *const *kv) {
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, (size_t)n);
    for (int i = 0; i < n; i++)
        pk_mp_kv_str(&pk, kv[2 * i], kv[2 * i + 1]);
}

static void test_bad_frames_refused(void **state) {
    (void)state;
    msgpack_unpacked u;
    int type;
    pk_error err;
    assert_int_not_equal(pk_wire_decode("\x93\x01\x02\x03", 4, &u, &type, &err), PK_OK);
    msgpack_unpacked_destroy(&u);
    assert_int_not_equal(pk_wire_decode("\xc1", 1, &u, &type, &err), PK_OK); /* never used */
    msgpack_unpacked_destroy(&u);

    /* A 6-byte frame that declares a map of 2^31 entries: refused before msgpack-c would
     * allocate for it. */
    assert_int_not_equal(pk_wire_decode("\xdf\x80\x00\x00\x00\xa1", 6, &u, &type, &err), PK_OK);
    assert_non_null(strstr(err.message, "declares"));
    msgpack_unpacked_destroy(&u);

    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    const char *unknown[] = {"t", "gimme"};
    pack_raw(&sb, 1, unknown);
    assert_int_not_equal(pk_wire_decode(sb.data, sb.size, &u, &type, &err), PK_OK);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&sb);

    /* A job without its source, and one whose id is a string. */
    const char *no_source[] = {"t", "job", "kind", "eval", "problem", "p", "version", "v"};
    pack_raw(&sb, 4, no_source);
    unpack_one(&sb, &u, PK_WIRE_JOB);
    pk_wire_job j;
    assert_int_equal(pk_wire_unpack_job(&u.data, &j, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "source"));
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&sb);
    const char *string_id[] = {"t",       "job", "id",     "12",   "kind",    "eval",
                               "problem", "p",   "source", "code", "version", "v"};
    pack_raw(&sb, 6, string_id);
    unpack_one(&sb, &u, PK_WIRE_JOB);
    assert_int_equal(pk_wire_unpack_job(&u.data, &j, &err), PK_ERR_INVALID);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&sb);

    /* A result with an unknown code, and one whose verdict has an unknown status. */
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pk_mp_kv_str(&pk, "t", "result");
    pk_mp_kv_uint(&pk, "id", 3);
    pk_mp_kv_str(&pk, "code", "great");
    unpack_one(&sb, &u, PK_WIRE_RESULT);
    pk_wire_result r;
    assert_int_equal(pk_wire_unpack_result(&u.data, &r, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "great"));
    pk_wire_result_free(&r);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&sb);
    msgpack_pack_map(&pk, 4);
    pk_mp_kv_str(&pk, "t", "result");
    pk_mp_kv_uint(&pk, "id", 3);
    pk_mp_kv_str(&pk, "code", "ok");
    pk_mp_key(&pk, "result");
    msgpack_pack_map(&pk, 1);
    pk_mp_kv_str(&pk, "status", "brilliant");
    unpack_one(&sb, &u, PK_WIRE_RESULT);
    assert_int_equal(pk_wire_unpack_result(&u.data, &r, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "status"));
    pk_wire_result_free(&r);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

static void test_ready_needs_same_protocol(void **state) {
    (void)state;
    json_t *info = json_pack("{s:s, s:[], s:[], s:{}, s:[[s, s]], s:{s:i}, s:i}", "name", "w0",
                             "gpus", "nvlink_domains", "host_info", "problems", "selftest/scale",
                             "0123", "capacity", "max_jobs", 4, "protocol", 999);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    /* The packer writes its own protocol field, whatever info holds. */
    assert_int_equal(pk_wire_pack_ready(&sb, info), PK_OK);
    msgpack_unpacked u;
    unpack_one(&sb, &u, PK_WIRE_READY);
    json_t *back = NULL;
    pk_error err;
    assert_int_equal(pk_wire_unpack_ready(&u.data, &back, &err), PK_OK);
    assert_string_equal(json_string_value(json_object_get(back, "name")), "w0");
    assert_int_equal(json_integer_value(json_object_get(back, "protocol")), PK_WIRE_PROTOCOL);
    json_decref(back);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&sb);

    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pk_mp_kv_str(&pk, "t", "ready");
    pk_mp_kv_int(&pk, "protocol", PK_WIRE_PROTOCOL + 1);
    pk_mp_kv_str(&pk, "name", "future");
    unpack_one(&sb, &u, PK_WIRE_READY);
    assert_int_equal(pk_wire_unpack_ready(&u.data, &back, &err), PK_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "protocol"));
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&sb);

    json_object_del(info, "capacity"); /* the broker cannot place jobs without it */
    assert_int_equal(pk_wire_pack_ready(&sb, info), PK_OK);
    unpack_one(&sb, &u, PK_WIRE_READY);
    assert_int_equal(pk_wire_unpack_ready(&u.data, &back, &err), PK_ERR_INVALID);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    json_decref(info);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_error_result_has_no_verdict),
        cmocka_unit_test(test_job_round_trip),
        cmocka_unit_test(test_bad_frames_refused),
        cmocka_unit_test(test_ready_needs_same_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
