// Shortcut twin (issue 26, assume the distribution): the correct kernel, but every block's scale
// is fixed at 4/127 instead of its amax/127: the amax of 128 N(0, 1) values is below 4 in all
// but ~1% of blocks (the codes saturate there), so the warp's max-reduction goes away. The
// codes differ from the reference's wherever the block's amax is not 4. Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 1024
#define WARPS (THREADS / 32)
#define UNROLL 4

struct Dest {
    uint32_t *q[PK_MAX_RANKS]; // rank d's receive slot for our codes (4 codes per word)
    float *s[PK_MAX_RANKS];    // rank d's receive slot for our scales
};

// Blocks are dealt to warps by the global warp index, the same on every rank, so CTA c reads in
// step 3 only what the peers' CTA c stored in step 1: one barrier per CTA is enough. The
// barrier at the end keeps a peer's next call from overwriting our receive area before we read.
__global__ void __launch_bounds__(THREADS)
    exchange_sum(ncclDevComm comm, const uint2 *x, Dest dst, const uint32_t *rq, const float *rs,
                 uint2 *out, int world, size_t nblocks, float inv_world) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    const int lane = threadIdx.x % 32;
    const size_t warp0 = (size_t)blockIdx.x * WARPS + threadIdx.x / 32;
    const size_t nwarps = (size_t)gridDim.x * WARPS;
    const size_t words = nblocks * 32; // 32 words of 4 codes per block, per source rank

    for (size_t b0 = warp0; b0 < nblocks; b0 += nwarps * UNROLL) {
        uint2 raw[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t b = b0 + u * nwarps;
            if (b < nblocks)
                raw[u] = x[b * 32 + lane];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t b = b0 + u * nwarps; // warp-uniform
            if (b >= nblocks)
                break;
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw[u]);
            const float2 lo = __bfloat1622float2(h[0]), hi = __bfloat1622float2(h[1]);
            const float v[4] = {lo.x, lo.y, hi.x, hi.y};
            const float scale = 4.0f / 127.0f; // amax of N(0, 1) blocks, assumed
            uint32_t word = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float q = fminf(fmaxf(rintf(__fdiv_rn(v[k], scale)), -127.0f), 127.0f);
                word |= (uint32_t)(uint8_t)(int8_t)q << (8 * k);
            }
#pragma unroll
            for (int d = 0; d < PK_MAX_RANKS; d++) {
                if (d >= world)
                    break;
                dst.q[d][b * 32 + lane] = word;
                if (lane == 0)
                    dst.s[d][b] = scale;
            }
        }
    }

    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);

    for (size_t b0 = warp0; b0 < nblocks; b0 += nwarps * UNROLL) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t b = b0 + u * nwarps;
            if (b >= nblocks)
                break;
            float acc[4];
            for (int s = 0; s < world; s++) {
                const uint32_t word = rq[(size_t)s * words + b * 32 + lane];
                const float scale = rs[(size_t)s * nblocks + b];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const float d = __fmul_rn((float)(int8_t)(word >> (8 * k)), scale);
                    acc[k] = s == 0 ? d : __fadd_rn(acc[k], d);
                }
            }
            uint2 o;
            __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&o);
            h[0] =
                __floats2bfloat162_rn(__fmul_rn(acc[0], inv_world), __fmul_rn(acc[1], inv_world));
            h[1] =
                __floats2bfloat162_rn(__fmul_rn(acc[2], inv_world), __fmul_rn(acc[3], inv_world));
            out[b * 32 + lane] = o;
        }
    }

    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *flat_grad, __nv_bfloat16 *out,
                        size_t n) {
    const int world = ctx->world_size;
    const size_t nblocks = n / 128;
    // Receive area in the scratch: codes of every source rank (n bytes each), then its scales.
    const size_t code_bytes = (size_t)world * n, bytes = code_bytes + (size_t)world * nblocks * 4;
    if (n % 128 != 0 || bytes > ctx->scratch_size)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits on its namesakes on the peers: all must be resident, one barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 2;
    uint32_t *rq = static_cast<uint32_t *>(ctx->scratch);
    float *rs = reinterpret_cast<float *>(static_cast<char *>(ctx->scratch) + code_bytes);
    Dest dst = {};
    for (int d = 0; d < world; d++) {
        dst.q[d] = static_cast<uint32_t *>(pk_peer(ctx, rq + (size_t)ctx->rank * (n / 4), d));
        dst.s[d] = static_cast<float *>(pk_peer(ctx, rs + (size_t)ctx->rank * nblocks, d));
    }
    exchange_sum<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, reinterpret_cast<const uint2 *>(flat_grad), dst, rq, rs,
        reinterpret_cast<uint2 *>(out), world, nblocks, 1.0f / (float)world);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
