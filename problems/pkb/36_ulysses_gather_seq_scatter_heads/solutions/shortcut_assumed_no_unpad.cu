// Shortcut twin (issue #29), deliberately wrong: assumes PKB's unpadded_dim_size = 0 (PKB's
// inputs always pass 0) and never reads it, as a kernel tuned on PKB's inputs might: it always
// writes the whole gathered sequence, (B, W S, H / W, D). Right on the calls with
// unpadded_dim_size = 0 (trial 0, PKB's own case) and for batch 0 of every call; wrong from
// trial 1 on (unpadded_dim_size = W S - 1): PKB's output drops the padded positions, so batch b
// starts at b Useq positions, not b W S. The verdict must be `incorrect`.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Items: 16-byte vectors of y in its own order, o = (b * useq + t) * row_vecs + v.
__global__ void __launch_bounds__(THREADS)
    pull_heads(ncclDevComm comm, ncclWindow_t win, size_t x_off, uint4 *y, int rank, int world,
               size_t B, size_t S, size_t useq, size_t in_vecs, size_t row_vecs) {
    __shared__ const uint4 *src[PK_MAX_RANKS]; // head block `rank` of rank q's x, as mapped here
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < world) // arguments sit at the same offset of the window on every rank
        src[threadIdx.x] = static_cast<const uint4 *>(ncclGetLsaPointer(win, x_off, threadIdx.x)) +
                           (size_t)rank * row_vecs;
    __syncthreads();
    const size_t n = B * useq * row_vecs, stride = (size_t)gridDim.x * THREADS;
    for (size_t o0 = (size_t)blockIdx.x * THREADS + threadIdx.x; o0 < n; o0 += stride * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) { // UNROLL independent NVLink loads in flight
            const size_t o = o0 + u * stride;
            if (o < n) {
                const size_t c = o % row_vecs, t = (o / row_vecs) % useq, b = o / row_vecs / useq;
                v[u] = src[t / S][(b * S + t % S) * in_vecs + c];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t o = o0 + u * stride;
            if (o < n)
                y[o] = v[u];
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t B,
                        size_t S, size_t H, size_t D, size_t unpadded_dim_size) {
    const int world = ctx->world_size;
    const size_t W = (size_t)world;
    if (H % W != 0 || D % 8 != 0 || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1;            // equal head blocks of whole 16-byte vectors
    (void)unpadded_dim_size; // the shortcut: PKB's inputs never unpad
    const size_t useq = W * S;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    pull_heads<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, x),
                                                  reinterpret_cast<uint4 *>(y), ctx->rank, world, B,
                                                  S, useq, H * D / 8, H / W * D / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
