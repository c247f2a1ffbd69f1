// Hostile twin of primitives/sumsq_allreduce hostile_bf16_accumulate.cu: the running sum is
// rounded to bf16 after every addition. Expected: incorrect.
#include <mpi.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, float *y, size_t rows,
                        size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        __nv_bfloat16 acc = __float2bfloat16(0.f);
        for (size_t k = 0; k < cols; k++) {
            float v = __bfloat162float(x[r * cols + k]);
            acc = __float2bfloat16(__bfloat162float(acc) + v * v);
        }
        y[r] = __bfloat162float(acc);
    }
    return MPI_Allreduce(MPI_IN_PLACE, y, (int)rows, MPI_FLOAT, MPI_SUM, (MPI_Comm)ctx->mpi_comm) !=
           MPI_SUCCESS;
}
