// Shortcut twin (issue 26), expected incorrect: no exchange of the binarised masks. Each rank
// suppresses its objects only against its OWN objects (its bits are the only ones it gathers and
// the only ones its intersection kernel visits); the masks, scores and flags are still
// assembled from every rank. On PKB's inputs nothing overlaps enough to be suppressed (IoU ~0.5),
// so it passes there (trial class 0); the designed classes put duplicates and exact-threshold
// pairs of one family on different ranks, whose suppression it misses.
#include "pk_ctx.h"

#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 256
#define TILE 4         // own rows per CTA in the intersection kernel
#define FLAGS_OFF 0    // scratch: u32 flags [C]
#define AREAS_OFF 4096 // u32 areas [C]
#define BITS_OFF 8192  // u32 bits [C][HW / 32]
#define MAXW 32
#define NO_OBJ_LOGIT (-10.0f)

static uint32_t *g_bits; // all T objects' bits, gathered
static uint32_t *g_area;
static size_t g_bytes;

struct shard_map {
    long long start[MAXW + 1];
};

// Owner rank of global object g (start[q] <= g < start[q + 1]).
__device__ __forceinline__ int owner_of(const long long *start, int W, long long g) {
    int q = 0;
    while (q + 1 < W && start[q + 1] <= g)
        q++;
    return q;
}

__device__ __forceinline__ void load_starts(const int64_t *counts, int W, long long C,
                                            long long *start) {
    if (threadIdx.x == 0) {
        start[0] = 0;
        for (int q = 0; q < W; q++) {
            const long long n = counts[q] < 0 ? 0 : counts[q] > C ? C : counts[q];
            start[q + 1] = start[q] + n;
        }
    }
    __syncthreads();
}

// Rank me's masks -> bits (pixel 32 w + lane is bit lane of word w) and areas.
__global__ void __launch_bounds__(THREADS) pack(const bf16 *masks, const int64_t *counts, int me,
                                                long long C, long long HW, char *scratch) {
    const long long n = counts[me] < 0 ? 0 : counts[me] > C ? C : counts[me];
    const long long words = HW / 32;
    uint32_t *bits = reinterpret_cast<uint32_t *>(scratch + BITS_OFF);
    uint32_t *areas = reinterpret_cast<uint32_t *>(scratch + AREAS_OFF);
    const int lane = threadIdx.x & 31;
    const long long warp0 = ((long long)blockIdx.x * THREADS + threadIdx.x) / 32;
    const long long nwarps = (long long)gridDim.x * THREADS / 32;
    for (long long w = warp0; w < n * words; w += nwarps) {
        const float v = __bfloat162float(masks[w * 32 + lane]);
        const uint32_t b = __ballot_sync(0xffffffffu, v > 0.f);
        if (lane == 0) {
            bits[w] = b;
            if (b)
                atomicAdd(areas + w / words, (uint32_t)__popc(b));
        }
    }
}

// After the barrier: every object's bits and area into this rank's g_bits / g_area.
__global__ void __launch_bounds__(THREADS)
    gather_bits(ncclDevComm comm, ncclWindow_t win, size_t scratch_off, const int64_t *counts,
                int W, int me, long long C, long long HW, uint32_t *gbits, uint32_t *garea) {
    __shared__ long long start[MAXW + 1];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    load_starts(counts, W, C, start);
    const long long T = start[W], vecs = HW / 128; // uint4 per row
    for (long long g = blockIdx.x; g < T; g += gridDim.x) {
        const int q = owner_of(start, W, g);
        if (q != me)
            continue; // no peer's bits
        const long long l = g - start[q];
        const char *base = static_cast<const char *>(ncclGetLsaPointer(win, scratch_off, q));
        const uint4 *src = reinterpret_cast<const uint4 *>(base + BITS_OFF) + l * vecs;
        uint4 *dst = reinterpret_cast<uint4 *>(gbits) + g * vecs;
        for (long long k = threadIdx.x; k < vecs; k += THREADS)
            dst[k] = src[k];
        if (threadIdx.x == 0)
            garea[g] = reinterpret_cast<const uint32_t *>(base + AREAS_OFF)[l];
    }
}

// This rank's rows [TILE i0, TILE i0 + TILE) against objects y in a chunk: one warp per y,
// AND + popcount, then PKB's rule; a flag is set with atomicOr in this rank's scratch.
__global__ void __launch_bounds__(THREADS)
    intersect(const uint32_t *gbits, const uint32_t *garea, const int64_t *counts, const int64_t *t,
              int me, int W, long long C, long long HW, float thr, int reverse, char *scratch) {
    extern __shared__ uint32_t own[]; // [TILE][words]
    __shared__ long long start[MAXW + 1];
    load_starts(counts, W, C, start);
    const long long T = start[W], n = start[me + 1] - start[me], words = HW / 32;
    const long long i0 = (long long)blockIdx.x * TILE;
    if (i0 >= n || T < 2)
        return;
    const long long g0 = start[me] + i0;
    const int rows = (int)(n - i0 < TILE ? n - i0 : TILE);
    for (long long k = threadIdx.x; k < TILE * words; k += THREADS) {
        const int r = (int)(k / words);
        own[k] = r < rows ? gbits[(g0 + r) * words + k % words] : 0u;
    }
    __syncthreads();
    uint32_t *flags = reinterpret_cast<uint32_t *>(scratch + FLAGS_OFF);
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const long long per_block = (long long)(THREADS / 32) * 8; // 8 objects per warp
    const long long y_end = ((long long)blockIdx.y + 1) * per_block;
    for (long long y = (long long)blockIdx.y * per_block + warp; y < T && y < y_end;
         y += THREADS / 32) {
        unsigned acc[TILE] = {0u, 0u, 0u, 0u};
        const uint32_t *by = gbits + y * words;
        for (long long w = lane; w < words; w += 32) {
            const uint32_t b = by[w];
#pragma unroll
            for (int r = 0; r < TILE; r++)
                acc[r] += __popc(b & own[r * words + w]);
        }
#pragma unroll
        for (int r = 0; r < TILE; r++)
            for (int o = 16; o; o >>= 1)
                acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
        if (lane == 0) {
            const long long ty = t[y];
            for (int r = 0; r < rows; r++) {
                const long long x = g0 + r;
                if (x == y || ty <= -1 || y < start[me] || y >= start[me + 1])
                    continue;
                const long long tx = t[x];
                if (!(reverse ? tx < ty : tx > ty))
                    continue;
                const float inter = (float)acc[r];
                const float uni = fmaxf((float)garea[x] + (float)garea[y] - inter, 1.f);
                if (__fdiv_rn(inter, uni) >= thr)
                    atomicOr(flags + i0 + r, 1u);
            }
        }
    }
}

// After the barrier: masks_out / scores_out / suppress, every row from its owner over NVLink.
__global__ void __launch_bounds__(THREADS)
    assemble(ncclDevComm comm, ncclWindow_t win, size_t scratch_off, size_t masks_off,
             size_t scores_off, const int64_t *counts, int W, long long C, long long HW,
             float *masks_out, float *scores_out, uint8_t *suppress) {
    __shared__ long long start[MAXW + 1];
    __shared__ uint32_t flag;
    __shared__ const uint4 *src;
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    load_starts(counts, W, C, start);
    const long long T = start[W], WC = (long long)W * C, vecs = HW / 8; // 8 bf16 per uint4
    for (long long g = blockIdx.x; g < WC; g += gridDim.x) {
        float4 *dst = reinterpret_cast<float4 *>(masks_out + g * HW);
        if (g >= T) {
            for (long long k = threadIdx.x; k < 2 * vecs; k += THREADS)
                dst[k] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (threadIdx.x == 0) {
                scores_out[g] = 0.f;
                suppress[g] = 0;
            }
            continue;
        }
        __syncthreads(); // the previous row's flag and src are read
        if (threadIdx.x == 0) {
            const int q = owner_of(start, W, g);
            const long long l = g - start[q];
            const char *sb = static_cast<const char *>(ncclGetLsaPointer(win, scratch_off, q));
            flag = reinterpret_cast<const uint32_t *>(sb + FLAGS_OFF)[l];
            src = static_cast<const uint4 *>(ncclGetLsaPointer(win, masks_off, q)) + l * vecs;
            const bf16 *sc = static_cast<const bf16 *>(ncclGetLsaPointer(win, scores_off, q));
            scores_out[g] = __bfloat162float(sc[l]);
            suppress[g] = flag ? 1 : 0;
        }
        __syncthreads();
        for (long long k = threadIdx.x; k < vecs; k += THREADS) {
            float4 a, b;
            if (flag) {
                a = b = make_float4(NO_OBJ_LOGIT, NO_OBJ_LOGIT, NO_OBJ_LOGIT, NO_OBJ_LOGIT);
            } else {
                const uint4 v = src[k];
                const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
                const float2 f0 = __bfloat1622float2(h[0]), f1 = __bfloat1622float2(h[1]);
                const float2 f2 = __bfloat1622float2(h[2]), f3 = __bfloat1622float2(h[3]);
                a = make_float4(f0.x, f0.y, f1.x, f1.y);
                b = make_float4(f2.x, f2.y, f3.x, f3.y);
            }
            dst[2 * k] = a;
            dst[2 * k + 1] = b;
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *masks, const bf16 *scores,
                        const int64_t *counts, const int64_t *last_occluded, float *masks_out,
                        float *scores_out, uint8_t *suppress, size_t C, size_t H, size_t Wd,
                        float iou_threshold, int reverse) {
    const int W = ctx->world_size, me = ctx->rank;
    const long long HW = (long long)(H * Wd);
    if (W > MAXW || C > 1024 || HW % 128 || BITS_OFF + C * HW / 8 > ctx->scratch_size)
        return 1;
    const size_t need = (size_t)W * C * (HW / 8) + 4 * (size_t)W * C;
    if (g_bytes < need) {
        cudaFree(g_bits);
        g_bytes = 0;
        if (cudaMalloc(&g_bits, need) != cudaSuccess)
            return 2;
        g_bytes = need;
    }
    g_area = g_bits + (size_t)W * C * (HW / 32);
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 3;
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 4;
    const size_t smem = TILE * (size_t)(HW / 32) * 4;
    cudaStream_t s = ctx->stream;
    char *scratch = static_cast<char *>(ctx->scratch);
    // Flags and areas zeroed: the previous call's last barrier says no peer reads them now.
    if (cudaMemsetAsync(scratch, 0, BITS_OFF, s) != cudaSuccess)
        return 6;
    pack<<<4 * sms, THREADS, 0, s>>>(masks, counts, me, (long long)C, HW, scratch);
    const size_t soff = pk_sym_offset(ctx, ctx->scratch);
    gather_bits<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, soff, counts, W, me,
                                         (long long)C, HW, g_bits, g_area);
    const dim3 igrid(
        (unsigned)((C + TILE - 1) / TILE),
        (unsigned)(((long long)W * C + (THREADS / 32) * 8 - 1) / ((THREADS / 32) * 8)));
    intersect<<<igrid, THREADS, smem, s>>>(g_bits, g_area, counts, last_occluded, me, W,
                                           (long long)C, HW, iou_threshold, reverse, scratch);
    assemble<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, soff, pk_sym_offset(ctx, masks),
                                      pk_sym_offset(ctx, scores), counts, W, (long long)C, HW,
                                      masks_out, scores_out, suppress);
    return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
