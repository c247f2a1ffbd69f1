// Subtly wrong: the correct solution, but the shards are rotated: rank r writes its shard into
// block (r - p) mod W of peer p's y (the block of the stagger index, not the rank), so each
// rank's y starts with its own shard. Right on rank 0 only; every other rank fails in the
// first trial at any W (y[0] holds its own x instead of rank 0's). Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

struct Targets {
    uint4 *y[PK_MAX_RANKS]; // block `rank` of every rank's y, as mapped here, staggered by rank
};

__global__ void __launch_bounds__(THREADS)
    push_shard(ncclDevComm comm, const uint4 *x, Targets t, int world, size_t vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    // UNROLL independent 16-byte loads in flight per thread, then each stored W times.
    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t i0 = (size_t)blockIdx.x * THREADS + threadIdx.x; i0 < vecs; i0 += stride * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t i = i0 + u * stride;
            if (i < vecs)
                v[u] = x[i];
        }
        for (int p = 0; p < world; p++) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const size_t i = i0 + u * stride;
                if (i < vecs)
                    t.y[p][i] = v[u];
            }
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t M,
                        size_t N) {
    const int rank = ctx->rank, world = ctx->world_size;
    if (N % 8 != 0 || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1; // rows must be whole 16-byte vectors
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    const size_t vecs = M * N / 8; // one shard
    Targets t = {};
    for (int j = 0; j < world; j++) {
        const int peer = (rank + j) % world; // staggered so ranks do not all hit one peer
        t.y[j] = static_cast<uint4 *>(pk_peer(ctx, y, peer)) +
                 (size_t)((rank - peer + world) % world) * vecs; // the bug
    }
    push_shard<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, reinterpret_cast<const uint4 *>(x),
                                                  t, world, vecs);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
