// Shortcut twin (issue 26, assume the distribution): the correct kernel, but the row's mean
// square is not measured: the mean over W ranks of N(0, 1) inputs has variance 1/W, so every row
// is normalised by rsqrt(1/W + eps) and the block reduction and its two __syncthreads go away.
// On i.i.d. N(0, 1) rows of 4096 the true rms is within ~1.1% (one sigma) of that; inputs with a
// scale per rank or per row move it by any factor. Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define VPT 2 // 16-byte vectors per thread and source: a row of `hidden` is hidden / 16 threads

struct Sources {
    const uint4 *in[PK_MAX_RANKS]; // every rank's rs_input, as mapped here
};

// One CTA on every rank meets its twins: a rank-wide barrier between kernels.
__global__ void rank_barrier(ncclDevComm comm) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

template <int W>
__global__ void __launch_bounds__(1024)
    reduce_norm(Sources src, const uint4 *gamma, uint4 *out, size_t first, size_t row_vecs,
                float inv_world, float inv_hidden, float eps) {
    const size_t row = blockIdx.x;
    float x[VPT][8] = {};
    uint4 v[W][VPT];
#pragma unroll
    for (int u = 0; u < VPT; u++) {
        const size_t c = threadIdx.x + (size_t)u * blockDim.x;
#pragma unroll
        for (int q = 0; q < W; q++) // all loads first: W * VPT in flight per thread
            v[q][u] = c < row_vecs ? src.in[q][first + row * row_vecs + c] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int q = 0; q < W; q++) // rank order, fp32
#pragma unroll
        for (int u = 0; u < VPT; u++) {
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v[q][u]);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 f = __bfloat1622float2(h[k]);
                x[u][2 * k] += f.x;
                x[u][2 * k + 1] += f.y;
            }
        }
#pragma unroll
    for (int u = 0; u < VPT; u++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            x[u][k] *= inv_world;
    (void)inv_hidden;
    const float r = rsqrtf(inv_world + eps); // E[mean of x^2] for the mean of W N(0, 1) draws
#pragma unroll
    for (int u = 0; u < VPT; u++) {
        const size_t c = threadIdx.x + (size_t)u * blockDim.x;
        if (c >= row_vecs)
            continue;
        const uint4 g = gamma[c];
        const __nv_bfloat162 *gh = reinterpret_cast<const __nv_bfloat162 *>(&g);
        uint4 o;
        __nv_bfloat162 *oh = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 gf = __bfloat1622float2(gh[k]);
            oh[k] = __floats2bfloat162_rn(x[u][2 * k] * r * gf.x, x[u][2 * k + 1] * r * gf.y);
        }
        out[row * row_vecs + c] = o;
    }
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *rs_input,
                        const __nv_bfloat16 *gamma, __nv_bfloat16 *out, size_t rows, size_t hidden,
                        float eps) {
    const int world = ctx->world_size, rank = ctx->rank;
    const size_t row_vecs = hidden / 8;
    // threads: a multiple of 32 covering the row with VPT vectors each
    const size_t threads = ((row_vecs + VPT - 1) / VPT + 31) / 32 * 32;
    if (hidden % 8 != 0 || threads > 1024 || ctx->lsa_barrier_count < 1 ||
        ((uintptr_t)rs_input | (uintptr_t)gamma | (uintptr_t)out) % 16 != 0)
        return 1;
    Sources src = {};
    for (int q = 0; q < world; q++)
        src.in[q] = static_cast<const uint4 *>(pk_peer(ctx, rs_input, q));
    rank_barrier<<<1, 32, 0, ctx->stream>>>(ctx->dev_comm); // every peer's input is ready
    const unsigned grid = (unsigned)rows, block = (unsigned)threads;
    const size_t first = (size_t)rank * rows * row_vecs; // this rank's chunk of every rs_input
    switch (world) { // the loops over ranks unroll, and the loaded rows stay in registers
    case 1:
        reduce_norm<1><<<grid, block, 0, ctx->stream>>>(
            src, reinterpret_cast<const uint4 *>(gamma), reinterpret_cast<uint4 *>(out), first,
            row_vecs, 1.0f / (float)world, 1.0f / (float)hidden, eps);
        break;
    case 2:
        reduce_norm<2><<<grid, block, 0, ctx->stream>>>(
            src, reinterpret_cast<const uint4 *>(gamma), reinterpret_cast<uint4 *>(out), first,
            row_vecs, 1.0f / (float)world, 1.0f / (float)hidden, eps);
        break;
    case 4:
        reduce_norm<4><<<grid, block, 0, ctx->stream>>>(
            src, reinterpret_cast<const uint4 *>(gamma), reinterpret_cast<uint4 *>(out), first,
            row_vecs, 1.0f / (float)world, 1.0f / (float)hidden, eps);
        break;
    case 8:
        reduce_norm<8><<<grid, block, 0, ctx->stream>>>(
            src, reinterpret_cast<const uint4 *>(gamma), reinterpret_cast<uint4 *>(out), first,
            row_vecs, 1.0f / (float)world, 1.0f / (float)hidden, eps);
        break;
    default:
        return 3;
    }
    rank_barrier<<<1, 32, 0, ctx->stream>>>(ctx->dev_comm); // no peer still reads our input
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
