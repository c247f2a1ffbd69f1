// Shortcut twin (issue 26, subsample): the correct kernels, but the amax is taken over the first
// quarter of the P parameter values (a quarter of the first pass's reads). The largest |value| lies
// in the other three quarters with probability 3/4 per call, and then the new history entry
// (checked exactly) and, where the amax sets the scale, the fp8 codes differ from the
// reference's. A call passes with probability ~1/4, all ten (trial, rank) calls with ~1e-6.
// Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>
#include <cuda_fp8.h>

#define HIST 16
#define THREADS 1024
#define MAX_CTAS 1024 // scale slots per source rank, and amax partials

__device__ __forceinline__ float block_max(float m) {
    __shared__ float warp_max[THREADS / 32];
    __shared__ float result;
    for (int off = 16; off > 0; off >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (threadIdx.x % 32 == 0)
        warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = 0.0f;
        for (int w = 0; w < THREADS / 32; w++)
            r = fmaxf(r, warp_max[w]);
        result = r;
    }
    __syncthreads();
    return result;
}

__global__ void __launch_bounds__(THREADS)
    amax_partial(const uint4 *x, size_t vecs, float *partial) {
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
        partial[blockIdx.x] = m;
}

// 16 bf16 values -> 16 e4m3 codes of x / scale (IEEE division; |x / scale| < 464, where the
// saturating conversion is PyTorch's non-saturating one).
__device__ __forceinline__ uint4 encode16(uint4 a, uint4 b, float scale) {
    uint4 out;
    uint16_t *o = reinterpret_cast<uint16_t *>(&out);
    const __nv_bfloat162 *ha = reinterpret_cast<const __nv_bfloat162 *>(&a);
    const __nv_bfloat162 *hb = reinterpret_cast<const __nv_bfloat162 *>(&b);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const float2 f = __bfloat1622float2(k < 4 ? ha[k] : hb[k - 4]);
        o[k] = __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(f.x, scale), __fdiv_rn(f.y, scale)),
                                        __NV_SATFINITE, __NV_E4M3);
    }
    return out;
}

// 16 e4m3 codes -> 16 bf16(fp32(code) * scale), as two 16-byte vectors.
__device__ __forceinline__ void decode16(uint4 codes, float scale, uint4 *dst) {
    uint4 o[2];
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(o);
    const uint16_t *c = reinterpret_cast<const uint16_t *>(&codes);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(c[k], __NV_E4M3);
        const float2 q = __half22float2(*reinterpret_cast<const __half2 *>(&hr));
        h[k] = __floats2bfloat162_rn(__fmul_rn(q.x, scale), __fmul_rn(q.y, scale));
    }
    dst[0] = o[0];
    dst[1] = o[1];
}

// Entry k is peer (rank + 1 + k) % W, k < W - 1: the indices are compile-time after unrolling,
// so the pointers stay in registers.
struct Dest {
    uint4 *codes[PK_MAX_RANKS - 1]; // the peer's receive slot for our codes
    float *scale[PK_MAX_RANKS - 1]; // the peer's receive slots (one per CTA) for our scale
};

// CTA c handles the same 16-value vectors of the shard on every rank, so what it reads after
// the barrier was written by the peers' CTA c: one barrier per CTA is enough. The barrier at
// the end keeps a peer's next call from overwriting our receive slots before we have read them.
__global__ void __launch_bounds__(THREADS)
    encode_gather(ncclDevComm comm, const uint4 *x, const __nv_bfloat16 *hist,
                  __nv_bfloat16 *new_hist, const float *partial, int n_partial, Dest dst,
                  const uint4 *rcodes, const float *rscale, uint4 *full, int rank, int world,
                  size_t vecs) { // vecs: 16-value vectors per shard
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    float m = 0.0f;
    for (int i = threadIdx.x; i < n_partial; i += THREADS)
        m = fmaxf(m, partial[i]);
    const float amax = block_max(m);
    float hmax = amax; // hist'[15] = bf16(amax) = amax (a max of bf16 values)
    for (int j = 1; j < HIST; j++)
        hmax = fmaxf(hmax, __bfloat162float(hist[j]));
    const float scale = __fmul_rn(fmaxf(hmax, 1e-12f), 1.0f / 448.0f);
    if (blockIdx.x == 0 && threadIdx.x < HIST)
        new_hist[threadIdx.x] =
            threadIdx.x < HIST - 1 ? hist[threadIdx.x + 1] : __float2bfloat16_rn(amax);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < PK_MAX_RANKS - 1; k++) {
            if (k >= world - 1)
                break;
            dst.scale[k][blockIdx.x] = scale;
        }
    }

    const size_t stride = (size_t)gridDim.x * THREADS;
    uint4 *mine = full + (size_t)rank * vecs * 2;
    for (size_t v = (size_t)blockIdx.x * THREADS + threadIdx.x; v < vecs; v += stride) {
        const uint4 codes = encode16(x[2 * v], x[2 * v + 1], scale);
        decode16(codes, scale, mine + 2 * v);
#pragma unroll
        for (int k = 0; k < PK_MAX_RANKS - 1; k++) {
            if (k >= world - 1)
                break;
            dst.codes[k][v] = codes;
        }
    }

    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);

    for (int k = 1; k < world; k++) {
        const int s = (rank + k) % world;
        const float sc = rscale[s * MAX_CTAS + blockIdx.x];
        uint4 *to = full + (size_t)s * vecs * 2;
        for (size_t v = (size_t)blockIdx.x * THREADS + threadIdx.x; v < vecs; v += stride)
            decode16(rcodes[(size_t)s * vecs + v], sc, to + 2 * v);
    }

    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *flat_param_shard,
                        const __nv_bfloat16 *amax_history, __nv_bfloat16 *full,
                        __nv_bfloat16 *updated_hist, size_t P) {
    const int world = ctx->world_size, rank = ctx->rank;
    // Scratch: codes from every source rank (P bytes each), their scales (MAX_CTAS floats per
    // source), the amax partials (MAX_CTAS floats).
    const size_t code_bytes = (size_t)world * P;
    const size_t bytes = code_bytes + ((size_t)world + 1) * MAX_CTAS * sizeof(float);
    if (P % 16 != 0 || bytes > ctx->scratch_size ||
        ((uintptr_t)flat_param_shard | (uintptr_t)full) % 16 != 0)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits on its namesakes on the peers: all must be resident, one barrier each.
    int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    grid = grid < MAX_CTAS ? grid : MAX_CTAS;
    if (grid < 1)
        return 2;
    char *scratch = static_cast<char *>(ctx->scratch);
    uint4 *rcodes = reinterpret_cast<uint4 *>(scratch);
    float *rscale = reinterpret_cast<float *>(scratch + code_bytes);
    float *partial = rscale + (size_t)world * MAX_CTAS;
    const int n_partial = 2 * sms < MAX_CTAS ? 2 * sms : MAX_CTAS;
    amax_partial<<<n_partial, THREADS, 0, ctx->stream>>>(
        reinterpret_cast<const uint4 *>(flat_param_shard), P / 32, partial); // a quarter
    Dest dst = {};
    for (int k = 0; k < world - 1; k++) {
        const int q = (rank + 1 + k) % world;
        dst.codes[k] = static_cast<uint4 *>(pk_peer(ctx, rcodes + (size_t)rank * (P / 16), q));
        dst.scale[k] = static_cast<float *>(pk_peer(ctx, rscale + (size_t)rank * MAX_CTAS, q));
    }
    encode_gather<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, reinterpret_cast<const uint4 *>(flat_param_shard), amax_history,
        updated_hist, partial, n_partial, dst, rcodes, rscale, reinterpret_cast<uint4 *>(full),
        rank, world, P / 16);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
