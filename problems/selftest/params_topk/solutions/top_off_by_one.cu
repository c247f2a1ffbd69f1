// Wrong: reports the (k+1)-th largest instead of the k-th. Expected: incorrect.
#include <math.h>
#include <mpi.h>
#include <stdlib.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, int64_t *top, int8_t *q,
                        size_t n, int k, float scale, int step) {
    if (MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, (MPI_Comm)ctx->mpi_comm) != MPI_SUCCESS)
        return 1;
    float amax = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] *= scale * (float)step;
        amax = fmaxf(amax, fabsf(y[i]));
    }
    char *taken = (char *)calloc(n, 1);
    if (!taken)
        return 2;
    for (int j = 0; j < k; j++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!taken[i] && (best == n || fabsf(y[i]) > fabsf(y[best])))
                best = i;
        taken[best] = 1;
        top[j] = (int64_t)best;
    }
    for (size_t i = 0, done = 0; i < n && !done; i++) /* one more, in the last slot */
        if (!taken[i] && fabsf(y[i]) <= fabsf(y[top[k - 1]])) {
            size_t best = i;
            for (size_t m = i; m < n; m++)
                if (!taken[m] && fabsf(y[m]) > fabsf(y[best]))
                    best = m;
            top[k - 1] = (int64_t)best;
            done = 1;
        }
    free(taken);
    for (size_t i = 0; i < n; i++)
        q[i] = (int8_t)lrintf(amax > 0 ? 127.0f * y[i] / amax : 0.0f);
    return 0;
}
