// selftest/params_topk: y = scale * step * (sum over ranks of x); top = the indices of the k
// largest |y| (any order; ties may go either way: a custom checker); q = round(127 y / max|y|)
// as int8 (one rounding flip at a .5 boundary is allowed: a budget checker). Exercises the
// params, the checkers and the dims presets of the problem format on the CPU.
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const float *, float *, int64_t *, int8_t *, size_t, int,
                        float, int);

static int by_magnitude(const void *a, const void *b, void *y) {
    float fa = fabsf(((const float *)y)[*(const int64_t *)a]);
    float fb = fabsf(((const float *)y)[*(const int64_t *)b]);
    return (fa < fb) - (fa > fb);
}

static int reference(const pk_problem_call *c) {
    const size_t n = (size_t)c->dims[0];
    const int k = (int)c->dims[1];
    const float scale = (float)c->params[0];
    const int step = (int)c->params[1];
    float *y = (float *)c->args[1];
    int64_t *top = (int64_t *)c->args[2];
    int8_t *q = (int8_t *)c->args[3];
    if (MPI_Allreduce(c->args[0], y, (int)n, MPI_FLOAT, MPI_SUM, (MPI_Comm)c->ctx->mpi_comm) !=
        MPI_SUCCESS)
        return 1;
    float amax = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] *= scale * (float)step;
        amax = fmaxf(amax, fabsf(y[i]));
    }
    int64_t *order = (int64_t *)malloc(n * sizeof *order);
    if (!order)
        return 2;
    for (size_t i = 0; i < n; i++)
        order[i] = (int64_t)i;
    qsort_r(order, n, sizeof *order, by_magnitude, y);
    for (int i = 0; i < k; i++)
        top[i] = order[i];
    free(order);
    for (size_t i = 0; i < n; i++)
        q[i] = (int8_t)lrintf(amax > 0 ? 127.0f * y[i] / amax : 0.0f);
    return 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    return ((entry_fn)fn)(c->ctx, (const float *)c->args[0], (float *)c->args[1],
                          (int64_t *)c->args[2], (int8_t *)c->args[3], (size_t)c->dims[0],
                          (int)c->dims[1], (float)c->params[0], (int)c->params[1]);
}

/* `top` is right when it holds k distinct valid indices whose |y| are all at least the k-th
 * largest |y| of the reference's y: any tie order, any choice among equal values. */
static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    const size_t n = (size_t)want->dims[0];
    const int k = (int)want->dims[1];
    const float *y = (const float *)want->args[1];
    const int64_t *wt = (const int64_t *)want->args[arg], *gt = (const int64_t *)got->args[arg];
    float kth = fabsf(y[wt[k - 1]]);
    out->passed = 1;
    out->bad_index = -1;
    char *seen = (char *)calloc(n, 1);
    if (!seen)
        return 1;
    for (int i = 0; i < k && out->passed; i++) {
        int64_t g = gt[i];
        if (g < 0 || (size_t)g >= n || seen[g] || fabsf(y[g]) < kth) {
            out->passed = 0;
            out->bad_index = i;
            out->expected = (double)wt[i];
            out->got = (double)g;
        } else {
            seen[g] = 1;
        }
    }
    free(seen);
    return 0;
}

static const pk_problem_module module = {
    PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, check};

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return &module;
}
