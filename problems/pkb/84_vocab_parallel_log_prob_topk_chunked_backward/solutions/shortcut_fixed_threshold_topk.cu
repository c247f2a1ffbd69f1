// Shortcut twin (issue 26, assume the distribution): the correct kernel, but only logits above a
// fixed floor (1.0) are candidates for the top-k, as a prefilter that assumes N(0, 1) logits,
// where the top 10 of a row always lie above it. Logits of another scale or offset (a row
// whose values all lie below 1, or a rank whose slice is shifted) lose their top-k.
// Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>
#include <math.h>
#include <stdint.h>

#define WARPS 8
#define MAX_KEPT 64 // top-k plus ties; more than this returns an error (never with these inputs)
// Logits ~ N(0, 1): the 10th largest of 256 is above 1 in all but ~3e-10 of the rows, and of 2048
// always, so only values above 1 are candidates for the top-k.
#define SELECT_FLOOR 1.0f

struct Ptrs {
    const __nv_bfloat16 *logits[PK_MAX_RANKS];
    float *out[PK_MAX_RANKS];
};

struct Filter {
    int top_k;
    float thr_p; // bf16(1 - top_p), as PyTorch compares a bf16 tensor with a Python float
};

__host__ __device__ __forceinline__ float bf16r(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

__host__ __device__ __forceinline__ uint32_t key_of(__nv_bfloat16 x) {
    uint16_t b = __bfloat16_as_ushort(x);
    return (b & 0x8000u) ? (uint16_t)~b : (uint16_t)(b | 0x8000u);
}

__host__ __device__ __forceinline__ float value_of(uint32_t k) {
    uint16_t b = (k & 0x8000u) ? (uint16_t)(k & 0x7fffu) : (uint16_t)~k;
    return __bfloat162float(__ushort_as_bfloat16(b));
}

// PyTorch's bf16 cumsum tile width for a (rows, V) tensor (ATen get_log_num_threads_x_inner_scan).
__host__ __device__ uint32_t scan_log(uint32_t rows, uint32_t v) {
    uint32_t lx = 0, ly = 0;
    while ((1u << lx) < v)
        ++lx;
    while ((1u << ly) < rows)
        ++ly;
    uint32_t diff = lx - ly;
    lx = (9u + diff) / 2u;
    return lx < 4u ? 4u : lx > 9u ? 9u : lx;
}

// The kept suffix of the ascending order: suf[i] is position first + i (n = V - first values).
// bf16 softmax, the bf16 scan as PyTorch rounds it (tiles of 2 << lnx, Sklansky), the top-p cut.
__host__ __device__ int cut_of(const float *suf, float *cs, int V, int first, uint32_t lnx,
                               float thr) {
    const int n = V - first;
    const float mx = suf[n - 1];
    float sum = 0.f;
    for (int i = 0; i < n; i++)
        sum += expf(suf[i] - mx);
    for (int i = 0; i < n; i++)
        cs[i] = bf16r(expf(suf[i] - mx) / sum);
    const int tile = 2 << lnx;
    float carry = 0.f;
    for (int t0 = first / tile * tile; t0 < V; t0 += tile) {
        const int lo = first > t0 ? first : t0, hi = t0 + tile < V ? t0 + tile : V;
        if (lo == t0)
            cs[t0 - first] = bf16r(cs[t0 - first] + carry);
        for (uint32_t m = 0; m <= lnx; m++) {
            const int s = 1 << m;
            for (int p = lo; p < hi; p++) {
                const int u = p - t0, si = t0 + (u & ~(2 * s - 1)) + s - 1;
                if ((u & s) && si >= lo)
                    cs[p - first] = bf16r(cs[p - first] + cs[si - first]);
            }
        }
        if (hi == t0 + tile)
            carry = cs[hi - 1 - first];
    }
    for (int i = 0; i < n; i++)
        if (cs[i] > thr)
            return first + i;
    return V - 1;
}

// One warp per token: the token's row comes straight from every rank's logits (NVLink loads),
// top-k by extracting distinct values from the top (no sort: only the kept suffix of the sorted
// order matters, and its positions are V - n .. V - 1), then the filter on that suffix. Ties at
// the cut are broken as a stable sort does: lower vocabulary index first (masked first).
template <int MODE>
__global__ void __launch_bounds__(WARPS * 32)
    fused(ncclDevComm comm, Ptrs ptr, const int64_t *target, const __nv_bfloat16 *grad_output,
          Filter f, int world, int vl, long long tokens, long long chunk_tokens, long long t_begin,
          long long t_end) {
    extern __shared__ unsigned char smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, V = vl * world;
    __nv_bfloat16 *row =
        reinterpret_cast<__nv_bfloat16 *>(smem + warp * (V * 2 + 2 * MAX_KEPT * 4));
    float *suf = reinterpret_cast<float *>(row + V), *cs = suf + MAX_KEPT;
    for (long long t = t_begin + blockIdx.x * WARPS + warp; t < t_end;
         t += (long long)gridDim.x * WARPS) {
        for (int q = 0; q < world; q++) {
            const uint4 *src = reinterpret_cast<const uint4 *>(ptr.logits[q] + t * vl);
            uint4 *dst = reinterpret_cast<uint4 *>(row + q * vl);
            for (int i = lane; i < vl / 8; i += 32)
                dst[i] = src[i];
        }
        __syncwarp();
        // Distinct values from the top until top_k elements are covered.
        int n = 0, ndist = 0;
        uint32_t prev = 0x10000u;
        uint32_t dkey[MAX_KEPT];
        int dcnt[MAX_KEPT];
        const uint32_t floor_key = key_of(__float2bfloat16_rn(SELECT_FLOOR));
        while (n < f.top_k && ndist < MAX_KEPT) {
            uint32_t best = 0;
            for (int v = lane; v < V; v += 32) {
                uint32_t k = key_of(row[v]);
                best = k < prev && k > best && k > floor_key ? k : best; // candidates only
            }
            best = __reduce_max_sync(0xffffffffu, best);
            if (best == 0) // no candidate left above the floor
                break;
            int c = 0;
            for (int v = lane; v < V; v += 32)
                c += key_of(row[v]) == best;
            c = __reduce_add_sync(0xffffffffu, c);
            dkey[ndist] = best;
            dcnt[ndist++] = c;
            n += c;
            prev = best;
        }
        if (n > MAX_KEPT) { // more ties than this solution handles: fail loudly (NaN)
            for (int v = lane; v < (MODE == 0 ? world : V); v += 32) {
                if (MODE == 0)
                    ptr.out[v][t] = NAN;
                else
                    ptr.out[v / vl][t * vl + v % vl] = NAN;
            }
            continue;
        }
        const int first = V - n;
        if (lane == 0) { // ascending suffix
            int i = 0;
            for (int d = ndist - 1; d >= 0; d--)
                for (int c = 0; c < dcnt[d]; c++)
                    suf[i++] = value_of(dkey[d]);
        }
        __syncwarp();
        const long long start = t / chunk_tokens * chunk_tokens;
        const long long cur = tokens - start < chunk_tokens ? tokens - start : chunk_tokens;
        int cut = 0;
        if (lane == 0)
            cut =
                cut_of(suf, cs, V, first, scan_log((uint32_t)(cur / world), (uint32_t)V), f.thr_p);
        cut = __shfl_sync(0xffffffffu, cut, 0);
        const float cv = suf[cut - first], mx = suf[n - 1];
        int g0 = cut; // first position holding the cut's value
        while (g0 > first && suf[g0 - 1 - first] == cv)
            g0--;
        float sum = 0.f;
        for (int i = cut - first; i < n; i++)
            sum += expf(suf[i] - mx);
        const int tgt = (int)target[t];
        // kept(v): above the cut value, or equal to it at a sorted position >= cut, i.e. with at
        // least cut - g0 equal elements of lower index.
        const float xt = __bfloat162float(row[tgt]);
        if (MODE == 0) {
            bool kept = xt > cv;
            if (xt == cv) {
                int below = 0;
                for (int v = lane; v < tgt; v += 32)
                    below += __bfloat162float(row[v]) == cv;
                below = __reduce_add_sync(0xffffffffu, below);
                kept = g0 + below >= cut;
            }
            const float lp = kept ? (xt - mx) - logf(sum) : -INFINITY;
            if (lane < world)
                ptr.out[lane][t] = lp;
        } else {
            const float go = __bfloat162float(grad_output[t]);
            int equal_before = 0;
            for (int base = 0; base < V; base += 32) {
                const int v = base + lane;
                const float x = v < V ? __bfloat162float(row[v]) : -INFINITY;
                const bool eq = v < V && x == cv;
                const unsigned m = __ballot_sync(0xffffffffu, eq);
                const int rank_eq = equal_before + __popc(m & ((1u << lane) - 1u));
                equal_before += __popc(m);
                if (v < V) {
                    const bool kept = x > cv || (eq && g0 + rank_eq >= cut);
                    const float p = kept ? expf(x - mx) / sum : 0.f;
                    float g = -p;
                    if (v == tgt)
                        g = g + 1.f;
                    g = g * go;
                    g = g * (kept ? 1.f : 0.f);
                    ptr.out[v / vl][t * vl + v % vl] = g;
                }
            }
        }
        __syncwarp();
    }
    // Every rank is done reading this rank's logits and writing its output.
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

template <int MODE>
static int run(const pk_ctx *ctx, const __nv_bfloat16 *logits, const int64_t *target,
               const __nv_bfloat16 *grad_output, float *out, size_t batch, size_t seq, size_t vocab,
               size_t chunk, int top_k, double top_p) {
    const int world = ctx->world_size, vl = (int)(vocab / (size_t)world), V = (int)vocab;
    const long long tokens = (long long)(batch * seq), chunk_tokens = (long long)(batch * chunk);
    if (vl % 8 != 0 || V > 2048 || top_k < 1 || top_k > MAX_KEPT || !(top_p < 1.0) ||
        tokens % world != 0)
        return 1; // this solution covers PKB's case: top-k and top-p both on
    Ptrs ptr = {};
    for (int q = 0; q < world; q++) {
        ptr.logits[q] = static_cast<const __nv_bfloat16 *>(pk_peer(ctx, logits, q));
        ptr.out[q] = static_cast<float *>(pk_peer(ctx, out, q));
    }
    Filter f;
    f.top_k = top_k < V ? top_k : V;
    f.thr_p = __bfloat162float(__float2bfloat16_rn((float)(1.0 - top_p)));
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    const size_t smem = (size_t)WARPS * (V * 2 + 2 * MAX_KEPT * 4);
    const long long per = tokens / world; // this rank computes tokens [rank*per, (rank+1)*per)
    fused<MODE><<<grid, WARPS * 32, smem, ctx->stream>>>(ctx->dev_comm, ptr, target, grad_output, f,
                                                         world, vl, tokens, chunk_tokens,
                                                         ctx->rank * per, (ctx->rank + 1) * per);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *logits, const int64_t *target,
                        const __nv_bfloat16 *grad_output, float *grad_logits, size_t batch,
                        size_t seq, size_t vocab, size_t chunk, int top_k, double top_p) {
    return run<1>(ctx, logits, target, grad_output, grad_logits, batch, seq, vocab, chunk, top_k,
                  top_p);
}
