// Hostile (incorrect): a consistent dispatch in another order: inside each (expert, source)
// chunk the tokens come in descending order (as an atomics-based slotting may give), recv_x,
// recv_scale and recv_src agreeing row by row. The order is fixed (expert, source, token
// ascending), so the exact checker must reject it; a checker that compared sets would not.
// Otherwise solutions/correct.cu.
#include "pk_ctx.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 256
#define PULL_THREADS 512
#define MAX_E 256

// Scratch layout (bytes, every rank the same): q rows (M Hd), scales (M floats), counts (E
// int64), token lists (E x M int32).
struct Layout {
    size_t q, scale, counts, lists, end;
};

static Layout layout(size_t M, size_t Hd, int E) {
    Layout l;
    l.q = 0;
    l.scale = (M * Hd + 255) / 256 * 256;
    l.counts = l.scale + (M * 4 + 255) / 256 * 256;
    l.lists = l.counts + (size_t)E * 8;
    l.end = l.lists + (size_t)E * M * 4;
    return l;
}

struct MaxOp {
    __device__ float operator()(float a, float b) const {
        return fmaxf(a, b);
    }
};

__global__ void quantize_rows(const bf16 *x, long long Hd, int8_t *q, float *scale) {
    typedef cub::BlockReduce<float, THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ float s_scale;
    const long long m = blockIdx.x;
    const uint4 *row = reinterpret_cast<const uint4 *>(x + m * Hd);
    float amax = 0.f;
    for (long long v = threadIdx.x; v < Hd / 8; v += THREADS) {
        const uint4 u = row[v];
        const bf16 *h = reinterpret_cast<const bf16 *>(&u);
        for (int i = 0; i < 8; i++)
            amax = fmaxf(amax, fabsf(__bfloat162float(h[i])));
    }
    amax = Reduce(tmp).Reduce(amax, MaxOp());
    if (threadIdx.x == 0) {
        s_scale = amax / 127.f;
        scale[m] = s_scale;
    }
    __syncthreads();
    const float sc = s_scale;
    for (long long v = threadIdx.x; v < Hd / 8; v += THREADS) {
        const uint4 u = row[v];
        const bf16 *h = reinterpret_cast<const bf16 *>(&u);
        uint2 out;
        int8_t *o = reinterpret_cast<int8_t *>(&out);
        for (int i = 0; i < 8; i++) {
            float f = sc > 0.f ? rintf(__bfloat162float(h[i]) / sc) : 0.f;
            o[i] = (int8_t)fminf(fmaxf(f, -127.f), 127.f);
        }
        reinterpret_cast<uint2 *>(q + m * Hd)[v] = out;
    }
}

// One CTA per global expert: lists[e M + i] = the i-th token (ascending) that chose e.
__global__ void expert_lists(const int64_t *topk, long long M, int K, int32_t *lists,
                             int64_t *counts) {
    typedef cub::BlockScan<int, THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const int e = blockIdx.x;
    long long running = 0;
    for (long long base = 0; base < M; base += THREADS) {
        const long long m = base + threadIdx.x;
        int hit = 0;
        if (m < M)
            for (int k = 0; k < K; k++)
                hit |= topk[m * K + k] == e;
        int p, total;
        Scan(tmp).ExclusiveSum(hit, p, total);
        if (hit)
            lists[(long long)e * M + running + p] = (int32_t)m;
        running += total;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        counts[e] = running;
}

__global__ void __launch_bounds__(PULL_THREADS)
    pull_rows(ncclDevComm comm, ncclWindow_t win, size_t scratch_off, Layout l, int rank, int world,
              int El, long long M, long long vecs, uint4 *recv_x, float *recv_scale,
              int64_t *recv_src, int64_t *expert_counts) {
    __shared__ long long start[MAX_E + 1]; // chunk c = e * world + s: first output row
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const int chunks = El * world;
    for (int c = threadIdx.x; c < chunks; c += PULL_THREADS) {
        const int e = c / world, s = c % world;
        const char *base = static_cast<const char *>(ncclGetLsaPointer(win, scratch_off, s));
        start[c + 1] = reinterpret_cast<const int64_t *>(base + l.counts)[rank * El + e];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        start[0] = 0;
        for (int c = 0; c < chunks; c++)
            start[c + 1] += start[c];
    }
    __syncthreads();
    if (blockIdx.x == 0)
        for (int e = threadIdx.x; e < El; e += PULL_THREADS)
            expert_counts[e] = start[(e + 1) * world] - start[e * world];
    const long long total = start[chunks];
    const int lane = threadIdx.x % 32;
    const long long warps = (long long)gridDim.x * PULL_THREADS / 32;
    for (long long j = ((long long)blockIdx.x * PULL_THREADS + threadIdx.x) / 32; j < total;
         j += warps) {
        int lo = 0, hi = chunks - 1; // the last chunk that starts at or before row j
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (start[mid] <= j)
                lo = mid;
            else
                hi = mid - 1;
        }
        const int e = lo / world, s = lo % world;
        const char *base = static_cast<const char *>(ncclGetLsaPointer(win, scratch_off, s));
        const int32_t *list = reinterpret_cast<const int32_t *>(base + l.lists);
        const long long i = start[lo + 1] - 1 - j; // descending inside the chunk
        const long long m = list[(long long)(rank * El + e) * M + i];
        const uint4 *src = reinterpret_cast<const uint4 *>(base + l.q) + m * vecs;
        for (long long v = lane; v < vecs; v += 32)
            recv_x[j * vecs + v] = src[v];
        if (lane == 0) {
            recv_scale[j] = reinterpret_cast<const float *>(base + l.scale)[m];
            recv_src[j] = (long long)s * M + m;
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, const int64_t *topk_idx,
                        int8_t *recv_x, float *recv_scale, int64_t *recv_src,
                        int64_t *expert_counts, size_t M, size_t Hd, int E, int K) {
    const int W = ctx->world_size, El = E / W;
    if (Hd % 16 != 0 || E > MAX_E || El * W != E || ((uintptr_t)x | (uintptr_t)recv_x) % 16 != 0)
        return 1;
    const Layout l = layout(M, Hd, E);
    if (ctx->scratch_size < l.end)
        return 2;
    char *scratch = static_cast<char *>(ctx->scratch);
    quantize_rows<<<(unsigned)M, THREADS, 0, ctx->stream>>>(
        x, (long long)Hd, reinterpret_cast<int8_t *>(scratch + l.q),
        reinterpret_cast<float *>(scratch + l.scale));
    expert_lists<<<E, THREADS, 0, ctx->stream>>>(topk_idx, (long long)M, K,
                                                 reinterpret_cast<int32_t *>(scratch + l.lists),
                                                 reinterpret_cast<int64_t *>(scratch + l.counts));
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 3;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 4;
    pull_rows<<<grid, PULL_THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, scratch), l, ctx->rank, W, El, (long long)M,
        (long long)(Hd / 16), reinterpret_cast<uint4 *>(recv_x), recv_scale, recv_src,
        expert_counts);
    return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
