// Subtly wrong: the correct kernel, but the search for the second expert forgets to skip the
// first one, so every token counts its top-1 expert in both slots. With PKB's own inputs
// (every expert equally likely) the loss stays 2 +- 1e-3 and the bug is invisible; with the
// per-rank expert biases of generate() (trial 1 on) it moves the loss by >= 2.4 % (host
// simulation). Expected: incorrect by trial 1; trial 0 may already fail, when its secret input
// regime (issue #26: ramps over the experts, dominant logits) makes the experts unequal.
#include "pk_ctx.h"

#include <cuda/atomic>

#define E 8
#define THREADS 512
#define UNROLL 4
#define STATS (3 * E) // slot-0 counts, slot-1 counts, probability sums

static unsigned g_calls; // same sequence on every rank: picks the exchange buffer's half

// Scratch layout (floats): [0] arrival counter (as unsigned), [1, 1 + 2 * PK_MAX_RANKS) two
// exchange halves, then the block partials [blocks][STATS].
#define SLOT_COUNTER 0
#define SLOT_EXCHANGE 1
#define SLOT_PARTIALS (1 + 2 * PK_MAX_RANKS)

struct Exchange {
    float *peer[PK_MAX_RANKS]; // this call's exchange half on every rank, as mapped here
};

struct Factors {
    float tpe, prob, inv_world; // torch.mean's 1/M for the counts and the probabilities, 1/W
};

// One token: bf16 probabilities as PyTorch's softmax rounds them, then its top-2.
static __device__ __forceinline__ void route(const uint4 v, unsigned c0[E], unsigned c1[E],
                                             float ps[E]) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
    float x[E];
#pragma unroll
    for (int k = 0; k < E / 2; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        x[2 * k] = f.x;
        x[2 * k + 1] = f.y;
    }
    float mx = x[0];
#pragma unroll
    for (int e = 1; e < E; e++)
        mx = fmaxf(mx, x[e]);
    float ex[E];
#pragma unroll
    for (int e = 0; e < E; e++)
        ex[e] = expf(x[e] - mx);
    const float s = ((ex[0] + ex[4]) + (ex[2] + ex[6])) + ((ex[1] + ex[5]) + (ex[3] + ex[7]));
    float p[E];
#pragma unroll
    for (int e = 0; e < E; e++)
        p[e] = __bfloat162float(__float2bfloat16_rn(__fdiv_rn(ex[e], s)));
    int a = 0;
#pragma unroll
    for (int e = 1; e < E; e++)
        a = p[e] > p[a] ? e : a;
    int b = a == 0 ? 1 : 0;
#pragma unroll
    for (int e = 0; e < E; e++)
        b = p[e] > p[b] ? e : b; // should skip e == a
#pragma unroll
    for (int e = 0; e < E; e++) {
        c0[e] += e == a;
        c1[e] += e == b;
        ps[e] += p[e];
    }
}

__global__ void __launch_bounds__(THREADS)
    fused(ncclDevComm comm, const uint4 *x, size_t M, float *scratch, Exchange ex,
          const float *mine, int rank, int world, Factors fac, float *loss) {
    unsigned c0[E] = {}, c1[E] = {};
    float ps[E] = {};
    const size_t stride = (size_t)gridDim.x * THREADS;
    size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < M; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            v[u] = __ldcs(&x[i + u * stride]); // streamed: read once
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            route(v[u], c0, c1, ps);
    }
    for (; i < M; i += stride)
        route(__ldcs(&x[i]), c0, c1, ps);

    // CTA partials: every warp reduces its 24 values, then one thread per value adds the warps.
    __shared__ float warp_part[THREADS / 32][STATS];
    __shared__ float total[STATS];
    __shared__ bool last;
    __shared__ float local_loss;
    float vals[STATS];
#pragma unroll
    for (int e = 0; e < E; e++) {
        vals[e] = (float)c0[e]; // at most M / (blocks * THREADS) + 1: exact
        vals[E + e] = (float)c1[e];
        vals[2 * E + e] = ps[e];
    }
#pragma unroll
    for (int j = 0; j < STATS; j++) {
        float v = vals[j];
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, off);
        if (threadIdx.x % 32 == 0)
            warp_part[threadIdx.x / 32][j] = v;
    }
    __syncthreads();
    float *partials = scratch + SLOT_PARTIALS;
    if (threadIdx.x < STATS) {
        float s = 0.f;
        for (int w = 0; w < THREADS / 32; w++)
            s += warp_part[w][threadIdx.x];
        partials[(size_t)blockIdx.x * STATS + threadIdx.x] = s;
        __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned *counter = reinterpret_cast<unsigned *>(scratch + SLOT_COUNTER);
        last = atomicAdd(counter, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    // The last CTA: every partial is visible (each was fenced before its CTA's arrival).
    __threadfence();
    if (threadIdx.x < STATS) {
        const int j = threadIdx.x;
        if (j < 2 * E) { // counts: exact integers, added in double
            double c = 0.0;
            for (unsigned b = 0; b < gridDim.x; b++)
                c += __ldcg(&partials[(size_t)b * STATS + j]);
            total[j] = (float)c; // <= 2^24: exact
        } else {
            float s = 0.f;
            for (unsigned b = 0; b < gridDim.x; b++)
                s += __ldcg(&partials[(size_t)b * STATS + j]);
            total[j] = s;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float acc = 0.f;
        for (int k = 0; k < 2; k++)
            for (int e = 0; e < E; e++) {
                const float pbar =
                    __bfloat162float(__float2bfloat16_rn(total[2 * E + e] * fac.prob));
                acc += (total[k * E + e] * fac.tpe) * pbar;
            }
        local_loss = acc * (float)E;
    }
    __syncthreads();
    if (threadIdx.x < world)
        ex.peer[threadIdx.x][rank] = local_loss;
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        float sum = 0.f;
        for (int q = 0; q < world; q++)
            sum += *(const volatile float *)&mine[q];
        *loss = sum * fac.inv_world;
        *reinterpret_cast<unsigned *>(scratch + SLOT_COUNTER) = 0; // ready for the next call
    }
}

extern "C" int solution_init(const pk_ctx *ctx) {
    // The arrival counter starts at zero; each call's last CTA resets it.
    return cudaMemset(ctx->scratch, 0, sizeof(float)) == cudaSuccess &&
                   cudaDeviceSynchronize() == cudaSuccess
               ? 0
               : 1;
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *gate_logits, float *loss, size_t M,
                        int num_experts, int top_k) {
    const int world = ctx->world_size;
    int sms = 0;
    if (num_experts != E || top_k != 2 || M == 0 || ctx->lsa_barrier_count < 1 ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 1;
    const unsigned blocks = 2 * (unsigned)sms;
    if ((SLOT_PARTIALS + (size_t)blocks * STATS) * sizeof(float) > ctx->scratch_size)
        return 2;
    float *scratch = static_cast<float *>(ctx->scratch);
    const float *mine = scratch + SLOT_EXCHANGE + (g_calls++ & 1u) * PK_MAX_RANKS;
    Exchange ex = {};
    for (int q = 0; q < world; q++)
        ex.peer[q] = static_cast<float *>(pk_peer(ctx, mine, q));
    Factors fac;
    fac.tpe = (float)(2 * E) / (float)(2 * E * M); // torch.mean's factor, as PyTorch rounds it
    fac.prob = (float)E / (float)(E * M);
    fac.inv_world = (float)(1.0 / (double)world);
    fused<<<blocks, THREADS, 0, ctx->stream>>>(ctx->dev_comm,
                                               reinterpret_cast<const uint4 *>(gate_logits), M,
                                               scratch, ex, mine, ctx->rank, world, fac, loss);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
