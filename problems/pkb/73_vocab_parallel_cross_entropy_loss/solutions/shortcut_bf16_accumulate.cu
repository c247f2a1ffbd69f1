// Precision twin (issue #26): correct.cu with each lane's running sum of exp rounded to bf16
// after every add, where the reference sums in fp32. A lane adds ~256 terms (V = 16384,
// W = 2): once its sum is large, terms below half its last place are lost. At PKB's own shape
// (--dims pkb: V = 512) a lane adds 8 terms, whose bf16 rounding stays within the reference's
// own bf16 error: the twin is correct there (expected.json: status_at_dims).
#include "pk_ctx.h"

#include <cuda/atomic>
#include <math.h>

#define THREADS 512
#define WARPS (THREADS / 32)

struct Peers {
    float4 *stats[PK_MAX_RANKS]; // each rank's stats half of this call, as mapped here
};

__device__ __forceinline__ void online_add(float x, float &m, float &s) {
    if (x > m) {
        s = s * __expf(m - x) + 1.f;
        m = x;
    } else {
        s += __expf(x - m);
    }
    s = __bfloat162float(__float2bfloat16_rn(s)); // the twin: the running sum kept in bf16
}

__global__ void __launch_bounds__(THREADS)
    fused_ce(ncclDevComm comm, const __nv_bfloat16 *logits, const int64_t *target,
             __nv_bfloat16 *loss, Peers peers, const float4 *mine, int rank, int world, int tokens,
             int vl) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int stride = gridDim.x * WARPS;
    for (int t = blockIdx.x * WARPS + warp; t < tokens; t += stride) {
        const uint4 *row = reinterpret_cast<const uint4 *>(logits + (size_t)t * vl);
        float m = -INFINITY, s = 0.f;
        int i = lane;
        for (; i + 96 < vl / 8; i += 128) { // four independent 16-byte loads in flight
            uint4 v[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                v[u] = row[i + 32 * u];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&v[u]);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    online_add(__bfloat162float(h[k]), m, s);
            }
        }
        for (; i < vl / 8; i += 32) {
            uint4 v = row[i];
            const __nv_bfloat16 *h = reinterpret_cast<const __nv_bfloat16 *>(&v);
#pragma unroll
            for (int k = 0; k < 8; k++)
                online_add(__bfloat162float(h[k]), m, s);
        }
        for (int o = 16; o > 0; o >>= 1) { // merge the lanes' (m, s)
            float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
            float nm = fmaxf(m, om);
            s = (m == -INFINITY ? 0.f : s * __expf(m - nm)) +
                (om == -INFINITY ? 0.f : os * __expf(om - nm));
            m = nm;
        }
        if (lane < world) {
            const long long local = (long long)target[t] - (long long)rank * vl;
            float pred =
                local >= 0 && local < vl ? __bfloat162float(logits[(size_t)t * vl + local]) : 0.f;
            peers.stats[lane][(size_t)rank * tokens + t] = make_float4(m, s, pred, 0.f);
        }
    }
    // Every rank's CTA b has stored the stats of the tokens CTA b handles.
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (int t = blockIdx.x * WARPS + warp; t < tokens; t += stride) {
        float m = -INFINITY, s = 0.f, pred = 0.f;
        if (lane < world) {
            float4 st = mine[(size_t)lane * tokens + t];
            m = st.x;
            s = st.y;
            pred = st.z;
        }
        float mx = m;
        for (int o = 16; o > 0; o >>= 1)
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float part = lane < world ? s * expf(m - mx) : 0.f;
        for (int o = 16; o > 0; o >>= 1) {
            part += __shfl_xor_sync(0xffffffffu, part, o);
            pred += __shfl_xor_sync(0xffffffffu, pred, o);
        }
        if (lane == 0)
            loss[t] = __float2bfloat16_rn(logf(part) - (pred - mx));
    }
}

static unsigned g_calls; // same count on every rank: selects the stats half

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *logits, const int64_t *target,
                        __nv_bfloat16 *loss, size_t batch, size_t seq, size_t vocab) {
    const int world = ctx->world_size;
    const size_t tokens = batch * seq, vl = vocab / (size_t)world;
    const size_t half = (size_t)world * tokens * sizeof(float4);
    if (vl % 8 != 0 || (uintptr_t)logits % 16 != 0 || 2 * half > ctx->scratch_size)
        return 1;
    float4 *mine =
        reinterpret_cast<float4 *>(static_cast<char *>(ctx->scratch) + (g_calls++ & 1u) * half);
    Peers peers = {};
    for (int q = 0; q < world; q++)
        peers.stats[q] = static_cast<float4 *>(pk_peer(ctx, mine, q));
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 2;
    fused_ce<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, logits, target, loss, peers, mine,
                                                ctx->rank, world, (int)tokens, (int)vl);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
