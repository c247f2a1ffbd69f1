// Correct: four fp32 partial sums per row (another order than the reference's), one
// MPI_Allreduce of the row sums, then the reference's roundings.
#include <mpi.h>

#include <math.h>
#include <stdlib.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                        __nv_bfloat16 *out, size_t M, size_t N, float eps) {
    float *ss = static_cast<float *>(malloc(M * sizeof(float)));
    if (!ss)
        return 1;
    for (size_t i = 0; i < M; i++) {
        float acc[4] = {0, 0, 0, 0};
        for (size_t j = 0; j < N; j++) {
            float v = __bfloat162float(x[i * N + j]);
            acc[j % 4] += v * v;
        }
        ss[i] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, ss, (int)M, MPI_FLOAT, MPI_SUM, (MPI_Comm)ctx->mpi_comm) !=
             MPI_SUCCESS;
    const float inv_hidden = 1.0f / (float)(N * (size_t)ctx->world_size);
    for (size_t i = 0; i < M && !rc; i++) {
        const float rstd = 1.0f / sqrtf(ss[i] * inv_hidden + eps);
        for (size_t j = 0; j < N; j++) {
            float y = __bfloat162float(__float2bfloat16(__bfloat162float(x[i * N + j]) * rstd));
            out[i * N + j] = __float2bfloat16(__bfloat162float(w[j]) * y);
        }
    }
    free(ss);
    return rc;
}
