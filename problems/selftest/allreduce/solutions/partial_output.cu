// Hostile: computes only the first half of y; the rest keeps the harness's NaN poison.
#include <mpi.h>
#include <stdlib.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    MPI_Comm comm = (MPI_Comm)ctx->mpi_comm;
    size_t half = n / 2;
    float *tmp = (float *)malloc(half * sizeof *tmp);
    for (size_t i = 0; i < half; i++)
        y[i] = x[i];
    for (int p = 0; p < ctx->world_size; p++) {
        if (p == ctx->rank)
            continue;
        MPI_Sendrecv(x, (int)half, MPI_FLOAT, p, 0, tmp, (int)half, MPI_FLOAT, p, 0, comm,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < half; i++)
            y[i] += tmp[i];
    }
    free(tmp);
    return 0;
}
