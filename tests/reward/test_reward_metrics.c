/* Metrics against hand-computed values, and best@k against brute force over all subsets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "near.h"
#include "pk_metrics.h"

#define EPS 1e-12

/* A: compile error, 1.2x, 0.9x. B: 0.5x, incorrect (its 5x is not a result), 2.0x. C: wrong. */
static const pk_status st_a[] = {PK_STATUS_COMPILE_ERROR, PK_STATUS_CORRECT, PK_STATUS_CORRECT};
static const double sp_a[] = {0, 1.2, 0.9};
static const pk_status st_b[] = {PK_STATUS_CORRECT, PK_STATUS_INCORRECT, PK_STATUS_CORRECT};
static const double sp_b[] = {0.5, 5.0, 2.0};
static const pk_status st_c[] = {PK_STATUS_INCORRECT};
static const double sp_c[] = {3.0};

static const pk_trajectory trajs[] = {{3, st_a, sp_a}, {3, st_b, sp_b}, {1, st_c, sp_c}};

static void per_trajectory(void **state) {
    (void)state;
    assert_true(pk_traj_correct(&trajs[0]));
    assert_true(pk_traj_correct(&trajs[1]));
    assert_false(pk_traj_correct(&trajs[2]));
    assert_near(pk_traj_best_speedup(&trajs[0]), 1.2, EPS);
    assert_near(pk_traj_best_speedup(&trajs[1]), 2.0, EPS);
    assert_near(pk_traj_best_speedup(&trajs[2]), 0.0, EPS);
    assert_true(pk_traj_fast_p(&trajs[0], 1.0));
    assert_false(pk_traj_fast_p(&trajs[0], 1.5));
    assert_true(pk_traj_fast_p(&trajs[1], 2.0));  /* >= p */
    assert_false(pk_traj_fast_p(&trajs[1], 2.5)); /* the incorrect 5x does not count */
    assert_true(pk_traj_fast_p(&trajs[1], 0.0));
    assert_false(pk_traj_fast_p(&trajs[2], 0.0));
    assert_near(pk_traj_best_speedup_within(&trajs[1], 2), 0.5, EPS);
}

static void pass_at_k(void **state) {
    (void)state;
    double v;
    pk_error err = {0};
    /* n = 5, c = 2: k=1 0.4; k=2 1 - C(3,2)/C(5,2) = 0.7; k=3 1 - 1/10 = 0.9; k=4 1. */
    const double want[] = {0.4, 0.7, 0.9, 1.0, 1.0};
    for (int k = 1; k <= 5; k++) {
        assert_int_equal(pk_pass_at_k(5, 2, k, &v, &err), PK_OK);
        assert_near(v, want[k - 1], EPS);
    }
    assert_int_equal(pk_pass_at_k(16, 0, 8, &v, &err), PK_OK);
    assert_near(v, 0.0, EPS);
    assert_int_equal(pk_pass_at_k(16, 16, 1, &v, &err), PK_OK);
    assert_near(v, 1.0, EPS);
    /* n = 100, c = 3, k = 10: 1 - C(97,10)/C(100,10) = 1 - (90*89*88)/(100*99*98). */
    assert_int_equal(pk_pass_at_k(100, 3, 10, &v, &err), PK_OK);
    assert_near(v, 1.0 - (90.0 * 89 * 88) / (100.0 * 99 * 98), 1e-12);
    assert_int_equal(pk_pass_at_k(5, 2, 0, &v, &err), PK_ERR_INVALID);
    assert_int_equal(pk_pass_at_k(5, 2, 6, &v, &err), PK_ERR_INVALID);
    assert_int_equal(pk_pass_at_k(5, 6, 1, &v, &err), PK_ERR_INVALID);
}

static void best_and_avg_at_k(void **state) {
    (void)state;
    const double v[] = {0, 1.2, 0.5, 2.0};
    double got;
    pk_error err = {0};
    /* k=2: the six pairs' maxima 0.5, 1.2, 2, 1.2, 2, 2 sum to 8.9. k=3: (1.2 + 3*2)/4. */
    const double want[] = {3.7 / 4, 8.9 / 6, 7.2 / 4, 2.0};
    for (int k = 1; k <= 4; k++) {
        assert_int_equal(pk_best_at_k(v, 4, k, &got, &err), PK_OK);
        assert_near(got, want[k - 1], EPS);
        assert_int_equal(pk_avg_at_k(v, 4, k, &got, &err), PK_OK);
        assert_near(got, 3.7 / 4, EPS);
    }
    assert_int_equal(pk_best_at_k(v, 4, 5, &got, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "k"));
    assert_int_equal(pk_avg_at_k(v, 4, 0, &got, &err), PK_ERR_INVALID);
}

/* Enumerates every size-k subset of n <= 12 values: the mean of their maxima. */
static double brute_best_at_k(const double *v, int n, int k) {
    double sum = 0.0;
    int count = 0;
    for (unsigned mask = 0; mask < (1u << n); mask++) {
        if (__builtin_popcount(mask) != k)
            continue;
        double best = -1e300;
        for (int i = 0; i < n; i++)
            if ((mask >> i) & 1u && v[i] > best)
                best = v[i];
        sum += best;
        count++;
    }
    return sum / count;
}

static void best_at_k_matches_brute_force(void **state) {
    (void)state;
    /* Ties and zeros included, in no particular order. */
    const double v[] = {1.5, 0, 0.7, 2.25, 0, 1.5, 3.0, 0.1, 1.1, 0.9, 2.25};
    const int n = sizeof v / sizeof *v;
    pk_error err = {0};
    for (int k = 1; k <= n; k++) {
        double got;
        assert_int_equal(pk_best_at_k(v, n, k, &got, &err), PK_OK);
        assert_near(got, brute_best_at_k(v, n, k), 1e-12);
    }
}

static void best_so_far_by_turn(void **state) {
    (void)state;
    double out[3];
    pk_error err = {0};
    assert_int_equal(pk_best_so_far(trajs, 3, 3, out, &err), PK_OK);
    assert_near(out[0], 0.5 / 3, EPS);
    assert_near(out[1], 1.7 / 3, EPS);
    assert_near(out[2], 3.2 / 3, EPS);
    assert_int_equal(pk_best_so_far(trajs, 0, 3, out, &err), PK_ERR_INVALID);
}

static void summary(void **state) {
    (void)state;
    pk_metrics_summary m;
    pk_error err = {0};
    assert_int_equal(pk_metrics_summarize(trajs, 3, 2, 1.0, &m, &err), PK_OK);
    assert_int_equal(m.n, 3);
    assert_int_equal(m.n_correct, 2);
    assert_near(m.correct_rate, 2.0 / 3, EPS);
    assert_near(m.mean_best_speedup, 3.2 / 3, EPS);
    assert_near(m.fast_p, 2.0 / 3, EPS);
    assert_near(m.pass_at_k, 1.0, EPS); /* only one incorrect trajectory: any pair has a pass */
    assert_near(m.best_at_k, (1.2 * 1 + 2.0 * 2) / 3, EPS);
    assert_near(m.avg_at_k, 3.2 / 3, EPS);
    assert_int_equal(pk_metrics_summarize(trajs, 3, 4, 1.0, &m, &err), PK_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(per_trajectory),      cmocka_unit_test(pass_at_k),
        cmocka_unit_test(best_and_avg_at_k),   cmocka_unit_test(best_at_k_matches_brute_force),
        cmocka_unit_test(best_so_far_by_turn), cmocka_unit_test(summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
