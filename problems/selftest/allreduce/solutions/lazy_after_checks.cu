// Hostile twin of collectives/allreduce hostile_lazy_after_checks.cu: the whole sum for
// its first 8 calls (every trial), half of it afterwards. Expected: incorrect.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

// The correct pairwise exchange, summing only the first `part` elements of y.
static int all_reduce(const pk_ctx *ctx, const float *x, float *y, size_t n, size_t part) {
    MPI_Comm comm = (MPI_Comm)ctx->mpi_comm;
    memcpy(y, x, part * sizeof *y);
    float *tmp = (float *)malloc(n * sizeof *tmp);
    if (!tmp)
        return 1;
    for (int p = 0; p < ctx->world_size; p++) {
        if (p == ctx->rank)
            continue;
        MPI_Sendrecv(x, (int)n, MPI_FLOAT, p, 0, tmp, (int)n, MPI_FLOAT, p, 0, comm,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < part; i++)
            y[i] += tmp[i];
    }
    free(tmp);
    return 0;
}

static int calls;

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    return all_reduce(ctx, x, y, n, ++calls <= 8 ? n : n / 2);
}
