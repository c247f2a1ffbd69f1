/* The run watcher's policy (problems/src/pk_job_watch.h): phase budgets derived from the
 * problem and from the phases seen so far, the run limit extended by lock waits (capped),
 * and the deadline it keeps in the sandbox's place, with a real watcher thread reading a real
 * marker file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_common.h"
#include "pk_job_watch.h"

/* A marker without times (seq and state only: what the watcher sees itself). */
static const pk_lock_marker *seen(unsigned seq, int state) {
    static pk_lock_marker m;
    m = (pk_lock_marker){.seq = seq, .state = state};
    return &m;
}

static pk_problem problem(int warmup_ms, int iters) {
    pk_problem p;
    memset(&p, 0, sizeof p);
    p.warmup_ms = warmup_ms;
    p.warmup_iters = 50;
    p.iters = iters;
    return p;
}

static void test_marker_parse(void **state) {
    pk_lock_marker m;
    assert_int_equal(pk_lock_marker_parse("7 exclusive\n", &m), 0);
    assert_int_equal(m.seq, 7);
    assert_int_equal(m.state, PK_LOCK_STATE_EXCLUSIVE);
    assert_int_equal(m.full, 0);
    assert_int_equal(pk_lock_marker_parse("8 wait-shared 1234.5 20.25 7.5\n", &m), 0);
    assert_int_equal(m.state, PK_LOCK_STATE_WAIT_SHARED);
    assert_int_equal(m.full, 1);
    assert_true(m.since_ms == 1234.5 && m.longest_shared_ms == 20.25 && m.waited_ms == 7.5);
    assert_int_equal(pk_lock_marker_parse("9 none\n", &m), 0);
    assert_int_equal(m.state, PK_LOCK_STATE_NONE);
    assert_int_equal(pk_lock_marker_parse("10 exclusive 1234.5 20.25 7.5 812.5\n", &m), 0);
    assert_int_equal(m.full, 1);
    assert_true(m.expect_ms == 812.5);
    /* A negative or absurd estimate makes the marker unusable for its times, not a budget. */
    assert_int_equal(pk_lock_marker_parse("11 exclusive 1234.5 20.25 7.5 -1\n", &m), 0);
    assert_int_equal(m.full, 0);
    assert_true(m.expect_ms == 0);
    assert_int_equal(pk_lock_marker_parse("12 exclusive 1 2 3 1e300\n", &m), 0);
    assert_int_equal(m.full, 0);
    assert_int_equal(pk_lock_marker_parse("9 none 1 2\n", &m), -1);
    assert_int_equal(pk_lock_marker_parse("", &m), -1);
    assert_int_equal(pk_lock_marker_parse("x shared", &m), -1);
    assert_int_equal(pk_lock_marker_parse("3 sharedish", &m), -1);
    assert_int_equal(pk_lock_marker_parse(NULL, &m), -1);
}

/* Markers with the runner's times: phases shorter than a poll count exactly, the phase starts
 * when the runner says (never later than now), the runner's wait total is the credit. */
static void test_runner_times(void **state) {
    pk_problem p = problem(300, 100);
    pk_phase_track t;
    pk_phase_track_init(&t, &p, 60000);
    pk_lock_marker m = {.seq = 5,
                        .state = PK_LOCK_STATE_NONE,
                        .since_ms = 990,
                        .longest_shared_ms = 5,
                        .waited_ms = 40,
                        .full = 1};
    pk_phase_track_observe(&t, &m, 1000);
    assert_true(t.longest_shared_ms == 5);
    assert_true(t.waited_ms == 40);
    int calls = 2 * (16 + 125) + 192;
    assert_int_equal(pk_phase_budget_ms(&t, 1), 10000); /* 3 x (600 + calls x 5) < 10 s */
    m = (pk_lock_marker){.seq = 6,
                         .state = PK_LOCK_STATE_WAIT_EXCLUSIVE,
                         .since_ms = 1005,
                         .longest_shared_ms = 9,
                         .waited_ms = 40,
                         .full = 1};
    pk_phase_track_observe(&t, &m, 1020);
    assert_true(t.phase_start == 1005);
    assert_true(t.waited_ms == 55); /* 40 before, 15 in this wait */
    m = (pk_lock_marker){.seq = 7,
                         .state = PK_LOCK_STATE_EXCLUSIVE,
                         .since_ms = 1500,
                         .longest_shared_ms = 9,
                         .waited_ms = 535,
                         .full = 1};
    pk_phase_track_observe(&t, &m, 1400); /* a clock ahead of ours is not believed */
    assert_true(t.phase_start == 1400);
    assert_true(t.waited_ms == 535);
    int bound;
    double d = pk_phase_track_deadline(&t, 500, &bound);
    assert_int_equal(bound, PK_BOUND_EXCLUSIVE);
    assert_true(d == 1400 + (int)(3 * (600 + calls * 9.0))); /* 9 ms trials: above the floor */
    /* A slow but honest candidate (120 ms trials): timing gets 3 x its own pace. */
    m = (pk_lock_marker){.seq = 8,
                         .state = PK_LOCK_STATE_NONE,
                         .since_ms = 1600,
                         .longest_shared_ms = 120,
                         .waited_ms = 535,
                         .full = 1};
    pk_phase_track_observe(&t, &m, 1600);
    assert_int_equal(pk_phase_budget_ms(&t, 1), 60000); /* capped at the run limit */
    assert_int_equal(pk_phase_budget_ms(&t, 0), 10000);
}

static void test_budgets(void **state) {
    pk_problem p = problem(300, 100);
    pk_phase_track t;
    pk_phase_track_init(&t, &p, 60000);
    /* Nothing seen yet: both phases get the floor (10 s at a 60 s run limit). */
    assert_int_equal(pk_phase_budget_ms(&t, 0), 10000);
    assert_int_equal(pk_phase_budget_ms(&t, 1), 10000);
    /* A short run limit lowers the floor to a quarter of it. */
    pk_phase_track short_limit;
    pk_phase_track_init(&short_limit, &p, 8000);
    assert_int_equal(pk_phase_budget_ms(&short_limit, 0), 2000);
    /* A 3 s trial: later trials may take 4x, timing 3 x (2 x 300 + calls x 3000), capped at
     * the run limit. */
    pk_phase_track_observe(&t, seen(1, PK_LOCK_STATE_SHARED), 1000);
    pk_phase_track_observe(&t, seen(2, PK_LOCK_STATE_NONE), 4000);
    assert_true(t.longest_shared_ms == 3000);
    assert_int_equal(pk_phase_budget_ms(&t, 0), 12000);
    assert_int_equal(pk_phase_budget_ms(&t, 1), 60000);
    /* Fast trials (10 ms): timing's budget from the problem's calls, above the floor. */
    pk_phase_track fast;
    pk_phase_track_init(&fast, &p, 60000);
    pk_phase_track_observe(&fast, seen(1, PK_LOCK_STATE_SHARED), 100);
    pk_phase_track_observe(&fast, seen(2, PK_LOCK_STATE_NONE), 110);
    int calls = 2 * (16 + 125) + 192;
    assert_int_equal(fast.exclusive_calls, calls);
    assert_int_equal(pk_phase_budget_ms(&fast, 1), (int)(3 * (2 * 300 + calls * 10.0)));
    assert_int_equal(pk_phase_budget_ms(&fast, 0), 10000);
}

static void test_deadlines(void **state) {
    pk_problem p = problem(300, 100);
    pk_phase_track t;
    pk_phase_track_init(&t, &p, 60000);
    int bound;
    /* No base yet (a warm run before go) and no phase: no deadline. */
    assert_true(pk_phase_track_deadline(&t, 0, &bound) == 0);
    assert_int_equal(bound, PK_BOUND_NONE);
    assert_true(pk_phase_track_deadline(&t, 1000, &bound) == 61000);
    assert_int_equal(bound, PK_BOUND_RUN);
    /* Waiting for others' locks: the wait is credited to the run limit ... */
    pk_phase_track_observe(&t, seen(1, PK_LOCK_STATE_WAIT_EXCLUSIVE), 2000);
    pk_phase_track_observe(&t, seen(1, PK_LOCK_STATE_WAIT_EXCLUSIVE), 5000);
    pk_phase_track_observe(&t, seen(2, PK_LOCK_STATE_EXCLUSIVE), 9000);
    assert_true(t.waited_ms == 7000);
    /* ... and holding the GPUs exclusively is bounded by timing's budget from 9000. */
    assert_true(pk_phase_track_deadline(&t, 1000, &bound) == 19000);
    assert_int_equal(bound, PK_BOUND_EXCLUSIVE);
    /* Time in a held phase is not credited. */
    pk_phase_track_observe(&t, seen(3, PK_LOCK_STATE_NONE), 12000);
    assert_true(t.waited_ms == 7000);
    assert_true(pk_phase_track_deadline(&t, 1000, &bound) == 68000);
    assert_int_equal(bound, PK_BOUND_RUN);
    /* The credit is capped at one more run limit. */
    pk_phase_track_observe(&t, seen(4, PK_LOCK_STATE_WAIT_SHARED), 12000);
    pk_phase_track_observe(&t, seen(4, PK_LOCK_STATE_WAIT_SHARED), 500000);
    assert_true(pk_phase_track_deadline(&t, 1000, &bound) == 121000);
    /* A phase budget that ends after the run limit does not extend it. */
    pk_phase_track late;
    pk_phase_track_init(&late, &p, 60000);
    pk_phase_track_observe(&late, seen(1, PK_LOCK_STATE_SHARED), 59000);
    assert_true(pk_phase_track_deadline(&late, 1000, &bound) == 61000);
    assert_int_equal(bound, PK_BOUND_RUN);
}

/* With the runner's estimate of its timing phase (from its trials' pace), timing's budget is
 * 3 x the estimate + 1 s, at least 2 s, at most the run limit: a hung timing phase no longer
 * holds every job beside it for the problem-wide budget (36.6 s for an all-reduce whose trials
 * took ~25 ms, against a ~0.1 s timing phase). Shared phases keep theirs. */
static void test_expected_timing(void **state) {
    pk_problem p = problem(300, 100);
    pk_phase_track t;
    pk_phase_track_init(&t, &p, 60000);
    pk_lock_marker m = {
        .seq = 5, .state = PK_LOCK_STATE_NONE, .since_ms = 990, .longest_shared_ms = 25, .full = 1};
    pk_phase_track_observe(&t, &m, 1000);
    int old_budget = pk_phase_budget_ms(&t, 1);
    assert_int_equal(old_budget, (int)(3 * (600 + t.exclusive_calls * 25.0)));
    m.seq = 6;
    m.state = PK_LOCK_STATE_EXCLUSIVE;
    m.since_ms = 1010;
    m.expect_ms = 400;
    pk_phase_track_observe(&t, &m, 1020);
    assert_true(t.expect_ms == 400);
    assert_int_equal(pk_phase_budget_ms(&t, 1), 3 * 400 + 1000);
    assert_int_equal(pk_phase_budget_ms(&t, 0), 10000); /* shared: unchanged */
    int bound;
    assert_true(pk_phase_track_deadline(&t, 500, &bound) == 1010 + 2200);
    assert_int_equal(bound, PK_BOUND_EXCLUSIVE);
    /* A tiny estimate: the 2 s floor. A huge (or forged) one: the run limit. */
    m.seq = 7;
    m.expect_ms = 10;
    pk_phase_track_observe(&t, &m, 1030);
    assert_int_equal(pk_phase_budget_ms(&t, 1), 2000);
    m.seq = 8;
    m.expect_ms = 1e7;
    pk_phase_track_observe(&t, &m, 1040);
    assert_int_equal(pk_phase_budget_ms(&t, 1), 60000);
    /* A marker without the field (an older runner) clears it: the loose budget again. */
    m.seq = 9;
    m.expect_ms = 0;
    pk_phase_track_observe(&t, &m, 1050);
    assert_int_equal(pk_phase_budget_ms(&t, 1), old_budget);
}

/* The runner's set-up holds the locks shared but says "setup": no phase budget (a slow CUDA
 * context under load must not be cut by a trial's budget), and its length does not scale the
 * budgets of later phases (a trial's does). */
static void test_setup_phase(void **state) {
    pk_lock_marker m;
    assert_int_equal(pk_lock_marker_parse("4 setup 10.0 0.000 2.5\n", &m), 0);
    assert_int_equal(m.state, PK_LOCK_STATE_SETUP);
    assert_int_equal(m.full, 1);
    pk_problem p = problem(300, 100);
    pk_phase_track t;
    pk_phase_track_init(&t, &p, 60000);
    int bound;
    pk_phase_track_observe(&t, seen(1, PK_LOCK_STATE_SETUP), 1000);
    pk_phase_track_observe(&t, seen(1, PK_LOCK_STATE_SETUP), 30000); /* 29 s, still setting up */
    assert_true(pk_phase_track_deadline(&t, 500, &bound) == 60500);
    assert_int_equal(bound, PK_BOUND_RUN);
    pk_phase_track_observe(&t, seen(2, PK_LOCK_STATE_NONE), 31000);
    assert_true(t.longest_shared_ms == 0);
    assert_int_equal(pk_phase_budget_ms(&t, 0), 10000); /* the floor, as before any trial */
    assert_true(t.waited_ms == 0);
}

static void write_marker(const char *dir, const char *text) {
    char tmp[256], path[256];
    snprintf(tmp, sizeof tmp, "%s/locks.tmp", dir);
    snprintf(path, sizeof path, "%s/locks", dir);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A real watcher thread on a real marker: a shared phase moves the deadline to its budget,
 * its end moves it back, a wait extends the run limit, an abort overrides everything. */
static void test_watch_thread(void **state) {
    char dir[] = "/tmp/pk-test-watch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pk_problem p = problem(300, 100);
    pk_run_watch w;
    double deadline = 0;
    assert_int_equal(pk_run_watch_start(&w, &p, 8000, dir, 1, &deadline), PK_OK);
    double base = pk_now_ms();
    pk_run_watch_set_base(&w, base);
    assert_true(pk_deadline_load(&deadline) == base + 8000);
    double t_shared = pk_now_ms();
    write_marker(dir, "1 shared\n"); /* no times: when the watcher first sees it */
    sleep_ms(120);
    double d = pk_deadline_load(&deadline);
    /* Budget 2000 ms (a quarter of 8 s) from when the watcher saw the phase. */
    assert_true(d >= t_shared + 2000 && d <= t_shared + 2000 + 120);
    int budget;
    double waited;
    assert_int_equal(pk_run_watch_fired(&w, d, &budget, &waited), PK_BOUND_SHARED);
    assert_int_equal(budget, 2000);
    assert_int_equal(pk_run_watch_fired(&w, d - 1000, &budget, &waited), PK_BOUND_NONE);
    write_marker(dir, "2 wait-exclusive\n");
    sleep_ms(300);
    write_marker(dir, "3 none\n");
    sleep_ms(120);
    d = pk_deadline_load(&deadline);
    assert_true(d >= base + 8000 + 200 && d <= base + 8000 + 500); /* the wait, credited */
    pk_run_watch_abort(&w, 12345);
    assert_true(pk_deadline_load(&deadline) == 12345);
    sleep_ms(60);
    assert_true(pk_deadline_load(&deadline) == 12345); /* the thread does not undo it */
    pk_run_watch_stop(&w);
    /* Unlocked: no thread; the base deadline only. */
    pk_run_watch u;
    double du = 0;
    assert_int_equal(pk_run_watch_start(&u, &p, 5000, dir, 0, &du), PK_OK);
    assert_int_equal(u.started, 0);
    pk_run_watch_set_base(&u, 100);
    assert_true(pk_deadline_load(&du) == 5100);
    pk_run_watch_stop(&u);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marker_parse),    cmocka_unit_test(test_runner_times),
        cmocka_unit_test(test_budgets),         cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_watch_thread),    cmocka_unit_test(test_setup_phase),
        cmocka_unit_test(test_expected_timing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
