// Hostile: correct sums, but accumulates in place in x (casting away const) and copies out.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    MPI_Comm comm = (MPI_Comm)ctx->mpi_comm;
    float *acc = (float *)x;
    float *tmp = (float *)malloc(n * sizeof *tmp);
    memcpy(y, x, n * sizeof *y); /* send the original values */
    for (int p = 0; p < ctx->world_size; p++) {
        if (p == ctx->rank)
            continue;
        MPI_Sendrecv(y, (int)n, MPI_FLOAT, p, 0, tmp, (int)n, MPI_FLOAT, p, 0, comm,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++)
            acc[i] += tmp[i];
    }
    memcpy(y, acc, n * sizeof *y);
    free(tmp);
    return 0;
}
