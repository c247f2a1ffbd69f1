// pkb/18_tp_rms_norm (ParallelKernelBench problem 18): RMSNorm over a hidden dimension that is
// sharded across the ranks (tensor parallel). Rank r holds its N columns of every row of the
// hidden states (M x N, bf16) and its N weights; every rank needs, for its own columns,
//   out[i, j] = bf16(w[j] * bf16(x[i, j] * rsqrt(ss[i] / (N * W) + eps)))
// where ss[i] is the fp32 sum of x^2 over the row's N * W columns on all ranks, as PyTorch
// computes it: fp32 sums, an fp32 all-reduce, division by the Python int N * W (a reciprocal
// multiply), rsqrtf, then two bf16 roundings (the cast back to bf16, the product with w).
#include "pk_problem_module.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                        __nv_bfloat16 *, size_t, size_t, float);

#define THREADS 256

static float *g_ss;      // M row sums of squares (fp32), all-reduced in place
static size_t g_ss_rows; // allocated on the first call (init() does not know the dims)

// One CTA per row: 16-byte loads, fp32 sum of squares, a warp-shuffle and shared-memory tree.
__global__ void __launch_bounds__(THREADS) row_sumsq(const uint4 *x, float *ss, size_t row_vecs) {
    const uint4 *row = x + (size_t)blockIdx.x * row_vecs;
    float acc = 0.f;
    for (size_t i = threadIdx.x; i < row_vecs; i += THREADS) {
        const uint4 v = row[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            acc = fmaf(f.x, f.x, acc);
            acc = fmaf(f.y, f.y, acc);
        }
    }
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    __shared__ float warp_sums[THREADS / 32];
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < THREADS / 32; w++)
            s += warp_sums[w];
        ss[blockIdx.x] = s;
    }
}

// Elementwise, 8 columns per thread: PyTorch's chain of ops and roundings.
__global__ void __launch_bounds__(THREADS)
    normalise(const uint4 *x, const uint4 *w, const float *ss, uint4 *out, size_t rows,
              size_t row_vecs, float inv_hidden, float eps) {
    const size_t n = rows * row_vecs, stride = (size_t)gridDim.x * THREADS;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
        // PyTorch's two ops, each rounded (no fma), then rsqrtf
        const float rstd = rsqrtf(__fadd_rn(__fmul_rn(ss[i / row_vecs], inv_hidden), eps));
        const uint4 xv = x[i], wv = w[i % row_vecs];
        const __nv_bfloat162 *xh = reinterpret_cast<const __nv_bfloat162 *>(&xv);
        const __nv_bfloat162 *wh = reinterpret_cast<const __nv_bfloat162 *>(&wv);
        uint4 o;
        __nv_bfloat162 *oh = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 xf = __bfloat1622float2(xh[k]), wf = __bfloat1622float2(wh[k]);
            const float2 nf = __bfloat1622float2(__floats2bfloat162_rn(xf.x * rstd, xf.y * rstd));
            oh[k] = __floats2bfloat162_rn(wf.x * nf.x, wf.y * nf.y);
        }
        out[i] = o;
    }
}

// Baseline: the row sums, one host-driven fp32 NCCL all-reduce (in place), the elementwise
// kernel. PKB's PyTorch also materialises the fp32 copy and its square; this does not.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0], N = (size_t)call->dims[1];
    const float eps = (float)call->params[0];
    if (M > g_ss_rows) { // first call only: an untimed correctness trial
        cudaFree(g_ss);
        g_ss_rows = 0;
        if (cudaMalloc(&g_ss, M * sizeof(float)) != cudaSuccess)
            return 2001;
        g_ss_rows = M;
    }
    const uint4 *x = static_cast<const uint4 *>(call->args[0]);
    row_sumsq<<<(unsigned)M, THREADS, 0, ctx->stream>>>(x, g_ss, N / 8);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t r = ncclAllReduce(g_ss, g_ss, M, ncclFloat, ncclSum, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    // variance = ss / (N * W): PyTorch multiplies by the fp32 reciprocal of a Python scalar.
    const float inv_hidden = 1.0f / (float)(N * (size_t)ctx->world_size);
    normalise<<<8 * 132, THREADS, 0, ctx->stream>>>(x, static_cast<const uint4 *>(call->args[1]),
                                                    g_ss, static_cast<uint4 *>(call->args[2]), M,
                                                    N / 8, inv_hidden, eps);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    cudaFree(g_ss);
    g_ss = NULL;
    g_ss_rows = 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 3 || c->n_dims < 2 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const __nv_bfloat16 *>(c->args[1]), static_cast<__nv_bfloat16 *>(c->args[2]),
        (size_t)c->dims[0], (size_t)c->dims[1], (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
