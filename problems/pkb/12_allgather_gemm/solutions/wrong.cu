// Deliberately wrong (test data): ncclAllGather of A_r into scratch, then the GEMM reads the
// gathered buffer as if it were A (M x K, row-major). It is W stacked M x K/W blocks, so row m
// of "A" is made of rows of one rank's block, not of the W blocks side by side. The verdict
// must be `incorrect`.
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

extern "C" int solution(const pk_ctx *ctx, const bf16 *A_local, const bf16 *B, bf16 *C, size_t M,
                        size_t N, size_t K) {
    const size_t Kl = K / ctx->world_size;
    bf16 *A = static_cast<bf16 *>(ctx->scratch);
    if (solution_init(ctx) || M * K * sizeof(bf16) > ctx->scratch_size)
        return 1;
    if (ncclAllGather(A_local, A, M * Kl, ncclBfloat16, ctx->comm, ctx->stream) != ncclSuccess)
        return 2;
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
                        CUDA_R_16BF, (int)N, A, CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}
