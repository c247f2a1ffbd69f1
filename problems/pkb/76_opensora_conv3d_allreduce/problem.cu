// pkb/76_opensora_conv3d_allreduce (ParallelKernelBench problem 76): Open-Sora's input-channel
// parallel 3D convolution. Rank r holds x_r (Cl input channels x T x Hh x Wd, bf16, batch 1), its
// weight slice w_r (Co x Cl x 3 x 3 x 3) and the bias (Co, the same on every rank). Every rank
// must end with
//   y = bf16(bf16(sum over ranks r of bf16(conv3d(x_r, w_r))) + bias)    (Co x To x Ho x Wo)
// with stride 1, padding 0, dilation 1 (To = T - 2, Ho = Hh - 2, Wo = Wd - 2): each rank's
// partial convolution rounded to bf16, the bf16 all-reduce (NCCL rounds after every hop), then the
// bias in bf16, as F.conv3d, dist.all_reduce and `out + bias` compute it.
#include "pk_problem_module.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
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

// The reference's buffers, in plain memory: the nine (dy, dx)-shifted copies of x, the
// rearranged weight and the fp32 accumulator. Made in the first reference call (init() does not
// know the dims), a correctness trial, never a timed call.
static struct {
    bf16 *xs;   // [3 dy + dx][ci][t][i][j] = x[ci][t][i + dy][j + dx], t < T, i < Ho, j < Wo
    bf16 *wr;   // [dt][co][(3 dy + dx) Cl + ci] = w[co][ci][dt][dy][dx]
    float *acc; // [co][t][i][j], t < To
    size_t xs_bytes, wr_bytes, acc_bytes;
} g_ref;

static int init(const pk_ctx *ctx) {
    if (g_blas)
        return blas_on(ctx->stream);
    int rc = blas_code(cublasCreate(&g_blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g_blas_ws, BLAS_WS_BYTES));
    return rc ? rc : blas_on(ctx->stream);
}

static int plain_buffer(void **p, size_t *have, size_t bytes) {
    if (*have >= bytes)
        return 0;
    cudaFree(*p);
    *p = NULL;
    *have = 0;
    int rc = cuda_code(cudaMalloc(p, bytes));
    if (!rc)
        *have = bytes;
    return rc;
}

static void fini(const pk_ctx *ctx) {
    cudaFree(g_ref.xs);
    cudaFree(g_ref.wr);
    cudaFree(g_ref.acc);
    g_ref = {};
    if (g_blas)
        cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
}

// xs[q][ci][t][i][j] = x[ci][t][i + dy][j + dx] (q = 3 dy + dx): the frame cropped to the output's
// Ho x Wo after a shift by (dy, dx). For kernel depth dt the GEMM below reads the matrix
// (To Ho Wo pixels) x (9 Cl) in place at xs + dt Ho Wo, leading dimension T Ho Wo.
__global__ void build_shifted(const bf16 *x, bf16 *xs, long long Cl, long long T, long long Hh,
                              long long Wd) {
    const long long Ho = Hh - 2, Wo = Wd - 2, plane = Ho * Wo, n = 9 * Cl * T * plane;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long q = e / (Cl * T * plane), ci = e / (T * plane) % Cl, t = e / plane % T;
        const long long i = e % plane / Wo, j = e % Wo;
        xs[e] = x[((ci * T + t) * Hh + i + q / 3) * Wd + j + q % 3];
    }
}

// wr[dt][co][q Cl + ci] = w[co][ci][dt][q]: for each dt a column-major (9 Cl) x Co matrix.
__global__ void rearrange_weight(const bf16 *w, bf16 *wr, long long Co, long long Cl) {
    const long long n = 27 * Co * Cl;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long dt = e / (Co * 9 * Cl), co = e / (9 * Cl) % Co, q = e % (9 * Cl) / Cl,
                        ci = e % Cl;
        wr[e] = w[(co * Cl + ci) * 27 + dt * 9 + q];
    }
}

// y = bf16(acc): the partial convolution rounded once, as F.conv3d returns it in bf16.
__global__ void round_partial(const float *acc, bf16 *y, long long n) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x)
        y[e] = __float2bfloat16(acc[e]);
}

// y = bf16(y + bias[co]) after the all-reduce (PyTorch adds two bf16 tensors in fp32, rounds once).
__global__ void add_bias(bf16 *y, const bf16 *bias, long long P, long long n) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x)
        y[e] = __float2bfloat16(__bfloat162float(y[e]) + __bfloat162float(bias[e / P]));
}

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 8192 ? b : 8192);
}

// Baseline, PKB's steps: the local convolution on the tensor cores as an implicit GEMM through
// cuBLAS (cuDNN is not available): nine (dy, dx)-shifted copies of x make, for each kernel depth
// dt, a (To Ho Wo) x (9 Cl) matrix read in place, so three GEMMs with K = 9 Cl accumulate in
// fp32; the partial is rounded once to bf16 into y, one host-driven NCCL all-reduce of y in place
// (bf16: NCCL rounds after every hop), then the bias.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long Co = call->dims[0], Cl = call->dims[1], T = call->dims[2], Hh = call->dims[3],
                    Wd = call->dims[4];
    const bf16 *x = static_cast<const bf16 *>(call->args[0]);
    const bf16 *w = static_cast<const bf16 *>(call->args[1]);
    const bf16 *bias = static_cast<const bf16 *>(call->args[2]);
    bf16 *y = static_cast<bf16 *>(call->args[3]);
    cudaStream_t s = ctx->stream;
    const long long plane = (Hh - 2) * (Wd - 2), P = (T - 2) * plane, ny = Co * P;
    int rc = init(ctx);
    if (!rc)
        rc = plain_buffer((void **)&g_ref.xs, &g_ref.xs_bytes,
                          (size_t)(9 * Cl * T * plane) * sizeof(bf16));
    if (!rc)
        rc = plain_buffer((void **)&g_ref.wr, &g_ref.wr_bytes,
                          (size_t)(27 * Co * Cl) * sizeof(bf16));
    if (!rc)
        rc = plain_buffer((void **)&g_ref.acc, &g_ref.acc_bytes, (size_t)ny * sizeof(float));
    if (rc)
        return rc;
    build_shifted<<<grid_for(9 * Cl * T * plane), 256, 0, s>>>(x, g_ref.xs, Cl, T, Hh, Wd);
    rearrange_weight<<<grid_for(27 * Co * Cl), 256, 0, s>>>(w, g_ref.wr, Co, Cl);
    rc = cuda_code(cudaGetLastError());
    // Column-major: acc (P x Co, ld P) += A_dt (P x 9 Cl, ld T Ho Wo) * B_dt (9 Cl x Co).
    const int M = (int)P, N = (int)Co, K = (int)(9 * Cl), lda = (int)(T * plane);
    for (int dt = 0; dt < 3 && !rc; dt++) {
        const float one = 1.f, beta = dt ? 1.f : 0.f;
        rc = blas_code(cublasGemmEx(
            g_blas, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, g_ref.xs + (size_t)dt * plane,
            CUDA_R_16BF, lda, g_ref.wr + (size_t)dt * Co * K, CUDA_R_16BF, K, &beta, g_ref.acc,
            CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    }
    if (rc)
        return rc;
    round_partial<<<grid_for(ny), 256, 0, s>>>(g_ref.acc, y, ny);
    rc = cuda_code(cudaGetLastError());
    if (rc)
        return rc;
    const ncclResult_t r = ncclAllReduce(y, y, (size_t)ny, ncclBfloat16, ncclSum, ctx->comm, s);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    add_bias<<<grid_for(ny), 256, 0, s>>>(y, bias, P, ny);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 5)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3], (size_t)c->dims[4]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
