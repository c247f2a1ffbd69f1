/* The scheduler with the real executor (harness + caches) on the selftest suite (host ranks
 * over MPI, no GPU): a compile cache miss then a hit for the same source, a miss when the
 * compile flags change (another candidate include dir is another -I flag, hence another key)
 * and when the source changes; the baseline cache feeds the stored reference time (with its CV,
 * repetitions and time) to later steps, remeasure_baseline bypasses it, and an entry older than
 * baseline_max_age_s is measured again. Host timings are noisy (CV often > 0.1), so these tests
 * raise baseline_max_cv; test_noisy_baseline_is_measured_again lowers it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "pk_scheduler.h"
#include "../problems/selftest_scale.h"

static const char *correct_scale = SELFTEST_SCALE_CORRECT;

typedef struct env {
    pk_problem_set *set;
    const pk_problem *scale;
    char cache[256];
    char include_copy[300];
} env;

static int setup(void **state) {
    static env e;
    snprintf(e.cache, sizeof e.cache, "/tmp/pk-test-sched-harness-XXXXXX");
    if (selftest_scale_load(&e.set, &e.scale, e.cache))
        return -1;
    /* The same headers under another path: the -I flag, hence the compile key, changes. */
    snprintf(e.include_copy, sizeof e.include_copy, "%s/include-copy", e.cache);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -r '%s/include/candidate' '%s'", PK_TEST_PROBLEMS,
             e.include_copy);
    if (system(cmd) != 0)
        return -1;
    *state = &e;
    return 0;
}

static int teardown(void **state) {
    env *e = *state;
    pk_problem_set_free(e->set);
    pk_rm_rf(e->cache);
    return 0;
}

typedef struct sched {
    void *zctx, *pull;
    pk_scheduler *s;
} sched;

static void start_opts(sched *sc, env *e, int remeasure, int compile_workers, double max_cv,
                       double max_age_s) {
    static int seq;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://harness-done-%d", seq++);
    sc->zctx = zmq_ctx_new();
    sc->pull = zmq_socket(sc->zctx, ZMQ_PULL);
    int timeout_ms = 120000;
    zmq_setsockopt(sc->pull, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    assert_int_equal(zmq_bind(sc->pull, ep), 0);
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", e->cache);
    pk_scheduler_opts o = {.zmq_ctx = sc->zctx,
                           .done_endpoint = ep,
                           .compile_workers = compile_workers,
                           .cache_dir = cache,
                           .remeasure_baseline = remeasure,
                           .baseline_max_cv = max_cv,
                           .baseline_max_age_s = max_age_s};
    pk_error err;
    int rc = pk_scheduler_create(&o, &sc->s, &err);
    if (rc)
        fail_msg("create: %s", err.message);
}

static void start_with(sched *sc, env *e, int remeasure, int compile_workers) {
    start_opts(sc, e, remeasure, compile_workers, 1e6, 0);
}

static void start(sched *sc, env *e, int remeasure) {
    start_with(sc, e, remeasure, 1);
}

static void stop(sched *sc) {
    pk_scheduler_free(sc->s);
    zmq_close(sc->pull);
    zmq_ctx_term(sc->zctx);
}

/* Evaluates one source and returns its completion (status checked by the caller). */
static pk_completion *evaluate(sched *sc, env *e, const char *source) {
    pk_eval_opts opts;
    pk_eval_opts_default(&opts);
    opts.trials = 1;
    pk_error err;
    uint64_t ticket;
    if (pk_scheduler_submit(sc->s, e->scale, source, &opts, NULL, &ticket, &err))
        fail_msg("submit: %s", err.message);
    pk_completion *c = NULL;
    assert_int_equal(zmq_recv(sc->pull, &c, sizeof c, 0), (int)sizeof c);
    assert_int_equal(c->ticket, ticket);
    if (c->harness_rc)
        fail_msg("harness: %s", c->error.message);
    return c;
}

static void test_compile_and_baseline_cache(void **state) {
    env *e = *state;
    sched sc;
    start(&sc, e, 0);
    pk_scheduler_stats st;

    pk_completion *c = evaluate(&sc, e, correct_scale); /* cold: compile, time the reference */
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    assert_true(c->result.has_timing && c->result.reference.median_us > 0);
    double baseline = c->result.reference.median_us;
    /* Measured now: the baseline is the reference, with its CV and repetitions. */
    assert_int_equal(c->result.baseline.cached, 0);
    assert_true(c->result.baseline.us == baseline);
    assert_true(c->result.baseline.cv == c->result.reference.cv);
    assert_int_equal(c->result.baseline.iters, c->result.reference.iters);
    assert_true(c->result.baseline.measured_at > 1.6e9);
    double measured_at = c->result.baseline.measured_at;
    double baseline_cv = c->result.reference.cv;
    pk_completion_free(c);
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.compile_cache_misses, 1);
    assert_int_equal(st.compile_cache_hits, 0);
    assert_int_equal(st.baseline_cache_hits, 0);

    c = evaluate(&sc, e, correct_scale); /* warm: cached object and cached baseline */
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    /* The speedup is taken against the cached baseline, not this run's reference time. */
    assert_true(c->result.candidate.median_us > 0);
    assert_true(fabs(c->result.speedup - baseline / c->result.candidate.median_us) <=
                1e-9 * c->result.speedup);
    /* The result carries the cached baseline itself, not the untimed reference's 0. */
    assert_int_equal(c->result.baseline.cached, 1);
    assert_true(c->result.reference.median_us == 0);
    assert_true(fabs(c->result.baseline.us - baseline) <= 1e-9 * baseline);
    assert_true(fabs(c->result.baseline.cv - baseline_cv) <= 1e-9 * (baseline_cv + 1e-12));
    assert_true(fabs(c->result.baseline.measured_at - measured_at) < 1e-3);
    pk_completion_free(c);
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.compile_cache_hits, 1);
    assert_int_equal(st.compile_cache_misses, 1);
    assert_int_equal(st.baseline_cache_hits, 1);

    char *other = malloc(strlen(correct_scale) + 32);
    sprintf(other, "// another version\n%s", correct_scale);
    c = evaluate(&sc, e, other); /* another source: a miss */
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    pk_completion_free(c);
    free(other);
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.compile_cache_misses, 2);

    setenv("PKGYM_CANDIDATE_INCLUDE", e->include_copy, 1);
    c = evaluate(&sc, e, correct_scale); /* the same source, other flags: a miss */
    unsetenv("PKGYM_CANDIDATE_INCLUDE");
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    pk_completion_free(c);
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.compile_cache_hits, 1);
    assert_int_equal(st.compile_cache_misses, 3);
    stop(&sc);

    /* remeasure_baseline: the reference is timed again although a baseline is cached. */
    start(&sc, e, 1);
    c = evaluate(&sc, e, correct_scale);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    pk_completion_free(c);
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.baseline_cache_hits, 0);
    assert_int_equal(st.compile_cache_hits, 1); /* the compile cache persists on disk */
    stop(&sc);
}

static void test_compile_error_is_not_cached(void **state) {
    env *e = *state;
    sched sc;
    start(&sc, e, 0);
    const char *bad = "#include \"pk_ctx.h\"\nextern \"C\" int solution(const pk_ctx *ctx, "
                      "const float *x, float *y, size_t n) { return undeclared; }\n";
    for (int i = 0; i < 2; i++) {
        pk_completion *c = evaluate(&sc, e, bad);
        assert_int_equal(c->result.status, PK_STATUS_COMPILE_ERROR);
        assert_non_null(c->result.compile_log);
        pk_completion_free(c);
    }
    pk_scheduler_stats st;
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.compile_cache_hits, 0);
    assert_int_equal(st.done, 2);
    stop(&sc);
}

/* Two identical jobs in flight on two compile workers: one compiles, the other waits for it
 * and takes the object from the cache. */
static void test_identical_jobs_compile_once(void **state) {
    env *e = *state;
    sched sc;
    start_with(&sc, e, 0, 2);
    char *src = malloc(strlen(correct_scale) + 32);
    sprintf(src, "// twins\n%s", correct_scale);
    pk_eval_opts opts;
    pk_eval_opts_default(&opts);
    opts.trials = 1;
    opts.skip_timing = 1;
    pk_error err;
    for (int i = 0; i < 2; i++)
        if (pk_scheduler_submit(sc.s, e->scale, src, &opts, NULL, NULL, &err))
            fail_msg("submit: %s", err.message);
    for (int i = 0; i < 2; i++) {
        pk_completion *c = NULL;
        assert_int_equal(zmq_recv(sc.pull, &c, sizeof c, 0), (int)sizeof c);
        assert_int_equal(c->harness_rc, 0);
        assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        pk_completion_free(c);
    }
    free(src);
    pk_scheduler_stats st;
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.compile_cache_misses, 1);
    assert_int_equal(st.compile_cache_hits, 1);
    stop(&sc);
}

/* An entry older than baseline_max_age_s is measured again (and replaced). */
static void test_old_baseline_is_measured_again(void **state) {
    env *e = *state;
    sched sc;
    start_opts(&sc, e, 0, 1, 1e6, 0.001);
    char *src = malloc(strlen(correct_scale) + 32);
    sprintf(src, "// aged\n%s", correct_scale);
    pk_completion *c = evaluate(&sc, e, src); /* a baseline is cached (or already was) */
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    pk_completion_free(c);
    usleep(20000); /* the entry is now older than 1 ms */
    c = evaluate(&sc, e, src);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    assert_int_equal(c->result.baseline.cached, 0);
    assert_true(c->result.reference.median_us > 0); /* the reference was timed again */
    pk_completion_free(c);
    pk_scheduler_stats st;
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.baseline_cache_hits, 0);
    assert_int_equal(st.baseline_cache_stale, 2);
    stop(&sc);
    free(src);
}

/* A cached entry whose CV is above baseline_max_cv is not used: the reference is timed again.
 * (The tests above cached one for selftest/scale; no real measurement has a CV of 1e-9.) */
static void test_noisy_baseline_is_measured_again(void **state) {
    env *e = *state;
    sched sc;
    start_opts(&sc, e, 0, 1, 1e-9, 0);
    pk_completion *c = evaluate(&sc, e, correct_scale);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    assert_int_equal(c->result.baseline.cached, 0);
    assert_true(c->result.reference.median_us > 0 && c->result.reference.cv > 1e-9);
    pk_completion_free(c);
    pk_scheduler_stats st;
    pk_scheduler_get_stats(sc.s, &st);
    assert_int_equal(st.baseline_cache_hits, 0);
    assert_int_equal(st.baseline_cache_stale, 1);
    stop(&sc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_and_baseline_cache),
        cmocka_unit_test(test_old_baseline_is_measured_again),
        cmocka_unit_test(test_noisy_baseline_is_measured_again),
        cmocka_unit_test(test_compile_error_is_not_cached),
        cmocka_unit_test(test_identical_jobs_compile_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
