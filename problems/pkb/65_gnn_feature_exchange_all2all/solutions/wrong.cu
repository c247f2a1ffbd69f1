// Wrong (subtly): as correct.cu, but every row of a chunk from another rank is taken one
// gathered row too late (in_off + i + 1: the chunk boundary misplaced by one, the last row read
// from the next chunk, clamped to the last of the T rows): an off-by-one at the chunk boundary,
// wrong whenever a rank receives a remote chunk (every trial, at every W).
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512

__global__ void __launch_bounds__(THREADS)
    pull_rows(ncclDevComm comm, ncclWindow_t win, size_t feat_off, size_t ids_off, size_t recvd_off,
              const int64_t *sent, uint4 *out, int r, int world, long long F, long long O,
              long long vecs, long long T) {
    __shared__ const uint4 *feat[PK_MAX_RANKS];   // chunk k's source rank's features
    __shared__ const int64_t *ids[PK_MAX_RANKS];  // ... its seed_inverse_ids, from our chunk on
    __shared__ long long start[PK_MAX_RANKS + 1]; // first output row of chunk k; [W]: the total
    __shared__ long long room[PK_MAX_RANKS];      // ids from chunk k's start to the end
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < world) {
        const int k = threadIdx.x, p = (r + k) % world, j = (r - p + world) % world;
        const int64_t *cr = static_cast<const int64_t *>(ncclGetLsaPointer(win, recvd_off, p));
        long long off = 0;
        for (int m = 0; m < j; m++)
            off += cr[m];
        feat[k] = static_cast<const uint4 *>(ncclGetLsaPointer(win, feat_off, p));
        ids[k] = static_cast<const int64_t *>(ncclGetLsaPointer(win, ids_off, p)) + off;
        room[k] = T - off;
    }
    if (threadIdx.x == 0) {
        long long acc = 0;
        for (int k = 0; k < world; k++) {
            start[k] = acc;
            acc += sent[k];
        }
        start[world] = acc;
    }
    __syncthreads();
    const long long total = start[world], n = O * vecs;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const long long o = e / vecs;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (o < total) {
            int k = 0;
            while (o >= start[k + 1]) // an empty chunk's range is empty: skipped
                k++;
            long long i = o - start[k] + (k > 0); // off by one
            i = i < room[k] ? i : room[k] - 1;    // kept inside the T ids
            long long id = ids[k][i];
            id = id < 0 ? 0 : id >= F ? F - 1 : id;
            v = feat[k][id * vecs + e % vecs];
        }
        out[e] = v;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *local_features,
                        const int64_t *seed_inverse_ids, const int64_t *counts_sent,
                        const int64_t *counts_received, __nv_bfloat16 *out, size_t F, size_t D,
                        size_t T, size_t O) {
    if (D % 8 != 0 || ((uintptr_t)local_features | (uintptr_t)out) % 16 != 0)
        return 1; // rows must be whole 16-byte vectors
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    pull_rows<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, local_features),
        pk_sym_offset(ctx, seed_inverse_ids), pk_sym_offset(ctx, counts_received), counts_sent,
        reinterpret_cast<uint4 *>(out), ctx->rank, ctx->world_size, (long long)F, (long long)O,
        (long long)(D / 8), (long long)T);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
