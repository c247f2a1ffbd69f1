// Correct, and not the reference: one kernel, no NCCL collective, no pack and no staging
// buffer. Rank r pulls its C columns (block r of each of q, k and v) of every position of every
// rank p's qkv over NVLink (LSA loads through the arena's NCCL window, ncclGetLsaPointer; its
// own positions by local loads) and stores them straight into their final place, position
// p S + s of y: the all-to-all, the concatenation along the sequence, the view back to
// (B, Useq, 3 C) and the unpadding slice fused (dropped positions are never read). LSA barriers
// before (every peer is in this call: its qkv is ready) and after (every peer has finished
// reading ours, so the harness may reuse qkv).
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Items: 16-byte vectors of y in its own order, o = (b * useq + t) * 3 cvecs + k * cvecs + c.
__global__ void __launch_bounds__(THREADS)
    pull_qkv(ncclDevComm comm, ncclWindow_t win, size_t x_off, uint4 *y, int rank, int world,
             size_t B, size_t S, size_t useq, size_t hd_vecs, size_t cvecs) {
    __shared__ const uint4 *src[PK_MAX_RANKS]; // column block `rank` of rank p's qkv, mapped here
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < world) // arguments sit at the same offset of the window on every rank
        src[threadIdx.x] = static_cast<const uint4 *>(ncclGetLsaPointer(win, x_off, threadIdx.x)) +
                           (size_t)rank * cvecs;
    __syncthreads();
    const size_t row_vecs = 3 * cvecs, n = B * useq * row_vecs,
                 stride = (size_t)gridDim.x * THREADS;
    for (size_t o0 = (size_t)blockIdx.x * THREADS + threadIdx.x; o0 < n; o0 += stride * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) { // UNROLL independent NVLink loads in flight
            const size_t o = o0 + u * stride;
            if (o < n) {
                const size_t e = o % row_vecs, t = (o / row_vecs) % useq, b = o / row_vecs / useq;
                const size_t k = e / cvecs, c = e % cvecs; // q, k or v; column vector
                v[u] = src[t / S][((b * S + t % S) * 3 + k) * hd_vecs + c];
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

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *qkv, __nv_bfloat16 *y, size_t B,
                        size_t S, size_t H, size_t D, size_t unpadded_dim_size) {
    const int world = ctx->world_size;
    const size_t W = (size_t)world, HD = H * D;
    if (HD % (8 * W) != 0 || unpadded_dim_size > W * S || ((uintptr_t)qkv | (uintptr_t)y) % 16 != 0)
        return 1; // equal column blocks of whole 16-byte vectors
    // PKB: the first unpadded_dim_size positions when it is non-zero and not a multiple of W.
    const size_t useq = unpadded_dim_size && unpadded_dim_size % W ? unpadded_dim_size : W * S;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    pull_qkv<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, qkv),
                                                reinterpret_cast<uint4 *>(y), ctx->rank, world, B,
                                                S, useq, HD / 8, HD / W / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
