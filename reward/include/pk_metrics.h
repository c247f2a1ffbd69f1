/* pk_metrics: evaluation metrics over trajectories (Kevin; Chen et al. 2021 for pass@k).
 *
 * A trajectory is correct when any turn is correct; its performance is its best speedup
 * over correct turns (0 when none). Shared by `pkgym eval` and `pkgym reward`.
 */
#ifndef PK_METRICS_H
#define PK_METRICS_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One trajectory's turns, borrowed (not owned). */
typedef struct pk_trajectory {
    int n_turns;
    const pk_status *status;
    const double *speedup; /* per turn; read only where status is correct */
} pk_trajectory;

int pk_traj_correct(const pk_trajectory *t);
/* Best speedup over correct turns, 0 when none. */
double pk_traj_best_speedup(const pk_trajectory *t);
/* 1 when a correct turn has speedup >= p (fast_0 == correct). */
int pk_traj_fast_p(const pk_trajectory *t, double p);
/* Best speedup within the first `turns` turns (all turns when it has fewer). */
double pk_traj_best_speedup_within(const pk_trajectory *t, int turns);

/* Unbiased pass@k of n samples with c correct: 1 - C(n-c,k)/C(n,k). Needs 1 <= k <= n. */
int pk_pass_at_k(int n, int c, int k, double *out, pk_error *err);
/* Expected max of a random size-k subset of values[0..n): sum_i v_(i) C(i-1,k-1)/C(n,k),
 * v sorted ascending, i 1-based. Needs 1 <= k <= n. */
int pk_best_at_k(const double *values, int n, int k, double *out, pk_error *err);
/* Expected mean of a random size-k subset, which is the mean of all n. Needs 1 <= k <= n. */
int pk_avg_at_k(const double *values, int n, int k, double *out, pk_error *err);
/* out[t-1] = mean over trajectories of the best speedup within the first t turns, for
 * t = 1..max_turns. Needs n >= 1. */
int pk_best_so_far(const pk_trajectory *trajs, int n, int max_turns, double *out, pk_error *err);

/* Per-problem summary of n trajectories (k for pass/best/avg; p for fast_p). */
typedef struct pk_metrics_summary {
    int n, n_correct;
    double correct_rate;      /* n_correct / n */
    double mean_best_speedup; /* mean of per-trajectory best speedups (0 for incorrect) */
    double fast_p;            /* fraction with fast_p */
    double pass_at_k, best_at_k, avg_at_k;
} pk_metrics_summary;
int pk_metrics_summarize(const pk_trajectory *trajs, int n, int k, double p,
                         pk_metrics_summary *out, pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
