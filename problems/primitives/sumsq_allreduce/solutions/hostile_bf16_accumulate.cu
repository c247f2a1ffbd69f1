// Hostile (test data): the same kernels, but each thread accumulates its squares in bf16
// (paired bf16 FMAs, half the registers and twice the math rate) before the fp32 tree: the
// precision downgrade the problem rules out. Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 256

__global__ void __launch_bounds__(THREADS)
    local_sums(const uint4 *x, float *partial, size_t vecs_per_row) {
    const uint4 *row = x + (size_t)blockIdx.x * vecs_per_row;
    __nv_bfloat162 acc2 = __floats2bfloat162_rn(0.f, 0.f);
    for (size_t i = threadIdx.x; i < vecs_per_row; i += THREADS) {
        uint4 v = row[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
        for (int k = 0; k < 4; k++)
            acc2 = __hfma2(h[k], h[k], acc2);
    }
    float2 pair = __bfloat1622float2(acc2);
    float acc = pair.x + pair.y;
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    __shared__ float warp_sums[THREADS / 32];
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.f;
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (threadIdx.x == 0)
            partial[blockIdx.x] = acc;
    }
}

struct Partials {
    const float *p[PK_MAX_RANKS];
};

// Barrier before: every peer's partials are written. Barrier after: every peer is done
// reading ours, so the next call may overwrite them.
__global__ void __launch_bounds__(THREADS)
    sum_partials(ncclDevComm comm, Partials in, int world, float *y, size_t rows) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (size_t r = (size_t)blockIdx.x * THREADS + threadIdx.x; r < rows;
         r += (size_t)gridDim.x * THREADS) {
        float s = 0.f;
        for (int q = 0; q < world; q++)
            s += in.p[q][r];
        y[r] = s;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, float *y, size_t rows,
                        size_t cols) {
    if (cols % 8 != 0 || (uintptr_t)x % 16 != 0 || rows * sizeof(float) > ctx->scratch_size)
        return 1;
    float *partial = static_cast<float *>(ctx->scratch);
    local_sums<<<(unsigned)rows, THREADS, 0, ctx->stream>>>(reinterpret_cast<const uint4 *>(x),
                                                            partial, cols / 8);
    Partials in = {};
    for (int q = 0; q < ctx->world_size; q++)
        in.p[q] = static_cast<const float *>(pk_peer(ctx, partial, q));
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 2;
    sum_partials<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, in, ctx->world_size, y, rows);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
