// Hostile: defines cudaEventElapsedTime to report a tiny time (interposes the CUDA runtime).
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    *ms = 0.001f;
    return cudaSuccess;
}

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
            y[i] += tmp[i];
    }
    free(tmp);
    return 0;
}
