// Subtly wrong: the correct solution, but each rank's shard lands where a plain all-gather
// would put it (rank-major: rank r's tokens b * S + t at r * B * S + b * S + t) instead of at
// sequence position r * S + t of every batch row: right only when B = 1.
// Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512

struct Outputs {
    uint4 *q[PK_MAX_RANKS], *k[PK_MAX_RANKS]; // every rank's outputs, as mapped here
};

__device__ __forceinline__ uint4 rope8(uint4 x, uint4 partner, float sign, uint4 c, uint4 s) {
    const __nv_bfloat162 *xh = reinterpret_cast<const __nv_bfloat162 *>(&x);
    const __nv_bfloat162 *ph = reinterpret_cast<const __nv_bfloat162 *>(&partner);
    const __nv_bfloat162 *ch = reinterpret_cast<const __nv_bfloat162 *>(&c);
    const __nv_bfloat162 *sh = reinterpret_cast<const __nv_bfloat162 *>(&s);
    uint4 out;
    __nv_bfloat162 *oh = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 xf = __bfloat1622float2(xh[k]), pf = __bfloat1622float2(ph[k]);
        const float2 cf = __bfloat1622float2(ch[k]), sf = __bfloat1622float2(sh[k]);
        oh[k] = __floats2bfloat162_rn(fmaf(xf.x, cf.x, sign * pf.x * sf.x),
                                      fmaf(xf.y, cf.y, sign * pf.y * sf.y));
    }
    return out;
}

// Items: (token, 16-byte vector of the token's heads * head_dim elements), token = b * S + t.
__global__ void __launch_bounds__(THREADS)
    rope_scatter(ncclDevComm comm, const uint4 *q, const uint4 *k, const uint4 *cos_,
                 const uint4 *sin_, Outputs out, int rank, int world, size_t tokens, size_t S,
                 size_t row_vecs, size_t dim_vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const size_t n = tokens * row_vecs, stride = (size_t)gridDim.x * THREADS;
    const size_t half_vecs = dim_vecs / 2;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
        const size_t token = i / row_vecs, v = i % row_vecs, dv = v % dim_vecs;
        const bool low = dv < half_vecs; // rotate_half: -x[d + half] below half, x[d - half] above
        const size_t partner = low ? i + half_vecs : i - half_vecs;
        const uint4 c = cos_[token * dim_vecs + dv], s = sin_[token * dim_vecs + dv];
        const uint4 rq = rope8(q[i], q[partner], low ? -1.f : 1.f, c, s);
        const uint4 rk = rope8(k[i], k[partner], low ? -1.f : 1.f, c, s);
        const size_t b = token / S, t = token % S;
        const size_t dst = ((rank * (tokens / S) + b) * S + t) * row_vecs + v; // the bug
        for (int j = 0; j < world; j++) {
            const int peer = (rank + j) % world; // staggered so ranks do not all hit one peer
            out.q[peer][dst] = rq;
            out.k[peer][dst] = rk;
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *q_local,
                        const __nv_bfloat16 *k_local, const __nv_bfloat16 *cos_local,
                        const __nv_bfloat16 *sin_local, __nv_bfloat16 *q_out, __nv_bfloat16 *k_out,
                        size_t B, size_t T, size_t S, size_t heads, size_t head_dim) {
    const int world = ctx->world_size;
    if (head_dim % 16 != 0 || S * (size_t)world != T ||
        ((uintptr_t)q_local | (uintptr_t)k_local | (uintptr_t)cos_local | (uintptr_t)sin_local |
         (uintptr_t)q_out | (uintptr_t)k_out) %
                16 !=
            0)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    Outputs out = {};
    for (int p = 0; p < world; p++) {
        out.q[p] = static_cast<uint4 *>(pk_peer(ctx, q_out, p));
        out.k[p] = static_cast<uint4 *>(pk_peer(ctx, k_out, p));
    }
    rope_scatter<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, reinterpret_cast<const uint4 *>(q_local),
        reinterpret_cast<const uint4 *>(k_local), reinterpret_cast<const uint4 *>(cos_local),
        reinterpret_cast<const uint4 *>(sin_local), out, ctx->rank, world, B * S, S,
        heads * head_dim / 8, head_dim / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
