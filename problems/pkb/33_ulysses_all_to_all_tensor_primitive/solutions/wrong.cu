// Subtly wrong: the correct solution, but the received chunks are stacked along dim 0 (rank
// j's chunk as rows [j*Mw, (j+1)*Mw) of a (M, N) tensor: torch.cat(dim=0), the gather_dim
// forgotten) instead of side by side along dim 1 ((Mw, W*N)). Same bytes, same count, wrong
// layout: right only when Mw = M / W = 1, so at these dims it fails on every rank in the first
// trial (y[N] is row 1 of chunk 0 instead of row 0 of chunk 1). Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Items: 16-byte vectors of y in its own order, o = (i * W + j) * row_vecs + v.
__global__ void __launch_bounds__(THREADS)
    pull_chunks(ncclDevComm comm, ncclWindow_t win, size_t x_off, uint4 *y, int rank, int world,
                size_t Mw, size_t row_vecs) {
    __shared__ const uint4 *src[PK_MAX_RANKS]; // chunk `rank` of rank j's x, as mapped here
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < world) // arguments sit at the same offset of the window on every rank
        src[threadIdx.x] = static_cast<const uint4 *>(ncclGetLsaPointer(win, x_off, threadIdx.x)) +
                           (size_t)rank * Mw * row_vecs;
    __syncthreads();
    const size_t n = Mw * (size_t)world * row_vecs, stride = (size_t)gridDim.x * THREADS;
    // UNROLL independent NVLink loads in flight per thread before the stores.
    for (size_t o0 = (size_t)blockIdx.x * THREADS + threadIdx.x; o0 < n; o0 += stride * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t o = o0 + u * stride;
            if (o < n) {
                const size_t c = o % row_vecs, j = (o / row_vecs) % (size_t)world,
                             i = o / row_vecs / (size_t)world;
                v[u] = src[j][i * row_vecs + c];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t o = o0 + u * stride;
            if (o < n) {
                const size_t c = o % row_vecs, j = (o / row_vecs) % (size_t)world,
                             i = o / row_vecs / (size_t)world;
                y[(j * Mw + i) * row_vecs + c] = v[u]; // the bug: cat along dim 0
            }
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t M,
                        size_t N) {
    const int rank = ctx->rank, world = ctx->world_size;
    if (M % (size_t)world != 0 || N % 8 != 0 || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1; // equal chunks of whole 16-byte vectors
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    const size_t Mw = M / (size_t)world, row_vecs = N / 8;
    pull_chunks<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, x), reinterpret_cast<uint4 *>(y), rank,
        world, Mw, row_vecs);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
