// Hand-made case for the profile stage's overlap fraction (issue 32), pkb/13_gemm_allreduce:
// the whole GEMM, then NCCL's all-reduce of its output, both on ctx->stream. The all-reduce
// cannot start before the GEMM ends, so nothing of the communication overlaps computation:
// the profile must report an overlap fraction of about 0 (bench/profile/gpu-profile.sh).
#include "pk_ctx.h"

#include <cublas_v2.h>

typedef __nv_bfloat16 bf16;

#define BLAS_WS_BYTES ((size_t)32 << 20)

static cublasHandle_t blas;
static void *blas_ws;

extern "C" int solution_init(const pk_ctx *ctx) {
    if (blas)
        return 0;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&blas_ws, BLAS_WS_BYTES) != cudaSuccess ||
        cublasSetStream(blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(blas, blas_ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS)
        return 1;
    cublasSetMathMode(blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                           CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    return 0;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (!blas)
        return 0;
    cudaStreamSynchronize(ctx->stream);
    cublasDestroy(blas);
    cudaFree(blas_ws);
    blas = NULL;
    return 0;
}

// Row-major C[M x N] = A[M x K] B[K x N]: cuBLAS (column-major) computes C^T = B^T A^T.
static int gemm_rm(size_t M, size_t N, size_t K, const bf16 *A, const bf16 *B, bf16 *C) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
                        CUDA_R_16BF, (int)N, A, CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *A, const bf16 *B, bf16 *C, size_t M,
                        size_t N, size_t K) {
    if (solution_init(ctx) || cublasSetStream(blas, ctx->stream) != CUBLAS_STATUS_SUCCESS)
        return 10;
    if (gemm_rm(M, N, K, A, B, C))
        return 11;
    return ncclAllReduce(C, C, M * N, ncclBfloat16, ncclSum, ctx->comm, ctx->stream) != ncclSuccess;
}
