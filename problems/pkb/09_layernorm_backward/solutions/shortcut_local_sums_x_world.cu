// Shortcut twin (issue 26, skip the exchange): the correct kernels, but no exchange: each rank
// takes its own column sums times W for the sums over all ranks (no NVLink stores, no barrier).
// The ranks' rows are independent, so this misses by about the size of the sums themselves on
// any input: a check of the class that is expected to hold already. Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 256
#define LANES 64                    // 16-byte column groups per CTA: 512 columns
#define ROW_LANES (THREADS / LANES) // rows read side by side by one CTA
#define UNROLL 4

static unsigned g_calls; // same sequence on every rank: picks the exchange buffer's half

__device__ __forceinline__ float bf16_round(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ void accumulate(float sb[8], float sg[8], uint4 d, uint4 x) {
    const __nv_bfloat162 *dh = reinterpret_cast<const __nv_bfloat162 *>(&d);
    const __nv_bfloat162 *xh = reinterpret_cast<const __nv_bfloat162 *>(&x);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 df = __bfloat1622float2(dh[k]), xf = __bfloat1622float2(xh[k]);
        sb[2 * k] += df.x;
        sb[2 * k + 1] += df.y;
        sg[2 * k] += bf16_round(df.x * xf.x); // PyTorch rounds the product before the sum
        sg[2 * k + 1] += bf16_round(df.y * xf.y);
    }
}

// Grid (N / 512 column tiles, slabs). Thread (lane, row lane) sums 8 columns over every
// ROW_LANES-th row of its slab; the row lanes are then added through shared memory.
__global__ void __launch_bounds__(THREADS)
    column_partials(const uint4 *x_hat, const uint4 *dy, float *partials, size_t M, size_t N,
                    size_t rows_per_slab) {
    const size_t vpr = N / 8; // 16-byte vectors per row
    const int lane = threadIdx.x % LANES, row_lane = threadIdx.x / LANES;
    const size_t v = (size_t)blockIdx.x * LANES + lane;
    const size_t r0 = (size_t)blockIdx.y * rows_per_slab;
    const size_t r1 = r0 + rows_per_slab < M ? r0 + rows_per_slab : M;
    float sb[8] = {}, sg[8] = {};
    if (v < vpr) {
        size_t r = r0 + row_lane;
        for (; r + (UNROLL - 1) * ROW_LANES < r1; r += UNROLL * ROW_LANES) {
            uint4 d[UNROLL], x[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                d[u] = dy[(r + u * ROW_LANES) * vpr + v];
                x[u] = x_hat[(r + u * ROW_LANES) * vpr + v];
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                accumulate(sb, sg, d[u], x[u]);
        }
        for (; r < r1; r += ROW_LANES)
            accumulate(sb, sg, dy[r * vpr + v], x_hat[r * vpr + v]);
    }
    __shared__ float red[ROW_LANES - 1][LANES][17]; // padded against bank conflicts
    if (row_lane > 0)
        for (int k = 0; k < 8; k++) {
            red[row_lane - 1][lane][k] = sb[k];
            red[row_lane - 1][lane][8 + k] = sg[k];
        }
    __syncthreads();
    if (row_lane > 0 || v >= vpr)
        return;
    for (int l = 0; l < ROW_LANES - 1; l++)
        for (int k = 0; k < 8; k++) {
            sb[k] += red[l][lane][k];
            sg[k] += red[l][lane][8 + k];
        }
    float4 *out = reinterpret_cast<float4 *>(partials + (size_t)blockIdx.y * 2 * N + 8 * v);
    float4 *out_g = reinterpret_cast<float4 *>(partials + (size_t)blockIdx.y * 2 * N + N + 8 * v);
    out[0] = make_float4(sb[0], sb[1], sb[2], sb[3]);
    out[1] = make_float4(sb[4], sb[5], sb[6], sb[7]);
    out_g[0] = make_float4(sg[0], sg[1], sg[2], sg[3]);
    out_g[1] = make_float4(sg[4], sg[5], sg[6], sg[7]);
}

struct Exchange {
    float *peer[PK_MAX_RANKS]; // this call's exchange half on each rank, as mapped here
};

// Every CTA: its share of the 2N sums, pushed to slot [rank] of every rank's exchange half;
// the LSA barrier (same CTA index on every rank) makes them visible; then the W slots are
// added in rank order, so every rank stores identical bits. The exchange alternates halves
// from call to call: a peer still reading this half cannot be overtaken, because no rank
// writes this half again before every rank has passed the next call's barrier.
__global__ void __launch_bounds__(THREADS)
    exchange_sums(ncclDevComm comm, const float *partials, int slabs, Exchange ex,
                  const float *mine, int rank, int world, __nv_bfloat16 *d_gamma,
                  __nv_bfloat16 *d_beta, size_t N) {
    (void)comm;
    (void)ex;
    (void)mine;
    (void)rank;
    const size_t n2 = 2 * N, stride = (size_t)gridDim.x * THREADS;
    for (size_t j = (size_t)blockIdx.x * THREADS + threadIdx.x; j < n2; j += stride) {
        float s = 0.f;
        for (int k = 0; k < slabs; k++)
            s += partials[(size_t)k * n2 + j];
        s *= (float)world; // this rank's rows stand for every rank's
        if (j < N)
            d_beta[j] = __float2bfloat16_rn(s);
        else
            d_gamma[j - N] = __float2bfloat16_rn(s);
    }
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x_hat, const __nv_bfloat16 *dy,
                        __nv_bfloat16 *d_gamma, __nv_bfloat16 *d_beta, size_t M, size_t N) {
    const int world = ctx->world_size;
    if (N % 8 != 0 || M == 0 || ((uintptr_t)x_hat | (uintptr_t)dy) % 16 != 0)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    const size_t tiles = (N / 8 + LANES - 1) / LANES;
    size_t slabs = (8 * (size_t)sms + tiles - 1) / tiles; // about 8 CTAs per SM
    if (slabs > (M + 63) / 64)
        slabs = (M + 63) / 64;
    const size_t rows_per_slab = (M + slabs - 1) / slabs;
    slabs = (M + rows_per_slab - 1) / rows_per_slab;
    // Scratch: slab partials [slabs][2N], then two exchange halves of [world][2N] floats.
    const size_t part_floats = slabs * 2 * N, half_floats = (size_t)world * 2 * N;
    if ((part_floats + 2 * half_floats) * sizeof(float) > ctx->scratch_size)
        return 3;
    float *partials = static_cast<float *>(ctx->scratch);
    float *mine = partials + part_floats + (g_calls++ & 1u) * half_floats;
    Exchange ex = {};
    for (int q = 0; q < world; q++)
        ex.peer[q] = static_cast<float *>(pk_peer(ctx, mine, q));

    column_partials<<<dim3((unsigned)tiles, (unsigned)slabs), THREADS, 0, ctx->stream>>>(
        reinterpret_cast<const uint4 *>(x_hat), reinterpret_cast<const uint4 *>(dy), partials, M, N,
        rows_per_slab);
    // All CTAs of the exchange wait for their twins on the other ranks: they must all be
    // resident (at most one per SM) and each needs its own LSA barrier.
    size_t grid = (2 * N + THREADS - 1) / THREADS;
    if (grid > (size_t)sms)
        grid = sms;
    if (grid > (size_t)ctx->lsa_barrier_count)
        grid = ctx->lsa_barrier_count;
    if (grid < 1)
        return 4;
    exchange_sums<<<(unsigned)grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, partials, (int)slabs, ex, mine, ctx->rank, world, d_gamma, d_beta, N);
    return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
