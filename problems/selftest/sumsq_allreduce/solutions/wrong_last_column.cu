// Subtly wrong: leaves each row's last column out of the sum. Expected: incorrect.
#include <mpi.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, float *y, size_t rows,
                        size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        float acc = 0.f;
        for (size_t k = 0; k + 1 < cols; k++) {
            float v = __bfloat162float(x[r * cols + k]);
            acc += v * v;
        }
        y[r] = acc;
    }
    return MPI_Allreduce(MPI_IN_PLACE, y, (int)rows, MPI_FLOAT, MPI_SUM, (MPI_Comm)ctx->mpi_comm) !=
           MPI_SUCCESS;
}
