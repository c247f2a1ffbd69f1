// Hostile: every rank returns correct outputs, then calls exit(0) on its third call, as if
// the run had finished. nvcc's host stubs of __device__ functions call exit(), so the symbol
// is allowed; an exit before the runner reports must be a failure, never a verdict.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    static int calls;
    if (++calls == 3)
        exit(0); /* the third call: correct outputs in the first two */
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
    return 0;
}
