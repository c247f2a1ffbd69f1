// pkb/13 (GEMM, then all-reduce) through the host APIs only: one cuBLAS GEMM and one
// ncclAllReduce on ctx->stream. It uses nothing of NCCL's device API, so it compiles with and
// without -DPK_DEVICE_API: bench/throughput uses it to time the compile of a problem that does
// not offer the device API (a copy of pkb/13 with "device_api": false) against one that does.
#include "pk_ctx.h"

#include <cublas_v2.h>

typedef __nv_bfloat16 bf16;

static struct {
    int ready;
    cublasHandle_t blas;
} g;

extern "C" int solution_init(const pk_ctx *ctx) {
    if (g.ready)
        return 0;
    if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(g.blas, ctx->stream) != CUBLAS_STATUS_SUCCESS)
        return 1;
    // fp32 all the way inside the GEMM, as the reference.
    cublasSetMathMode(g.blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    g.ready = 1;
    return 0;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (!g.ready)
        return 0;
    cudaStreamSynchronize(ctx->stream);
    cublasDestroy(g.blas);
    g.ready = 0;
    return 0;
}

// Row-major C[M x N] = A[M x K] B[K x N]: cuBLAS (column-major) computes C^T = B^T A^T.
extern "C" int solution(const pk_ctx *ctx, const bf16 *A, const bf16 *B, bf16 *C, size_t M,
                        size_t N, size_t K) {
    const float one = 1.f, zero = 0.f;
    if (cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, CUDA_R_16BF,
                     (int)N, A, CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)N,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
        return 1;
    return ncclAllReduce(C, C, M * N, ncclBfloat16, ncclSum, ctx->comm, ctx->stream) != ncclSuccess
               ? 2
               : 0;
}
