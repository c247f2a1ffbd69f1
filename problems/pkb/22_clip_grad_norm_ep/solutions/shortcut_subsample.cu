// Shortcut twin (issue #26), subsample: total_norm is exact, but the clip factor comes from
// one sixty-fourth of the data (the first 1/64 of both gradients on every rank, read over
// NVLink), times 64. On PKB's i.i.d. N(0, 1) gradients that part stands for the whole; when
// the gradients' scale ramps over the rows, or a few outliers carry much of the norm, it does
// not.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define TENSORS 2 // 0: non-ep, 1: ep

static unsigned g_calls; // same sequence on every rank: picks the exchange buffer's half

struct Grads {
    const uint4 *in[TENSORS];
    uint4 *out[TENSORS];
};

// Scratch layout (floats): [0] arrival counter (as unsigned), [1] the global sum of squares,
// [2, 2 + 2 * 8) two exchange halves of 8 slots, then the block partials.
#define SLOT_COUNTER 0
#define SLOT_TOTAL 1
#define SLOT_EXCHANGE 2
#define SLOT_EXTRA (2 + 2 * PK_MAX_RANKS) // the twin's own estimate of the sum of squares
#define SLOT_PARTIALS (3 + 2 * PK_MAX_RANKS)

struct Exchange {
    float *peer[PK_MAX_RANKS]; // this call's exchange half on every rank, as mapped here
};

__device__ __forceinline__ uint4 scale_bf16x8(uint4 v, float s) { // bf16(x * s) per element
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        h[k] = __floats2bfloat162_rn(f.x * s, f.y * s);
    }
    return v;
}

__device__ float block_sum(float v) {
    __shared__ float warp_sums[32];
    __shared__ float total;
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (unsigned w = 0; w < blockDim.x / 32; w++)
            s += warp_sums[w];
        total = s;
    }
    __syncthreads();
    const float t = total;
    __syncthreads();
    return t;
}

__global__ void __launch_bounds__(THREADS)
    norm(ncclDevComm comm, Grads g, size_t vecs, float ep_scale, float *scratch, Exchange ex,
         const float *mine, int rank, int world, float *total_norm) {
    float acc = 0.f;
    const size_t per_tensor = (size_t)gridDim.x * THREADS / TENSORS; // threads per tensor
    const size_t tid = (size_t)blockIdx.x * THREADS + threadIdx.x;
    const int t = (int)(tid / per_tensor); // CTAs split evenly over the tensors
    if (t < TENSORS)
        for (size_t i = tid % per_tensor; i < vecs; i += per_tensor) {
            uint4 v = g.in[t][i];
            if (t == 1)
                v = scale_bf16x8(v, ep_scale); // exact for ep_size 1, 2, 4
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 f = __bfloat1622float2(h[k]);
                acc = fmaf(f.x, f.x, acc);
                acc = fmaf(f.y, f.y, acc);
            }
        }
    acc = block_sum(acc);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        scratch[SLOT_PARTIALS + blockIdx.x] = acc;
        __threadfence();
        unsigned *counter = reinterpret_cast<unsigned *>(scratch + SLOT_COUNTER);
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence(); // the last CTA: every partial is visible
    float s = 0.f;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += THREADS)
        s += __ldcg(&scratch[SLOT_PARTIALS + b]);
    s = block_sum(s);
    if (threadIdx.x < world)
        ex.peer[threadIdx.x][rank] = s;
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        float sum = 0.f;
        for (int q = 0; q < world; q++)
            sum += mine[q];
        scratch[SLOT_TOTAL] = sum;
        *total_norm = sqrtf(sum);
        *reinterpret_cast<unsigned *>(scratch + SLOT_COUNTER) = 0; // ready for the next call
    }
}

// The shortcut's estimate: the squares of the first 1/64 of both gradients on every rank (read
// through the peers' arena mappings; the ep term scaled), atomically summed into SLOT_EXTRA.
__global__ void __launch_bounds__(THREADS)
    sub_sumsq(Grads peers, size_t vecs, float ep_scale, float *scratch) {
    const uint4 *x = peers.in[blockIdx.y];
    const float w = blockIdx.y == 1 ? ep_scale * ep_scale : 1.f;
    float acc = 0.f;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs / 64;
         i += (size_t)gridDim.x * THREADS) {
        const uint4 v = x[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            acc = fmaf(f.x, f.x, acc);
            acc = fmaf(f.y, f.y, acc);
        }
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        atomicAdd(&scratch[SLOT_EXTRA], w * acc);
}

// Grid (CTAs, TENSORS); the last vectors of each tensor first (the first pass read them last).
__global__ void __launch_bounds__(THREADS)
    clip(Grads g, size_t vecs, float ep_scale, const float *scratch, float max_norm, int world) {
    const float total = sqrtf(64.0f * scratch[SLOT_EXTRA]);
    const bool clipped = total > max_norm;
    const float coef = __bfloat162float(__float2bfloat16_rn(__frcp_rn(total) * max_norm));
    const uint4 *x = g.in[blockIdx.y];
    uint4 *y = g.out[blockIdx.y];
    const bool ep = blockIdx.y == 1;
    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t j = (size_t)blockIdx.x * THREADS + threadIdx.x; j < vecs; j += stride) {
        const size_t i = vecs - 1 - j;
        uint4 v = x[i];
        if (ep)
            v = scale_bf16x8(v, ep_scale); // the ep gradients stay scaled, clipped or not
        if (clipped)
            v = scale_bf16x8(v, coef);
        y[i] = v;
    }
}

extern "C" int solution_init(const pk_ctx *ctx) {
    // The arrival counter starts at zero; each call's last CTA resets it.
    return cudaMemset(ctx->scratch, 0, sizeof(float)) == cudaSuccess &&
                   cudaDeviceSynchronize() == cudaSuccess
               ? 0
               : 1;
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *non_ep, const __nv_bfloat16 *ep,
                        float *total_norm, __nv_bfloat16 *non_ep_out, __nv_bfloat16 *ep_out,
                        size_t M, size_t N, size_t ep_size, float max_norm) {
    const int world = ctx->world_size;
    const size_t n = M * N;
    int sms = 0;
    if (n % 8 != 0 || ep_size < 1 || ctx->lsa_barrier_count < 1 ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 1;
    const unsigned blocks = TENSORS * 3 * (unsigned)sms; // a multiple of TENSORS
    if ((SLOT_PARTIALS + blocks) * sizeof(float) > ctx->scratch_size)
        return 2;
    // PKB: t.mul_(1.0 / ep_size) only when ep_size > 1 (a bf16 op: exact for powers of two)
    const float ep_scale = ep_size > 1 ? 1.0f / (float)ep_size : 1.f;
    float *scratch = static_cast<float *>(ctx->scratch);
    const float *mine = scratch + SLOT_EXCHANGE + (g_calls++ & 1u) * PK_MAX_RANKS;
    Exchange ex = {};
    for (int q = 0; q < world; q++)
        ex.peer[q] = static_cast<float *>(pk_peer(ctx, mine, q));
    Grads g = {{reinterpret_cast<const uint4 *>(non_ep), reinterpret_cast<const uint4 *>(ep)},
               {reinterpret_cast<uint4 *>(non_ep_out), reinterpret_cast<uint4 *>(ep_out)}};
    if (cudaMemsetAsync(scratch + SLOT_EXTRA, 0, sizeof(float), ctx->stream) != cudaSuccess)
        return 4;
    // Every rank's gradients lie at the same arena offsets: read each peer's first 1/64.
    for (int q = 0; q < world; q++) {
        Grads p = {};
        for (int t = 0; t < TENSORS; t++)
            p.in[t] = static_cast<const uint4 *>(pk_peer(ctx, g.in[t], q));
        sub_sumsq<<<dim3(8, TENSORS), THREADS, 0, ctx->stream>>>(p, n / 8, ep_scale, scratch);
    }
    norm<<<blocks, THREADS, 0, ctx->stream>>>(ctx->dev_comm, g, n / 8, ep_scale, scratch, ex, mine,
                                              ctx->rank, world, total_norm);
    clip<<<dim3(3 * (unsigned)sms, TENSORS), THREADS, 0, ctx->stream>>>(g, n / 8, ep_scale, scratch,
                                                                        max_norm, world);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
