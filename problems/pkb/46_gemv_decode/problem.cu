// pkb/46_gemv_decode: ParallelKernelBench problem 46 (reference/46_gemv_decode.py): the LM head of
// a decode step with the vocabulary split across ranks. Every rank holds the same hidden states
// hs (T x hidden) and its shard of the weight (rows r*V.. of vocab x hidden, V = vocab/W) and
// bias, bf16. Every rank must end with logits (T x vocab) whose column block r is
//   bf16(bf16(hs W_r^T) + b_r)
// (torch.matmul, then + bias: two roundings), gathered from all ranks (dist.all_gather, then
// torch.cat(dim=1)).
#include "pk_problem_module.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// This rank's cuBLAS handle and workspace (32 MiB, what PyTorch gives cuBLAS on Hopper), made
// once by init() outside timing.
#define BLAS_WS_BYTES ((size_t)32 << 20)
static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;

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
        return blas_on(ctx->stream);
    int rc = blas_code(cublasCreate(&g_blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g_blas_ws, BLAS_WS_BYTES));
    return rc ? rc : blas_on(ctx->stream);
}

// Intermediate buffers of the reference: ncclMemAlloc'ed and registered as NCCL windows, as the
// harness makes its own reference outputs (NCCL 2.28 can hang between registered and plain
// memory). They are made in the first reference call (init() does not know the dims), a
// correctness trial, never a timed call; every rank makes them in the same order, since window
// registration is collective.
#define MAX_BUFS 4
static struct {
    void *p;
    size_t bytes;
    ncclWindow_t win;
} g_bufs[MAX_BUFS];

static int ref_buffer(const pk_ctx *ctx, int i, size_t bytes, void **out) {
    if (g_bufs[i].bytes < bytes) {
        if (g_bufs[i].p) {
            ncclCommWindowDeregister(ctx->comm, g_bufs[i].win);
            ncclMemFree(g_bufs[i].p);
            g_bufs[i].p = NULL;
            g_bufs[i].bytes = 0;
        }
        int rc = nccl_code(ncclMemAlloc(&g_bufs[i].p, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_bufs[i].p, bytes, &g_bufs[i].win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (rc)
            return rc;
        g_bufs[i].bytes = bytes;
    }
    *out = g_bufs[i].p;
    return 0;
}

static void fini(const pk_ctx *ctx) {
    for (int i = 0; i < MAX_BUFS; i++)
        if (g_bufs[i].p) {
            ncclCommWindowDeregister(ctx->comm, g_bufs[i].win);
            ncclMemFree(g_bufs[i].p);
            g_bufs[i].p = NULL;
            g_bufs[i].bytes = 0;
        }
    if (g_blas)
        cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
}

// Row-major C[M x N] = op(A)[M x K] op(B)[K x N], bf16 in and out, fp32 accumulation on the
// tensor cores: what torch.matmul calls. lda, ldb, ldc are row strides; ta (tb) means A (B) is
// stored transposed, as a row-major K x M (N x K) matrix. cuBLAS is column-major, where a
// row-major matrix reads as its transpose, so it computes C^T = op(B)^T op(A)^T.
static int gemm_rm(bool ta, bool tb, int M, int N, int K, const bf16 *A, int lda, const bf16 *B,
                   int ldb, bf16 *C, int ldc) {
    const float one = 1.f, zero = 0.f;
    return blas_code(cublasGemmEx(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF,
                                  ldb, A, CUDA_R_16BF, lda, &zero, C, CUDA_R_16BF, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
}

// dst[m, q*cols + n] = src[q][m][n] for the W gathered blocks src[q] (rows x cols each): what
// torch.cat(blocks, dim=1) does. T is a 16-byte vector where the rows allow it, else one bf16.
template <typename T>
__global__ void cat_columns(const T *src, T *dst, size_t rows, size_t cols, int W) {
    const size_t total = (size_t)W * rows * cols;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t q = i / (rows * cols), m = i / cols % rows, n = i % cols;
        dst[(m * W + q) * cols + n] = src[i];
    }
}

static int cat_columns_on(cudaStream_t s, const bf16 *src, bf16 *dst, size_t rows, size_t cols,
                          int W) {
    const size_t total = (size_t)W * rows * cols;
    if (cols % 8 == 0 && ((uintptr_t)src | (uintptr_t)dst) % 16 == 0) {
        const size_t blocks = (total / 8 + 255) / 256;
        cat_columns<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, s>>>(
            reinterpret_cast<const uint4 *>(src), reinterpret_cast<uint4 *>(dst), rows, cols / 8,
            W);
    } else {
        const size_t blocks = (total + 255) / 256;
        cat_columns<<<(unsigned)(blocks < 8192 ? blocks : 8192), 256, 0, s>>>(src, dst, rows, cols,
                                                                              W);
    }
    return cuda_code(cudaGetLastError());
}

// In place: y[t, v] = bf16(y[t, v] + b[v]) for T rows of V (fp32 add, one rounding).
__global__ void add_bias(bf16 *y, const bf16 *b, size_t T, size_t V) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < T * V;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16(__bfloat162float(y[i]) + __bfloat162float(b[i % V]));
}

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t,
                        size_t, size_t);

// Baseline, as PKB: cuBLAS GEMM hs W_r^T (T x V; cuBLAS picks its skinny-GEMM kernels), a bias
// kernel, one host-driven NCCL all-gather of the W blocks, then a kernel that concatenates them
// along columns (a plain copy when T = 1).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size;
    const int T = (int)call->dims[0], hidden = (int)call->dims[1], V = (int)call->dims[2] / W;
    const bf16 *hs = static_cast<const bf16 *>(call->args[0]);
    const bf16 *weight = static_cast<const bf16 *>(call->args[1]);
    const bf16 *bias = static_cast<const bf16 *>(call->args[2]);
    bf16 *logits = static_cast<bf16 *>(call->args[3]);
    void *local = NULL, *gathered = NULL;
    int rc = init(ctx);
    if (!rc)
        rc = ref_buffer(ctx, 0, (size_t)T * V * sizeof(bf16), &local);
    if (!rc)
        rc = ref_buffer(ctx, 1, (size_t)W * T * V * sizeof(bf16), &gathered);
    if (!rc)
        rc = gemm_rm(false, true, T, V, hidden, hs, hidden, weight, hidden,
                     static_cast<bf16 *>(local), V);
    if (rc)
        return rc;
    add_bias<<<(unsigned)(((size_t)T * V + 255) / 256), 256, 0, ctx->stream>>>(
        static_cast<bf16 *>(local), bias, T, V);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(
            ncclAllGather(local, gathered, (size_t)T * V, ncclBfloat16, ctx->comm, ctx->stream));
    return rc ? rc
              : cat_columns_on(ctx->stream, static_cast<const bf16 *>(gathered), logits, T, V, W);
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
