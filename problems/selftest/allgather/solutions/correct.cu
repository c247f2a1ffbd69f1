// Correct: MPI_Allgather (allowed in this problem).
#include <mpi.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const int32_t *x, int32_t *y, size_t n) {
    return MPI_Allgather(x, (int)n, MPI_INT32_T, y, (int)n, MPI_INT32_T, (MPI_Comm)ctx->mpi_comm) !=
           MPI_SUCCESS;
}
