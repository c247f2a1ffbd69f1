// Deliberately wrong (test data): every rank but the root copies the root's x;
// the root forgets to fill its own y.
// It compiles, runs and synchronizes like correct.cu; the verdict must be `incorrect`.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Copies `count` blocks of `vecs` 16-byte vectors; pointers may be local or a peer's
// (NVLink load/store).
struct Blocks {
    const uint4 *src[PK_MAX_RANKS];
    uint4 *dst[PK_MAX_RANKS];
    int count;
};

// The barrier before: every peer has entered this call, so its x is ready and its output
// may be written. The barrier after: every peer is done reading our x and writing our
// output, so the caller may reuse both once our stream passes this kernel.
__global__ void __launch_bounds__(THREADS) copy_blocks(ncclDevComm comm, Blocks b, size_t vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);

    // Blocks are interleaved per vector so local and NVLink traffic overlap.
    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t i0 = (size_t)blockIdx.x * THREADS + threadIdx.x; i0 < vecs; i0 += stride * UNROLL) {
        for (int s = 0; s < b.count; s++) {
            uint4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const size_t i = i0 + u * stride;
                if (i < vecs)
                    v[u] = b.src[s][i];
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const size_t i = i0 + u * stride;
                if (i < vecs)
                    b.dst[s][i] = v[u];
            }
        }
    }

    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Every CTA waits on the CTA with the same index on each peer, so all CTAs must be resident
// at once (at most one per SM) and each needs its own LSA barrier.
static int grid_size(const pk_ctx *ctx) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 0;
    return sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    const int rank = ctx->rank;
    const int root = 0; // the problem fixes the root at rank 0
    if (n % 8 != 0 || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1; // every block must be whole 16-byte vectors
    const int grid = grid_size(ctx);
    if (grid < 1)
        return 2;
    const uint4 *xv = reinterpret_cast<const uint4 *>(x);
    uint4 *yv = reinterpret_cast<uint4 *>(y);
    Blocks b = {};
    const size_t vecs = n / 8;
    b.src[0] = static_cast<const uint4 *>(pk_peer(ctx, xv, root));
    b.dst[0] = yv;
    b.count = rank == root ? 0 : 1;
    copy_blocks<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, b, vecs);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
