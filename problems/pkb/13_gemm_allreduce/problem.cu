// pkb/13_gemm_allreduce: ParallelKernelBench problem 13 (reference/13_gemm_allreduce.py).
// Every rank holds its own A_r (M x K) and B_r (K x N), bf16, row-major; every rank must end
// with C = sum over ranks r of bf16(A_r B_r): each rank's product rounded to bf16, then the
// bf16 all-reduce, as torch.matmul followed by dist.all_reduce compute it.
#include "pk_problem_module.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, bf16 *, size_t, size_t, size_t);

// This rank's cuBLAS handle and workspace (32 MiB, what PyTorch gives cuBLAS on Hopper), made
// once by init() outside timing.
#define BLAS_WS_BYTES ((size_t)32 << 20)
static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

// cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace is set after it.
static int blas_on(cudaStream_t stream) {
    if (g_blas_stream == stream)
        return 0;
    int rc = blas_code(cublasSetStream(g_blas, stream));
    if (!rc)
        rc = blas_code(cublasSetWorkspace(g_blas, g_blas_ws, BLAS_WS_BYTES));
    g_blas_stream = rc ? NULL : stream;
    return rc;
}

static int init(const pk_ctx *ctx) {
    if (g_blas)
        return 0;
    int rc = blas_code(cublasCreate(&g_blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g_blas_ws, BLAS_WS_BYTES));
    return rc ? rc : blas_on(ctx->stream);
}

static void fini(const pk_ctx *ctx) {
    if (g_blas)
        cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
}

// Row-major C[M x N] = A[M x K] B[K x N] (lda, ldb, ldc: row strides), bf16 in and out, fp32
// accumulation on the tensor cores: what torch.matmul calls. cuBLAS is column-major, where a
// row-major matrix reads as its transpose, so it computes C^T = B^T A^T.
static int gemm_rm(int M, int N, int K, const bf16 *A, int lda, const bf16 *B, int ldb, bf16 *C,
                   int ldc) {
    const float one = 1.f, zero = 0.f;
    return blas_code(cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF,
                                  ldb, A, CUDA_R_16BF, lda, &zero, C, CUDA_R_16BF, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
}

// Baseline, as PKB: the local GEMM straight into C, then one host-driven NCCL all-reduce of C
// in place (bf16, so NCCL rounds to bf16 after every hop).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int M = (int)call->dims[0], N = (int)call->dims[1], K = (int)call->dims[2];
    const bf16 *A = static_cast<const bf16 *>(call->args[0]);
    const bf16 *B = static_cast<const bf16 *>(call->args[1]);
    bf16 *C = static_cast<bf16 *>(call->args[2]);
    int rc = init(ctx);
    if (!rc)
        rc = blas_on(ctx->stream);
    if (!rc)
        rc = gemm_rm(M, N, K, A, K, B, N, C, N);
    if (rc)
        return rc;
    ncclResult_t r =
        ncclAllReduce(C, C, (size_t)M * N, ncclBfloat16, ncclSum, ctx->comm, ctx->stream);
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 3 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const bf16 *>(c->args[0]),
                                          static_cast<const bf16 *>(c->args[1]),
                                          static_cast<bf16 *>(c->args[2]), (size_t)c->dims[0],
                                          (size_t)c->dims[1], (size_t)c->dims[2]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
