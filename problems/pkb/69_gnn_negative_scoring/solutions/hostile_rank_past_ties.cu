// Hostile (test data for the custom checker): every rank is exact where the positive ties with
// no negative, and one place past the end of the tie range where it does (1 + ge + 1): each
// wrong rank is within one of an admissible one, so a lax checker that allows a slack of one
// "for ties", or compares with the reference's rank within a tolerance, would accept it. With
// bf16 sigmoids, ties are common (s(x) has 2^-8 resolution near 1 and 2^-9 near 0.5: a positive
// ties with a few of its 1000 negatives in most rows), so the strict range check of problem.cu's
// check() must reject it on the first trial. Otherwise as correct.cu; the verdict must be
// `incorrect`.
#include "pk_ctx.h"

#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 512

static __device__ __forceinline__ float sig_bf16(bf16 x) {
    return __bfloat162float(__float2bfloat16(1.f / (1.f + expf(-__bfloat162float(x)))));
}

__global__ void __launch_bounds__(THREADS)
    rank_pull(ncclDevComm comm, ncclWindow_t win, size_t pos_off, size_t neg_off, size_t rows_off,
              int world, long long P, long long G, int64_t *ranks, int64_t *total_out) {
    __shared__ long long start[PK_MAX_RANKS + 1];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        long long acc = 0;
        for (int q = 0; q < world; q++) {
            start[q] = acc;
            acc += *static_cast<const int64_t *>(ncclGetLsaPointer(win, rows_off, q));
        }
        start[world] = acc;
        if (blockIdx.x == 0)
            *total_out = acc;
    }
    __syncthreads();
    const long long total = start[world];
    const long long warp = ((long long)blockIdx.x * THREADS + threadIdx.x) / 32;
    const long long warps = (long long)gridDim.x * THREADS / 32;
    for (long long j = warp; j < total; j += warps) {
        int q = 0;
        while (j >= start[q + 1])
            q++;
        const long long i = j - start[q];
        const bf16 *pq = static_cast<const bf16 *>(ncclGetLsaPointer(win, pos_off, q));
        const bf16 *nq = static_cast<const bf16 *>(ncclGetLsaPointer(win, neg_off, q));
        const float p = sig_bf16(pq[i]);
        int gt = 0, ge = 0;
        for (long long n = threadIdx.x % 32; n < G; n += 32) {
            const float s = sig_bf16(nq[i * G + n]);
            gt += s > p;
            ge += s >= p;
        }
        for (int o = 16; o > 0; o >>= 1) {
            gt += __shfl_xor_sync(0xffffffffu, gt, o);
            ge += __shfl_xor_sync(0xffffffffu, ge, o);
        }
        if (threadIdx.x % 32 == 0)
            ranks[j] = 1 + ge + (ge > gt); // one place past the ties, where there are ties
    }
    for (long long j = total + (long long)blockIdx.x * THREADS + threadIdx.x; j < world * P;
         j += (long long)gridDim.x * THREADS)
        ranks[j] = 0;
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *local_pos_scores,
                        const __nv_bfloat16 *local_neg_scores, const int64_t *rows, int64_t *ranks,
                        int64_t *total, size_t P, size_t G) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 1;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 2;
    rank_pull<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, local_pos_scores),
        pk_sym_offset(ctx, local_neg_scores), pk_sym_offset(ctx, rows), ctx->world_size,
        (long long)P, (long long)G, ranks, total);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
