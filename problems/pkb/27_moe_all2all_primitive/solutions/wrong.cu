// Deliberately wrong (test data): the first row a source s sends to this rank is computed from
// this rank's own input_split_sizes (the rows it sends to the ranks before it) instead of s's:
// right when every rank splits its rows alike (PKB's equal splits, routing mode 0), wrong as
// soon as the ranks' splits differ (every other mode). Otherwise as correct.cu; the verdict
// must be `incorrect`.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

struct Sources {
    const uint4 *x[PK_MAX_RANKS];        // every rank's input rows, as mapped here
    const int64_t *splits[PK_MAX_RANKS]; // every rank's input_split_sizes, as mapped here
};

__global__ void __launch_bounds__(THREADS)
    pull_rows(ncclDevComm comm, Sources src, const int64_t *out_splits, uint4 *y, int rank,
              int world, size_t vpr, size_t C) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);

    __shared__ long long seg[PK_MAX_RANKS + 1]; // output rows [seg[s], seg[s + 1]) come from s
    __shared__ long long first[PK_MAX_RANKS];   // their first row in rank s's input
    if (threadIdx.x == 0) {
        long long o = 0;
        for (int s = 0; s < world; s++) {
            seg[s] = o;
            o += out_splits[s];
            long long f = 0;
            for (int j = 0; j < rank; j++)
                f += src.splits[rank][j]; // BUG: our splits, not s's
            first[s] = f;
        }
        seg[world] = o;
    }
    __syncthreads();
    const long long total = seg[world];
    for (size_t r0 = blockIdx.x; r0 < C; r0 += (size_t)gridDim.x * UNROLL) {
        for (size_t c = threadIdx.x; c < vpr; c += THREADS) {
            uint4 val[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const long long o = (long long)(r0 + (size_t)u * gridDim.x);
                val[u] = make_uint4(0, 0, 0, 0);
                if (o < total) {
                    int s = 0;
                    while (o >= seg[s + 1])
                        s++;
                    val[u] = src.x[s][(size_t)(first[s] + o - seg[s]) * vpr + c];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const size_t o = r0 + (size_t)u * gridDim.x;
                if (o < C)
                    y[o * vpr + c] = val[u];
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

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *local_tensor,
                        const int64_t *input_split_sizes, const int64_t *output_split_sizes,
                        __nv_bfloat16 *output, size_t M, size_t N, size_t C) {
    const int world = ctx->world_size;
    if (N % 8 != 0 || ((uintptr_t)local_tensor | (uintptr_t)output) % 16 != 0)
        return 1; // rows are whole 16-byte vectors
    const int grid = grid_size(ctx);
    if (grid < 1)
        return 2;
    Sources src = {};
    for (int q = 0; q < world; q++) {
        src.x[q] = static_cast<const uint4 *>(pk_peer(ctx, local_tensor, q));
        src.splits[q] = static_cast<const int64_t *>(pk_peer(ctx, input_split_sizes, q));
    }
    pull_rows<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, src, output_split_sizes,
                                                 reinterpret_cast<uint4 *>(output), ctx->rank,
                                                 world, N / 8, C);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
