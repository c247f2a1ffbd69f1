// Subtly wrong: places the blocks in reverse rank order.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const int32_t *x, int32_t *y, size_t n) {
    int w = ctx->world_size;
    int32_t *tmp = (int32_t *)malloc(n * (size_t)w * sizeof *tmp);
    MPI_Allgather(x, (int)n, MPI_INT32_T, tmp, (int)n, MPI_INT32_T, (MPI_Comm)ctx->mpi_comm);
    for (int r = 0; r < w; r++)
        memcpy(y + (size_t)r * n, tmp + (size_t)(w - 1 - r) * n, n * sizeof *y);
    free(tmp);
    return 0;
}
