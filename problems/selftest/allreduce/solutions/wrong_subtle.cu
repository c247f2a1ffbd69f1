// Subtly wrong: peers' contributions are scaled by (1 + 1/1024), a 1e-3 relative error.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    MPI_Comm comm = (MPI_Comm)ctx->mpi_comm;
    memcpy(y, x, n * sizeof *y);
    float *tmp = (float *)malloc(n * sizeof *tmp);
    for (int p = 0; p < ctx->world_size; p++) {
        if (p == ctx->rank)
            continue;
        MPI_Sendrecv(x, (int)n, MPI_FLOAT, p, 0, tmp, (int)n, MPI_FLOAT, p, 0, comm,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++)
            y[i] += tmp[i] * (1.0f + 1.0f / 1024);
    }
    free(tmp);
    return 0;
}
