// Shortcut twin (incorrect): as correct.cu, but key_splits is never read: every rank is assumed
// to own F / W features (the remainder to the last), as an even sharding of the tables would
// give. It passes on the calls whose key splits are equal (key % 4 == 1: trial 1) and fails on
// PKB's own pattern (1 + d % 3 features per rank), the skewed splits with ranks that own no
// feature, and the hot ones.
#include "pk_ctx.h"

#include <cub/block/block_reduce.cuh>
#include <cuda/atomic>

#define THREADS 512
#define MAX_ROWS 1024 // output rows (features owned x W)

__global__ void feature_sums(const int64_t *lengths, long long B, long long *sums) {
    typedef cub::BlockReduce<long long, 256> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    long long s = 0;
    for (long long b = threadIdx.x; b < B; b += 256)
        s += lengths[blockIdx.x * B + b];
    s = Reduce(tmp).Sum(s);
    if (threadIdx.x == 0)
        sums[blockIdx.x] = s;
}

__global__ void __launch_bounds__(THREADS)
    pull(ncclDevComm comm, ncclWindow_t win, size_t len_off, size_t val_off, size_t sums_off,
         const int64_t *key_splits, int r, int W, long long F, long long B, int64_t *olen,
         int64_t *oval, int64_t *osizes, long long NL, long long NV) {
    __shared__ long long src[MAX_ROWS];     // output row (f, q): first id in q's values
    __shared__ long long dst[MAX_ROWS + 1]; // first id in out_values; [rows]: the total
    __shared__ long long key_off, K;
    typedef cub::BlockReduce<long long, THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        (void)key_splits; // equal shares assumed: never read
        key_off = r * (F / W);
        K = F / W + (r == W - 1 ? F % W : 0);
    }
    __syncthreads();
    const long long rows = K * W;
    if (rows > MAX_ROWS)
        __trap();
    for (int q = 0; q < W; q++) { // q's ids before our first feature, and of each of ours
        const long long *sq = static_cast<const long long *>(ncclGetLsaPointer(win, sums_off, q));
        long long before = 0;
        for (long long g = threadIdx.x; g < F; g += THREADS) {
            const long long v = sq[g];
            if (g < key_off)
                before += v;
            else if (g < key_off + K)
                dst[(g - key_off) * W + q] = v; // the row's size, for now
        }
        before = Reduce(tmp).Sum(before);
        __syncthreads();
        if (threadIdx.x == 0) {
            for (long long f = 0; f < K; f++) {
                src[f * W + q] = before;
                before += dst[f * W + q];
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) { // sizes -> exclusive prefix in output order
        long long acc = 0;
        for (long long o = 0; o < rows; o++) {
            const long long n = dst[o];
            dst[o] = acc;
            acc += n;
        }
        dst[rows] = acc;
        if (blockIdx.x == 0) {
            osizes[0] = rows * B;
            osizes[1] = acc;
        }
    }
    __syncthreads();
    const long long nl = rows * B, total = dst[rows];
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < NL + NV;
         e += (long long)gridDim.x * THREADS) {
        if (e < NL) {
            int64_t v = 0;
            if (e < nl) {
                const long long o = e / B, b = e % B, f = o / W;
                const int q = (int)(o % W);
                const int64_t *lq =
                    static_cast<const int64_t *>(ncclGetLsaPointer(win, len_off, q));
                v = lq[(key_off + f) * B + b];
            }
            olen[e] = v;
        } else {
            const long long j = e - NL;
            int64_t v = 0;
            if (j < total) {
                int lo = 0, hi = (int)rows - 1; // the last row whose first id is <= j
                while (lo < hi) {
                    const int mid = (lo + hi + 1) / 2;
                    if (dst[mid] <= j)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                const int q = lo % W;
                const int64_t *vq =
                    static_cast<const int64_t *>(ncclGetLsaPointer(win, val_off, q));
                v = vq[src[lo] + j - dst[lo]];
            }
            oval[j] = v;
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const int64_t *lengths, const int64_t *values,
                        const int64_t *key_splits, int64_t *out_lengths, int64_t *out_values,
                        int64_t *out_sizes, size_t F, size_t B, size_t L, size_t NL, size_t NV) {
    (void)L;
    if (F * sizeof(long long) > ctx->scratch_size)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    long long *sums = static_cast<long long *>(ctx->scratch);
    feature_sums<<<(unsigned)F, 256, 0, ctx->stream>>>(lengths, (long long)B, sums);
    pull<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, lengths), pk_sym_offset(ctx, values),
        pk_sym_offset(ctx, sums), key_splits, ctx->rank, ctx->world_size, (long long)F,
        (long long)B, out_lengths, out_values, out_sizes, (long long)NL, (long long)NV);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
