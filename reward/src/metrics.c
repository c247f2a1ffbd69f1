/* Trajectory metrics (Kevin) and the unbiased pass@k / best@k estimators (Chen et al. 2021). */
#include "pk_metrics.h"

#include <stdlib.h>

int pk_traj_correct(const pk_trajectory *t) {
    for (int i = 0; i < t->n_turns; i++)
        if (t->status[i] == PK_STATUS_CORRECT)
            return 1;
    return 0;
}

double pk_traj_best_speedup_within(const pk_trajectory *t, int turns) {
    double best = 0.0;
    int n = turns < t->n_turns ? turns : t->n_turns;
    for (int i = 0; i < n; i++)
        if (t->status[i] == PK_STATUS_CORRECT && t->speedup[i] > best)
            best = t->speedup[i];
    return best;
}

double pk_traj_best_speedup(const pk_trajectory *t) {
    return pk_traj_best_speedup_within(t, t->n_turns);
}

int pk_traj_fast_p(const pk_trajectory *t, double p) {
    for (int i = 0; i < t->n_turns; i++)
        if (t->status[i] == PK_STATUS_CORRECT && t->speedup[i] >= p)
            return 1;
    return 0;
}

static int check_nk(int n, int k, const char *what, pk_error *err) {
    if (n < 1 || k < 1 || k > n)
        return pk_error_set(err, PK_ERR_INVALID, "%s: need 1 <= k <= n (n=%d, k=%d)", what, n, k);
    return PK_OK;
}

int pk_pass_at_k(int n, int c, int k, double *out, pk_error *err) {
    int rc = check_nk(n, k, "pass@k", err);
    if (rc)
        return rc;
    if (c < 0 || c > n)
        return pk_error_set(err, PK_ERR_INVALID, "pass@k: need 0 <= c <= n (n=%d, c=%d)", n, c);
    if (n - c < k) {
        *out = 1.0;
        return PK_OK;
    }
    /* C(n-c,k)/C(n,k) = prod_{i=n-c+1}^{n} (1 - k/i): no large binomials. */
    double miss = 1.0;
    for (int i = n - c + 1; i <= n; i++)
        miss *= 1.0 - (double)k / i;
    *out = 1.0 - miss;
    return PK_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int pk_best_at_k(const double *values, int n, int k, double *out, pk_error *err) {
    int rc = check_nk(n, k, "best@k", err);
    if (rc)
        return rc;
    double *v = malloc(sizeof *v * (size_t)n);
    if (!v)
        return pk_error_set(err, PK_ERR_NOMEM, "best@k: out of memory");
    for (int i = 0; i < n; i++)
        v[i] = values[i];
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    /* w_i = C(i-1,k-1)/C(n,k): w_n = k/n, w_{i-1} = w_i (i-k)/(i-1); w_i = 0 for i < k. */
    double sum = 0.0, w = (double)k / n;
    for (int i = n; i >= k; i--) {
        sum += v[i - 1] * w;
        if (i > 1)
            w *= (double)(i - k) / (i - 1);
    }
    free(v);
    *out = sum;
    return PK_OK;
}

int pk_avg_at_k(const double *values, int n, int k, double *out, pk_error *err) {
    int rc = check_nk(n, k, "avg@k", err);
    if (rc)
        return rc;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += values[i];
    *out = sum / n;
    return PK_OK;
}

int pk_best_so_far(const pk_trajectory *trajs, int n, int max_turns, double *out, pk_error *err) {
    if (n < 1 || max_turns < 1)
        return pk_error_set(err, PK_ERR_INVALID, "best-so-far: need trajectories and turns");
    for (int t = 1; t <= max_turns; t++) {
        double sum = 0.0;
        for (int j = 0; j < n; j++)
            sum += pk_traj_best_speedup_within(&trajs[j], t);
        out[t - 1] = sum / n;
    }
    return PK_OK;
}

int pk_metrics_summarize(const pk_trajectory *trajs, int n, int k, double p,
                         pk_metrics_summary *out, pk_error *err) {
    int rc = check_nk(n, k, "metrics", err);
    if (rc)
        return rc;
    double *best = malloc(sizeof *best * (size_t)n);
    if (!best)
        return pk_error_set(err, PK_ERR_NOMEM, "metrics: out of memory");
    pk_metrics_summary m = {.n = n};
    int fast = 0;
    double sum_best = 0.0;
    for (int i = 0; i < n; i++) {
        m.n_correct += pk_traj_correct(&trajs[i]);
        fast += pk_traj_fast_p(&trajs[i], p);
        best[i] = pk_traj_best_speedup(&trajs[i]);
        sum_best += best[i];
    }
    m.correct_rate = (double)m.n_correct / n;
    m.mean_best_speedup = sum_best / n;
    m.fast_p = (double)fast / n;
    rc = pk_pass_at_k(n, m.n_correct, k, &m.pass_at_k, err);
    if (!rc)
        rc = pk_best_at_k(best, n, k, &m.best_at_k, err);
    if (!rc)
        rc = pk_avg_at_k(best, n, k, &m.avg_at_k, err);
    free(best);
    if (!rc)
        *out = m;
    return rc;
}
