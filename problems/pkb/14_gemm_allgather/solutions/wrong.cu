// Deliberately wrong (test data): the GEMM into scratch, then ncclAllGather straight into C. The
// gathered products land rank-major, as W stacked M x N/W blocks, not side by side as column
// blocks of C (correct only when M = 1). The verdict must be `incorrect`.
#include "pk_ctx.h"

#include <cublas_v2.h>

typedef __nv_bfloat16 bf16;

static cublasHandle_t g_blas;

extern "C" int solution_init(const pk_ctx *ctx) {
    if (g_blas)
        return 0;
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS)
        return 1;
    return cublasSetStream(g_blas, ctx->stream) != CUBLAS_STATUS_SUCCESS;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (g_blas)
        cublasDestroy(g_blas);
    g_blas = NULL;
    return 0;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *A, const bf16 *B, bf16 *C, size_t M,
                        size_t N, size_t K) {
    const size_t Nl = N / ctx->world_size;
    bf16 *local = static_cast<bf16 *>(ctx->scratch);
    if (solution_init(ctx) || M * Nl * sizeof(bf16) > ctx->scratch_size)
        return 1;
    const float one = 1.f, zero = 0.f;
    if (cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)Nl, (int)M, (int)K, &one, B,
                     CUDA_R_16BF, (int)Nl, A, CUDA_R_16BF, (int)K, &zero, local, CUDA_R_16BF,
                     (int)Nl, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
        return 2;
    return ncclAllGather(local, C, M * Nl, ncclBfloat16, ctx->comm, ctx->stream) != ncclSuccess;
}
