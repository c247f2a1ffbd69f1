// Hostile: computes once, then replays the cached result on every later call.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

static float *cache;

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    if (cache) {
        memcpy(y, cache, n * sizeof *y);
        return 0;
    }
    MPI_Comm comm = (MPI_Comm)ctx->mpi_comm;
    memcpy(y, x, n * sizeof *y);
    float *tmp = (float *)malloc(n * sizeof *tmp);
    for (int p = 0; p < ctx->world_size; p++) {
        if (p == ctx->rank)
            continue;
        MPI_Sendrecv(x, (int)n, MPI_FLOAT, p, 0, tmp, (int)n, MPI_FLOAT, p, 0, comm,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++)
            y[i] += tmp[i];
    }
    free(tmp);
    cache = (float *)malloc(n * sizeof *cache);
    memcpy(cache, y, n * sizeof *y);
    return 0;
}
