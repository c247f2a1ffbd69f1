// pkb/52_fp8_reduce_scatter_grads (ParallelKernelBench 52): every rank pushes its W*P bf16
// gradients through an fp8 e4m3 round trip, scaled by the largest amax of a rolling 16-entry
// history, and the ranks reduce-scatter the result: rank r ends with the average over ranks of
// shard r, and with its own updated history.
//
// PyTorch's rounding points are kept: amax = max|x| (exact), hist' = roll(hist, -1) with
// hist'[15] = amax, scale = max(hist') * (1.0f/448.0f) (a tensor divided by a Python scalar is
// multiplied by the fp32 reciprocal), recon = bf16(fp32(e4m3(x / scale)) * scale) with an IEEE
// division, then NCCL's bf16 sum and * (1.0f/W) rounded to bf16.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                        __nv_bfloat16 *, __nv_bfloat16 *, size_t);

#define HIST 16
#define THREADS 256
#define AMAX_CTAS 1024

__device__ float g_partial[AMAX_CTAS]; // per-CTA maxima of |x|
__device__ float g_scale;              // this call's scale

__device__ __forceinline__ float block_max(float m) {
    __shared__ float warp_max[THREADS / 32];
    for (int off = 16; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (threadIdx.x % 32 == 0)
        warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0.0f;
    for (int w = 0; w < THREADS / 32; w++)
        m = fmaxf(m, warp_max[w]);
    return m;
}

// Per-CTA max of |x| over 8-value vectors.
__global__ void __launch_bounds__(THREADS) amax_partial(const uint4 *x, size_t vecs) {
    float m = 0.0f;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs;
         i += (size_t)gridDim.x * THREADS) {
        const uint4 raw = x[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            m = fmaxf(m, fmaxf(fabsf(f.x), fabsf(f.y)));
        }
    }
    m = block_max(m);
    if (threadIdx.x == 0)
        g_partial[blockIdx.x] = m;
}

// One CTA: the amax, the rolled history (an output) and the scale.
__global__ void __launch_bounds__(THREADS)
    history_scale(const __nv_bfloat16 *hist, __nv_bfloat16 *new_hist, int partials) {
    float m = 0.0f;
    for (int i = threadIdx.x; i < partials; i += THREADS)
        m = fmaxf(m, g_partial[i]);
    const float amax = block_max(m);
    if (threadIdx.x < HIST)
        new_hist[threadIdx.x] =
            threadIdx.x < HIST - 1 ? hist[threadIdx.x + 1] : __float2bfloat16_rn(amax);
    if (threadIdx.x == 0) {
        float hmax = amax; // = bf16(amax): a maximum of bf16 values is one
        for (int j = 1; j < HIST; j++)
            hmax = fmaxf(hmax, __bfloat162float(hist[j]));
        g_scale = __fmul_rn(fmaxf(hmax, 1e-12f), 1.0f / 448.0f);
    }
}

// recon = bf16(fp32(e4m3(x / scale)) * scale). The scale comes from a maximum that includes
// this input's amax, so |x / scale| <= 448 (448.01 at most, for amax < 1e-30), far below 464,
// where saturating and PyTorch's non-saturating conversion part: the hardware's satfinite
// conversion gives PyTorch's bits.
__global__ void __launch_bounds__(THREADS)
    fp8_round_trip(const uint4 *x, uint4 *recon, size_t vecs) {
    const float scale = g_scale;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs;
         i += (size_t)gridDim.x * THREADS) {
        const uint4 raw = x[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
        uint4 out;
        __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            const __half2_raw q = __nv_cvt_fp8x2_to_halfraw2(
                __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(f.x, scale), __fdiv_rn(f.y, scale)),
                                         __NV_SATFINITE, __NV_E4M3),
                __NV_E4M3);
            const float2 qf = __half22float2(*reinterpret_cast<const __half2 *>(&q));
            o[k] = __floats2bfloat162_rn(__fmul_rn(qf.x, scale), __fmul_rn(qf.y, scale));
        }
        recon[i] = out;
    }
}

// out = bf16(out * (1.0f/W)), in place.
__global__ void __launch_bounds__(THREADS) scale_bf16(uint4 *y, float inv_world, size_t vecs) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs;
         i += (size_t)gridDim.x * THREADS) {
        uint4 v = y[i];
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            h[k] = __floats2bfloat162_rn(__fmul_rn(f.x, inv_world), __fmul_rn(f.y, inv_world));
        }
        y[i] = v;
    }
}

// The reconstructed gradients that are reduce-scattered (PyTorch's caching allocator keeps such
// a buffer too). Allocated on the first call, a correctness trial (never timed), with
// ncclMemAlloc and registered as an NCCL window like the harness's reference outputs
// (docs/problems.md, known issues).
static void *g_tmp;
static size_t g_tmp_bytes;
static ncclWindow_t g_tmp_win;
static ncclComm_t g_tmp_comm;

static void release_tmp(void) {
    if (g_tmp) {
        ncclCommWindowDeregister(g_tmp_comm, g_tmp_win);
        ncclMemFree(g_tmp);
    }
    g_tmp = NULL;
    g_tmp_bytes = 0;
}

static int tmp_buffer(const pk_ctx *ctx, size_t bytes, void **out) {
    if (g_tmp_bytes < bytes) {
        if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
            return 2000;
        release_tmp();
        ncclResult_t e = ncclMemAlloc(&g_tmp, bytes);
        if (e == ncclSuccess)
            e = ncclCommWindowRegister(ctx->comm, g_tmp, bytes, &g_tmp_win,
                                       NCCL_WIN_COLL_SYMMETRIC);
        if (e != ncclSuccess) {
            if (g_tmp)
                ncclMemFree(g_tmp);
            g_tmp = NULL;
            return 1000 + (int)e;
        }
        g_tmp_comm = ctx->comm;
        g_tmp_bytes = bytes;
    }
    *out = g_tmp;
    return 0;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    release_tmp();
}

static unsigned grid_for(size_t items) {
    size_t g = (items + THREADS - 1) / THREADS;
    return (unsigned)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

// Baseline, as PKB's solution(): amax, history and scale, the fp8 round trip of all W*P values,
// a host-driven NCCL bf16 reduce-scatter (sum), then * (1/W) in place.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t P = (size_t)call->dims[0], n = P * (size_t)ctx->world_size;
    const uint4 *x = static_cast<const uint4 *>(call->args[0]);
    __nv_bfloat16 *out = static_cast<__nv_bfloat16 *>(call->args[2]);
    void *recon = NULL;
    int rc = tmp_buffer(ctx, n * sizeof(__nv_bfloat16), &recon);
    if (rc)
        return rc;
    unsigned ctas = grid_for(n / 8);
    if (ctas > AMAX_CTAS)
        ctas = AMAX_CTAS;
    amax_partial<<<ctas, THREADS, 0, ctx->stream>>>(x, n / 8);
    history_scale<<<1, THREADS, 0, ctx->stream>>>(static_cast<const __nv_bfloat16 *>(call->args[1]),
                                                  static_cast<__nv_bfloat16 *>(call->args[3]),
                                                  (int)ctas);
    fp8_round_trip<<<grid_for(n / 8), THREADS, 0, ctx->stream>>>(x, static_cast<uint4 *>(recon),
                                                                 n / 8);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t e =
        ncclReduceScatter(recon, out, P, ncclBfloat16, ncclSum, ctx->comm, ctx->stream);
    if (e != ncclSuccess)
        return 1000 + (int)e;
    scale_bf16<<<grid_for(P / 8), THREADS, 0, ctx->stream>>>(reinterpret_cast<uint4 *>(out),
                                                             1.0f / (float)ctx->world_size, P / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const __nv_bfloat16 *>(c->args[1]), static_cast<__nv_bfloat16 *>(c->args[2]),
        static_cast<__nv_bfloat16 *>(c->args[3]), (size_t)c->dims[0]);
}

// Inputs beyond the generic generator: the amax history. PKB fills it with 1e-8, so it never
// matters; here the regime changes with the call (key % 4), relative to this rank's amax:
//   0: PKB's constant 1e-8 (the current amax sets the scale);
//   1: one of the entries that stay after the roll is 1.25-1.5 x amax (the history sets it);
//   2: only hist[0], which the roll drops, exceeds amax (2 x): the current amax sets it;
//   3: every entry is 0.2-0.9 x amax.
// Every value is a function of (seed, key, rank) and the input, so the harness can regenerate it.
__device__ unsigned int g_gen_amax; // as float bits (non-negative floats order like their bits)

__global__ void gen_reset() {
    g_gen_amax = 0u;
}

__global__ void __launch_bounds__(THREADS) gen_amax(const __nv_bfloat16 *x, size_t n) {
    float m = 0.0f;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS)
        m = fmaxf(m, fabsf(__bfloat162float(x[i])));
    m = block_max(m);
    if (threadIdx.x == 0)
        atomicMax(&g_gen_amax, __float_as_uint(m));
}

__global__ void gen_history(__nv_bfloat16 *hist, uint64_t key, int regime) {
    const int j = threadIdx.x;
    const float amax = __uint_as_float(g_gen_amax);
    const float u = (float)(pk_splitmix64(key + (uint64_t)j) >> 40) * 0x1p-24f; // [0, 1)
    const int top = 1 + (int)(pk_splitmix64(key + 1000) % (HIST - 1));
    float v;
    if (regime == 0)
        v = 1e-8f;
    else if (regime == 1)
        v = amax * (j == top ? 1.25f + 0.25f * u : 0.2f + 1.0f * u);
    else if (regime == 2)
        v = amax * (j == 0 ? 2.0f : 0.2f + 0.7f * u);
    else
        v = amax * (0.2f + 0.7f * u);
    hist[j] = __float2bfloat16_rn(v);
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const size_t n = call->counts[0];
    const uint64_t k =
        pk_splitmix64(seed ^ pk_splitmix64((uint64_t)(unsigned)key * 64 + (uint64_t)ctx->rank));
    unsigned ctas = grid_for(n);
    if (ctas > 512)
        ctas = 512;
    gen_reset<<<1, 1, 0, ctx->stream>>>();
    gen_amax<<<ctas, THREADS, 0, ctx->stream>>>(static_cast<const __nv_bfloat16 *>(call->args[0]),
                                                n);
    gen_history<<<1, HIST, 0, ctx->stream>>>(static_cast<__nv_bfloat16 *>(call->args[1]), k,
                                             key % 4);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, NULL};
    return &module;
}
