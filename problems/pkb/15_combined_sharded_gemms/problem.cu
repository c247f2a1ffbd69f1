// pkb/15_combined_sharded_gemms: ParallelKernelBench problem 15
// (reference/15_combined_sharded_gemms.py). Rank r holds x_r (M x H/W: columns r*H/W.. of x) and
// its own W1_r (H x F) and W2_r (F x H), bf16, row-major. PKB's reference all-gathers x, runs
// the first GEMM and SiLU on all M rows, the second GEMM on rank r's M/W rows only, places that
// block in an M x H buffer of zeros and reduce-scatters it, so rank r ends with
//   y_r = bf16(bf16(silu(bf16(x[rows r] W1_r))) W2_r)          (M/W x H)
// (every other rank adds zeros to rank r's rows, which changes nothing).
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

// In place: t = bf16(t / (1 + exp(-t))), PyTorch's F.silu on bf16 (computed in fp32, expf and
// an IEEE division, rounded once).
__global__ void silu_bf16(bf16 *t, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = __bfloat162float(t[i]);
        t[i] = __float2bfloat16(v / (1.0f + expf(-v)));
    }
}

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t,
                        size_t, size_t);

// Baseline, as PKB: NCCL all-gather of x's column blocks and a concatenation kernel (x, M x H);
// GEMM 1 and SiLU on all M rows; GEMM 2 on this rank's rows into a zeroed M x H buffer; one NCCL
// reduce-scatter of that buffer into y.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const int M = (int)call->dims[0], H = (int)call->dims[1], F = (int)call->dims[2];
    const int Hl = H / W, Ml = M / W;
    const bf16 *x_local = static_cast<const bf16 *>(call->args[0]);
    const bf16 *W1 = static_cast<const bf16 *>(call->args[1]);
    const bf16 *W2 = static_cast<const bf16 *>(call->args[2]);
    bf16 *y = static_cast<bf16 *>(call->args[3]);
    void *gathered = NULL, *x = NULL, *a = NULL, *buf = NULL;
    int rc = init(ctx);
    if (!rc)
        rc = ref_buffer(ctx, 0, (size_t)M * H * sizeof(bf16), &gathered);
    if (!rc)
        rc = ref_buffer(ctx, 1, (size_t)M * H * sizeof(bf16), &x);
    if (!rc)
        rc = ref_buffer(ctx, 2, (size_t)M * F * sizeof(bf16), &a);
    if (!rc)
        rc = ref_buffer(ctx, 3, (size_t)M * H * sizeof(bf16), &buf);
    if (!rc)
        rc = nccl_code(
            ncclAllGather(x_local, gathered, (size_t)M * Hl, ncclBfloat16, ctx->comm, ctx->stream));
    if (!rc)
        rc = cat_columns_on(ctx->stream, static_cast<const bf16 *>(gathered),
                            static_cast<bf16 *>(x), M, Hl, W);
    if (!rc)
        rc = gemm_rm(false, false, M, F, H, static_cast<const bf16 *>(x), H, W1, F,
                     static_cast<bf16 *>(a), F);
    if (rc)
        return rc;
    silu_bf16<<<4096, 256, 0, ctx->stream>>>(static_cast<bf16 *>(a), (size_t)M * F);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = cuda_code(cudaMemsetAsync(buf, 0, (size_t)M * H * sizeof(bf16), ctx->stream));
    if (!rc)
        rc = gemm_rm(false, false, Ml, H, F, static_cast<const bf16 *>(a) + (size_t)r * Ml * F, F,
                     W2, H, static_cast<bf16 *>(buf) + (size_t)r * Ml * H, H);
    if (rc)
        return rc;
    return nccl_code(
        ncclReduceScatter(buf, y, (size_t)Ml * H, ncclBfloat16, ncclSum, ctx->comm, ctx->stream));
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
