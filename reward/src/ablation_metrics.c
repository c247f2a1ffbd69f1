/* Per-problem metrics of an ablation run, so a reward study also reports correctness and
 * speedups (pass@k, best@k, avg@k, fast_p) of the same trajectories. */
#include <stdlib.h>
#include <string.h>

#include "ablation.h"

int pk_ablation_problem_metrics(const pk_ablation *a, const char *problem_id, int k, double p,
                                pk_metrics_summary *out, pk_error *err) {
    pk_trajectory *trajs = calloc((size_t)a->n_episodes + 1, sizeof *trajs);
    pk_status **status = calloc((size_t)a->n_episodes + 1, sizeof *status);
    double **speedup = calloc((size_t)a->n_episodes + 1, sizeof *speedup);
    int n = 0, rc = PK_OK;
    if (!trajs || !status || !speedup)
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (int i = 0; rc == PK_OK && i < a->n_episodes; i++) {
        const pk_ablation_episode *e = &a->episodes[i];
        if (strcmp(e->problem_id, problem_id) != 0)
            continue;
        size_t m = e->n_turns ? (size_t)e->n_turns : 1;
        status[n] = malloc(m * sizeof **status);
        speedup[n] = malloc(m * sizeof **speedup);
        if (!status[n] || !speedup[n]) {
            n++;
            rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
            break;
        }
        for (int t = 0; t < e->n_turns; t++) {
            status[n][t] = e->turns[t].status;
            speedup[n][t] = e->turns[t].speedup;
        }
        trajs[n] = (pk_trajectory){e->n_turns, status[n], speedup[n]};
        n++;
    }
    if (rc == PK_OK)
        rc = pk_metrics_summarize(trajs, n, k, p, out, err);
    for (int i = 0; i < n; i++) {
        free(status[i]);
        free(speedup[i]);
    }
    free(trajs);
    free(status);
    free(speedup);
    return rc;
}
