// Hostile: calls MPI_Allreduce, which this problem forbids (it asks for a hand-written one).
#include <mpi.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    return MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, (MPI_Comm)ctx->mpi_comm) != MPI_SUCCESS;
}
