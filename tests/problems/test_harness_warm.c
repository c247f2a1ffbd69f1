/* Warm runs (pk_job_warm) on the selftest suite (host ranks over MPI, no GPU): the ranks
 * start and wait before the compile ends; go gives the verdicts of cold runs; abort after a
 * compile error, or freeing a warm job, leaves no process of the job behind. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_harness.h"
#include "selftest_scale.h"

static const char *correct_scale = SELFTEST_SCALE_CORRECT;
static const char *wrong_scale =
    "#include \"pk_ctx.h\"\n"
    "extern \"C\" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {\n"
    "    for (size_t i = 0; i < n; i++)\n"
    "        y[i] = 3.0f * x[i];\n"
    "    return 0;\n"
    "}\n";
static const char *broken_scale = "extern \"C\" int solution(const pk_ctx *ctx) { return }\n";

typedef struct env {
    pk_problem_set *set;
    const pk_problem *scale;
    char root[256];
} env;

static int setup(void **state) {
    static env e;
    snprintf(e.root, sizeof e.root, "/tmp/pk-test-harness-warm-XXXXXX");
    if (selftest_scale_load(&e.set, &e.scale, e.root))
        return -1;
    *state = &e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    pk_problem_set_free(e->set);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Processes whose command line mentions `needle` (the job directories live under it). */
static int processes_with(const char *needle) {
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || atoi(de->d_name) == getpid())
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[len] = 0;
        n += strstr(buf, needle) != NULL;
    }
    if (d)
        closedir(d);
    return n;
}

/* Waits until every rank of the world says "warm" in its progress marker. */
static int wait_ranks_warm(const char *root, int world, int timeout_ms) {
    for (int t = 0; t < timeout_ms; t += 20) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "cat '%s'/job-*/rank*.progress 2>/dev/null | grep -c '^warm'",
                 root);
        FILE *p = popen(cmd, "r");
        int n = 0;
        if (p) {
            if (fscanf(p, "%d", &n) != 1)
                n = 0;
            pclose(p);
        }
        if (n >= world)
            return 1;
        usleep(20000);
    }
    return 0;
}

static void opts_for(env *e, pk_eval_opts *o) {
    pk_eval_opts_default(o);
    o->work_root = e->root;
    o->skip_timing = 1;
    o->trials = 2;
    o->seed = 7;
}

/* Warm then go: the verdict of a cold run, the warm-up reported apart. */
static void check_warm_verdict(env *e, const char *source, pk_status want) {
    pk_eval_opts o;
    opts_for(e, &o);
    pk_eval_result cold, warm;
    pk_error err;
    pk_eval_result_init(&cold);
    pk_eval_result_init(&warm);
    o.no_warm = 1;
    assert_int_equal(pk_harness_evaluate(e->scale, source, &o, &cold, &err), PK_OK);

    pk_job *job = NULL;
    assert_int_equal(pk_job_create(e->scale, source, &o, &job, &warm, &err), PK_OK);
    assert_int_equal(pk_job_warm(job, NULL, 0, &err), PK_OK);
    assert_true(pk_job_is_warm(job));
    assert_true(wait_ranks_warm(e->root, 2, 60000)); /* they wait: no object exists yet */
    assert_int_equal(pk_job_compile(job, &warm, &err), PK_OK);
    assert_int_equal(pk_job_run(job, NULL, 0, &warm, &err), PK_OK);
    assert_false(pk_job_is_warm(job));
    pk_job_free(job);

    assert_int_equal(cold.status, want);
    assert_int_equal(warm.status, want);
    assert_int_equal(warm.n_trials, cold.n_trials);
    assert_string_equal(warm.reason, cold.reason);
    assert_true(warm.stages.run_warm_ms > 0);
    assert_true(cold.stages.run_warm_ms == 0);
    assert_true(warm.stages.run_ms > 0 && warm.stages.run_setup_ms >= 0);
    assert_int_equal(processes_with(e->root), 0);
    pk_eval_result_free(&cold);
    pk_eval_result_free(&warm);
}

static void test_warm_correct(void **state) {
    check_warm_verdict(*state, correct_scale, PK_STATUS_CORRECT);
}

static void test_warm_incorrect(void **state) {
    check_warm_verdict(*state, wrong_scale, PK_STATUS_INCORRECT);
}

/* A compile error while the ranks wait: pk_job_run aborts them, nothing is left running. */
static void test_abort_after_compile_error(void **state) {
    env *e = *state;
    pk_eval_opts o;
    opts_for(e, &o);
    pk_eval_result r;
    pk_error err;
    pk_eval_result_init(&r);
    pk_job *job = NULL;
    assert_int_equal(pk_job_create(e->scale, broken_scale, &o, &job, &r, &err), PK_OK);
    assert_int_equal(pk_job_warm(job, NULL, 0, &err), PK_OK);
    assert_true(wait_ranks_warm(e->root, 2, 60000));
    assert_true(processes_with(e->root) > 0);
    assert_int_equal(pk_job_compile(job, &r, &err), PK_OK);
    assert_int_equal(r.status, PK_STATUS_COMPILE_ERROR);
    assert_int_equal(pk_job_run(job, NULL, 0, &r, &err), PK_OK); /* aborts the warm run */
    assert_false(pk_job_is_warm(job));
    assert_int_equal(processes_with(e->root), 0);
    assert_int_equal(r.status, PK_STATUS_COMPILE_ERROR);
    pk_job_free(job);
    pk_eval_result_free(&r);
}

/* Freeing a warm job that never ran (e.g. a cancelled step) also reaps its ranks. */
static void test_free_reaps_warm_run(void **state) {
    env *e = *state;
    pk_eval_opts o;
    opts_for(e, &o);
    pk_eval_result r;
    pk_error err;
    pk_eval_result_init(&r);
    pk_job *job = NULL;
    assert_int_equal(pk_job_create(e->scale, correct_scale, &o, &job, &r, &err), PK_OK);
    assert_int_equal(pk_job_warm(job, NULL, 0, &err), PK_OK);
    assert_int_not_equal(pk_job_warm(job, NULL, 0, &err), PK_OK); /* once only */
    assert_true(wait_ranks_warm(e->root, 2, 60000));
    pk_job_free(job);
    assert_int_equal(processes_with(e->root), 0);
    pk_eval_result_free(&r);
}

/* pk_harness_evaluate warms by default: same verdict, warm-up reported. */
static void test_evaluate_warms_by_default(void **state) {
    env *e = *state;
    pk_eval_opts o;
    opts_for(e, &o);
    pk_eval_result r;
    pk_error err;
    pk_eval_result_init(&r);
    assert_int_equal(pk_harness_evaluate(e->scale, correct_scale, &o, &r, &err), PK_OK);
    assert_int_equal(r.status, PK_STATUS_CORRECT);
    assert_true(r.stages.run_warm_ms > 0);
    pk_eval_result_free(&r);
    pk_eval_result_init(&r);
    assert_int_equal(pk_harness_evaluate(e->scale, broken_scale, &o, &r, &err), PK_OK);
    assert_int_equal(r.status, PK_STATUS_COMPILE_ERROR);
    assert_int_equal(processes_with(e->root), 0);
    pk_eval_result_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_correct),
        cmocka_unit_test(test_warm_incorrect),
        cmocka_unit_test(test_abort_after_compile_error),
        cmocka_unit_test(test_free_reaps_warm_run),
        cmocka_unit_test(test_evaluate_warms_by_default),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
