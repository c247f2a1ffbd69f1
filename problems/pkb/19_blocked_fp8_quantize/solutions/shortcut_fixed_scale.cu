// Shortcut twin (issue 26, assume the distribution): the correct kernel, but every block's scale
// is fixed at 4/448 instead of its amax/448: the amax of 128 N(0, 1) values is below 4 in all but
// ~1% of blocks (the codes saturate there), so the max-reduction goes away. The scales (rtol
// 1e-6) and most codes differ from the reference's. Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>
#include <cuda_fp8.h>

#define THREADS 1024

__device__ __forceinline__ float div_full(float a, float b) {
    float r;
    asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

struct Dest {
    uint4 *y[PK_MAX_RANKS]; // this rank's rows of y, as mapped on each rank
    float *s[PK_MAX_RANKS];
};

// The barrier before: every peer has entered this call, so its y and s may be written. The
// barrier after: every peer is done writing ours, so the harness may read them when our stream
// passes this kernel.
__global__ void __launch_bounds__(THREADS)
    quantize_scatter(ncclDevComm comm, const uint4 *x, Dest d, int world, size_t nblocks) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const size_t groups = nblocks * 8; // 8 threads of 16 elements per block
    // Whole warps iterate together (g0 is warp-uniform), so the shuffles below always see all
    // 32 lanes; a lane past the end computes on zeros and stores nothing.
    for (size_t g0 = ((size_t)blockIdx.x * THREADS + threadIdx.x) & ~(size_t)31; g0 < groups;
         g0 += (size_t)gridDim.x * THREADS) {
        const size_t g = g0 + threadIdx.x % 32;
        const bool valid = g < groups;
        const uint4 zero = make_uint4(0, 0, 0, 0);
        const uint4 a = valid ? x[2 * g] : zero, b = valid ? x[2 * g + 1] : zero;
        float v[16];
        const __nv_bfloat162 *ha = reinterpret_cast<const __nv_bfloat162 *>(&a);
        const __nv_bfloat162 *hb = reinterpret_cast<const __nv_bfloat162 *>(&b);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 fa = __bfloat1622float2(ha[k]), fb = __bfloat1622float2(hb[k]);
            v[2 * k] = fa.x;
            v[2 * k + 1] = fa.y;
            v[8 + 2 * k] = fb.x;
            v[8 + 2 * k + 1] = fb.y;
        }
        const float sc = div_full(4.0f, 448.0f); // amax of N(0, 1) blocks, assumed
        const float safe = sc == 0.0f ? 1.0f : sc;
        uint4 out;
        uint32_t *w = reinterpret_cast<uint32_t *>(&out);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
                make_float2(div_full(v[4 * k], safe), div_full(v[4 * k + 1], safe)), __NV_SATFINITE,
                __NV_E4M3);
            const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
                make_float2(div_full(v[4 * k + 2], safe), div_full(v[4 * k + 3], safe)),
                __NV_SATFINITE, __NV_E4M3);
            w[k] = (uint32_t)lo | ((uint32_t)hi << 16);
        }
        if (valid) {
#pragma unroll
            for (int q = 0; q < PK_MAX_RANKS; q++) {
                if (q >= world)
                    break;
                d.y[q][g] = out;
                if ((g & 7) == 0)
                    d.s[q][g / 8] = sc;
            }
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_fp8_e4m3 *y, float *s,
                        size_t M, size_t N) {
    const size_t chunk = M * N, nblocks = chunk / 128, r = (size_t)ctx->rank;
    if (N % 128 != 0 || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits on its namesakes on the peers: all must be resident, one barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 2;
    Dest d = {};
    for (int q = 0; q < ctx->world_size; q++) {
        d.y[q] = static_cast<uint4 *>(pk_peer(ctx, y + r * chunk, q));
        d.s[q] = static_cast<float *>(pk_peer(ctx, s + r * nblocks, q));
    }
    quantize_scatter<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, reinterpret_cast<const uint4 *>(x), d, ctx->world_size, nblocks);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
