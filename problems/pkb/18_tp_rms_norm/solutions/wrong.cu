// Subtly wrong: the correct fused kernel, but the variance divides the global sum of squares
// by the local hidden size N instead of N * W (every output too large by sqrt(W)).
// Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>
#include <cuda_pipeline.h>

#define THREADS 256
#define ROWS (THREADS / 32) // rows per block: one warp each

static unsigned g_calls; // same sequence on every rank: picks the exchange buffer's half

struct Exchange {
    float *peer[PK_MAX_RANKS]; // this call's half of every rank's exchange buffer, as mapped here
};

__global__ void __launch_bounds__(THREADS)
    fused_rms_norm(ncclDevComm comm, const uint4 *x, const uint4 *w, uint4 *out, Exchange ex,
                   const float *mine, int rank, int world, size_t blocks, size_t row_vecs,
                   float inv_hidden, float eps) {
    extern __shared__ uint4 smem[]; // weights, then two buffers of ROWS rows
    uint4 *w_s = smem, *buf0 = smem + row_vecs;
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t block_vecs = ROWS * row_vecs;
    for (size_t i = threadIdx.x; i < row_vecs; i += THREADS)
        w_s[i] = w[i];
    size_t blk = blockIdx.x;
    if (blk < blocks) {
        for (size_t i = threadIdx.x; i < block_vecs; i += THREADS)
            __pipeline_memcpy_async(&buf0[i], &x[blk * block_vecs + i], 16);
    }
    __pipeline_commit();
    for (int it = 0; blk < blocks; it++, blk += gridDim.x) {
        const size_t next = blk + gridDim.x;
        if (next < blocks) // the next block's copy runs during this block's exchange
            for (size_t i = threadIdx.x; i < block_vecs; i += THREADS)
                __pipeline_memcpy_async(&buf0[((it + 1) & 1) * block_vecs + i],
                                        &x[next * block_vecs + i], 16);
        __pipeline_commit();
        __pipeline_wait_prior(1); // this block's copy is complete (for this thread's part)
        __syncthreads();
        const uint4 *rowv = buf0 + (it & 1) * block_vecs + (size_t)warp * row_vecs;
        const size_t row = blk * ROWS + warp;
        float acc = 0.f;
        for (size_t i = lane; i < row_vecs; i += 32) {
            const uint4 v = rowv[i];
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
        if (lane < world)
            ex.peer[lane][row * world + rank] = acc;
        bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel); // every rank's partials are in
        float ss = 0.f;
        for (int q = 0; q < world; q++)
            ss += mine[row * world + q];
        const float rstd = rsqrtf(__fadd_rn(__fmul_rn(ss, inv_hidden), eps));
        uint4 *orow = out + row * row_vecs;
        for (size_t i = lane; i < row_vecs; i += 32) {
            const uint4 xv = rowv[i], wv = w_s[i];
            const __nv_bfloat162 *xh = reinterpret_cast<const __nv_bfloat162 *>(&xv);
            const __nv_bfloat162 *wh = reinterpret_cast<const __nv_bfloat162 *>(&wv);
            uint4 o;
            __nv_bfloat162 *oh = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 xf = __bfloat1622float2(xh[k]), wf = __bfloat1622float2(wh[k]);
                const float2 nf =
                    __bfloat1622float2(__floats2bfloat162_rn(xf.x * rstd, xf.y * rstd));
                oh[k] = __floats2bfloat162_rn(wf.x * nf.x, wf.y * nf.y);
            }
            orow[i] = o;
        }
        __syncthreads(); // the buffer is refilled two blocks from now
    }
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *hidden, const __nv_bfloat16 *weight,
                        __nv_bfloat16 *out, size_t M, size_t N, float eps) {
    const int world = ctx->world_size;
    const size_t row_vecs = N / 8;
    const size_t smem = (1 + 2 * ROWS) * row_vecs * sizeof(uint4);
    if (N % 8 != 0 || M % ROWS != 0 || smem > 227 * 1024 || world > 32 ||
        2 * M * world * sizeof(float) > ctx->scratch_size ||
        ((uintptr_t)hidden | (uintptr_t)weight | (uintptr_t)out) % 16 != 0)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident (one per SM with this
    // much shared memory) and each needs its own LSA barrier.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1 ||
        cudaFuncSetAttribute(fused_rms_norm, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)smem) != cudaSuccess)
        return 3;
    float *mine = static_cast<float *>(ctx->scratch) + (g_calls++ & 1u) * M * world;
    Exchange ex = {};
    for (int q = 0; q < world; q++)
        ex.peer[q] = static_cast<float *>(pk_peer(ctx, mine, q));
    const float inv_hidden = 1.0f / (float)N; // the bug: the local hidden size
    fused_rms_norm<<<grid, THREADS, smem, ctx->stream>>>(
        ctx->dev_comm, reinterpret_cast<const uint4 *>(hidden),
        reinterpret_cast<const uint4 *>(weight), reinterpret_cast<uint4 *>(out), ex, mine,
        ctx->rank, world, M / ROWS, row_vecs, inv_hidden, eps);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
