// Wrong (subtly): as correct.cu, but chunk a's halo is read one element too far along rank
// r-1's chunk a: elements [l_{r-1} - (K-1) + 1, l_{r-1} + 1) instead of [l_{r-1} - (K-1),
// l_{r-1}), an off-by-one at the shard boundary (the element just past the upper neighbour's
// chunk, capacity or its chunk b, stands in for its last one). The first K-1 outputs of chunk
// a on every rank but rank 0 are wrong on every input.
#include "pk_ctx.h"

#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 1024
#define TILE 4096 // outputs per tile: 4 per thread, THREADS apart (no bank conflicts)
#define PER (TILE / THREADS)
#define KMAX 64

__device__ __forceinline__ long long clamp_len(long long l, long long L, long long K) {
    return l < K - 1 ? K - 1 : l > L ? L : l;
}

__global__ void __launch_bounds__(THREADS)
    conv_pull(ncclDevComm comm, ncclWindow_t win, size_t x_off, size_t len_off, const bf16 *x,
              const int64_t *len, const bf16 *w, bf16 *y, int me, int world, long long rows,
              long long C, long long L, long long K) {
    __shared__ float s[TILE + KMAX - 1];
    __shared__ float ws[KMAX];
    __shared__ const bf16 *prev_x, *next_x; // rank r-1's and r+1's x; NULL at the edges
    __shared__ long long prev_l, next_l;
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        prev_x = next_x = NULL;
        prev_l = next_l = 0;
        if (me > 0) {
            prev_x = static_cast<const bf16 *>(ncclGetLsaPointer(win, x_off, me - 1));
            prev_l = clamp_len(
                *static_cast<const int64_t *>(ncclGetLsaPointer(win, len_off, me - 1)), L, K);
        }
        if (me < world - 1) {
            next_x = static_cast<const bf16 *>(ncclGetLsaPointer(win, x_off, me + 1));
            next_l = clamp_len(
                *static_cast<const int64_t *>(ncclGetLsaPointer(win, len_off, me + 1)), L, K);
        }
    }
    __syncthreads();
    const long long l = clamp_len(*len, L, K), h = K - 1, tiles = (L + TILE - 1) / TILE;
    for (long long job = blockIdx.x; job < rows * 2 * tiles; job += gridDim.x) {
        const long long tile = job % tiles, e = job / tiles % 2, row = job / tiles / 2;
        const long long t0 = tile * TILE, c = row % C;
        const bf16 *xr = x + row * 2 * L + e * L;
        bf16 *yr = y + row * 2 * L + e * L;
        if (t0 >= l) { // beyond the chunk: zeros
            for (long long t = t0 + threadIdx.x; t < t0 + TILE && t < L; t += THREADS)
                yr[t] = __float2bfloat16(0.f);
            continue;
        }
        // The halo source for this chunk: element k of the halo is src[k]; NULL means zeros.
        const bf16 *src;
        if (e == 0)
            src = prev_x ? prev_x + row * 2 * L + prev_l - h + 1 : NULL;
        else
            src = next_x ? next_x + row * 2 * L + L + next_l - h : x + row * 2 * L + l - h;
        __syncthreads(); // the previous job's reads of s and ws are done
        for (int k = threadIdx.x; k < K; k += THREADS)
            ws[k] = __bfloat162float(w[c * K + k]);
        for (long long p = threadIdx.x; p < TILE + h; p += THREADS) {
            const long long t = t0 + p - h;
            float v = 0.f;
            if (t >= 0 && t < l)
                v = __bfloat162float(xr[t]);
            else if (t < 0 && src)
                v = __bfloat162float(src[h + t]);
            s[p] = v;
        }
        __syncthreads();
        float acc[PER];
#pragma unroll
        for (int u = 0; u < PER; u++)
            acc[u] = 0.f;
        for (int k = 0; k < K; k++) {
            const float wk = ws[k];
#pragma unroll
            for (int u = 0; u < PER; u++)
                acc[u] = fmaf(wk, s[threadIdx.x + u * THREADS + k], acc[u]);
        }
#pragma unroll
        for (int u = 0; u < PER; u++) {
            const long long t = t0 + threadIdx.x + u * THREADS;
            if (t < L)
                yr[t] = t < l ? __float2bfloat16(acc[u]) : __float2bfloat16(0.f);
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *x, const int64_t *len, const bf16 *weight,
                        bf16 *y, size_t B, size_t C, size_t L, size_t K) {
    if (K < 1 || K > KMAX)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    conv_pull<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, x),
                                                 pk_sym_offset(ctx, len), x, len, weight, y,
                                                 ctx->rank, ctx->world_size, (long long)(B * C),
                                                 (long long)C, (long long)L, (long long)K);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
