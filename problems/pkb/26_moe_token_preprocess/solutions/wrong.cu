// Deliberately wrong (test data): tokens_per_local_expert is written transposed, El x W
// ([l][s]) instead of PKB's W x El ([s][l]): the layout a kernel gets when it loops over its
// experts outside and the ranks inside. The splits and the sums are right. It would pass only
// where every count a rank's experts get is the same (never with these routings). Otherwise
// as correct.cu; the verdict must be `incorrect`.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 256
#define CHUNKS 132
#define MAX_E 64

static unsigned g_calls; // the same sequence on every rank: picks the exchange buffer's half

// Scratch layout (floats): [0] arrival counter (as unsigned), [1, 1 + 2 * EXCH) two exchange
// halves of [PK_MAX_RANKS][MAX_E], then the partial counts [E][CHUNKS].
#define EXCH (PK_MAX_RANKS * MAX_E)
#define SLOT_EXCHANGE 1
#define SLOT_PARTIALS (1 + 2 * EXCH)

struct Peers {
    float *ex[PK_MAX_RANKS]; // this call's exchange half on every rank, as mapped here
};

__global__ void __launch_bounds__(THREADS)
    fused(ncclDevComm comm, const float4 *mask, size_t row_vecs, float *scratch, Peers peers,
          const float *mine, int E, int rank, int world, int64_t *input_splits,
          int64_t *output_splits, float *per_local, float *sum_local) {
    const int e = blockIdx.y;
    const float4 *row = mask + (size_t)e * row_vecs;
    float s = 0.f; // an integer below 2^24: exact
    const size_t stride = (size_t)gridDim.x * THREADS;
    size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x;
    for (; i + 3 * stride < row_vecs; i += 4 * stride) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++)
            v[u] = __ldcs(&row[i + u * stride]); // streamed: read once
#pragma unroll
        for (int u = 0; u < 4; u++)
            s += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < row_vecs; i += stride) {
        const float4 v = __ldcs(&row[i]);
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    __shared__ float warp_sums[THREADS / 32];
    __shared__ float counts[MAX_E];
    __shared__ bool last;
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    float *partials = scratch + SLOT_PARTIALS;
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < THREADS / 32; w++)
            t += warp_sums[w];
        partials[(size_t)e * gridDim.x + blockIdx.x] = t;
        __threadfence();
        unsigned *counter = reinterpret_cast<unsigned *>(scratch);
        last = atomicAdd(counter, 1u) == gridDim.x * gridDim.y - 1;
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence(); // every partial was fenced before its CTA arrived
    if (threadIdx.x < E) {
        float c = 0.f;
        for (unsigned b = 0; b < gridDim.x; b++)
            c += __ldcg(&partials[(size_t)threadIdx.x * gridDim.x + b]);
        counts[threadIdx.x] = c;
    }
    __syncthreads();
    const int el = E / world;
    if (threadIdx.x < E) { // expert t belongs to rank t / el, as its local expert t % el
        const int t = threadIdx.x;
        peers.ex[t / el][rank * MAX_E + t % el] = counts[t];
    }
    if (threadIdx.x < world) {
        float in = 0.f;
        for (int l = 0; l < el; l++)
            in += counts[threadIdx.x * el + l];
        input_splits[threadIdx.x] = (int64_t)in;
    }
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < world) {
        const int q = threadIdx.x;
        float out = 0.f;
        for (int l = 0; l < el; l++) {
            const float c = *(const volatile float *)&mine[q * MAX_E + l];
            per_local[l * world + q] = c; // BUG: El x W, not W x El
            out += c;
        }
        output_splits[q] = (int64_t)out;
    }
    if (threadIdx.x < el) {
        float sum = 0.f;
        for (int q = 0; q < world; q++)
            sum += *(const volatile float *)&mine[q * MAX_E + threadIdx.x];
        sum_local[threadIdx.x] = sum;
    }
    if (threadIdx.x == 0)
        *reinterpret_cast<unsigned *>(scratch) = 0; // ready for the next call
}

extern "C" int solution_init(const pk_ctx *ctx) {
    // The arrival counter starts at zero; each call's last CTA resets it.
    return cudaMemset(ctx->scratch, 0, sizeof(float)) == cudaSuccess &&
                   cudaDeviceSynchronize() == cudaSuccess
               ? 0
               : 1;
}

extern "C" int solution(const pk_ctx *ctx, const float *expert_mask, int64_t *input_splits,
                        int64_t *output_splits, float *tokens_per_local_expert,
                        float *sum_per_local_expert, size_t M, int num_experts, int top_k) {
    const int world = ctx->world_size, E = num_experts;
    if (E > MAX_E || E % world != 0 || ((size_t)top_k * M) % 4 != 0 || ctx->lsa_barrier_count < 1)
        return 1;
    if ((SLOT_PARTIALS + (size_t)E * CHUNKS) * sizeof(float) > ctx->scratch_size)
        return 2;
    float *scratch = static_cast<float *>(ctx->scratch);
    const float *mine = scratch + SLOT_EXCHANGE + (g_calls++ & 1u) * EXCH;
    Peers peers = {};
    for (int q = 0; q < world; q++)
        peers.ex[q] = static_cast<float *>(pk_peer(ctx, mine, q));
    fused<<<dim3(CHUNKS, E), THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, reinterpret_cast<const float4 *>(expert_mask), (size_t)top_k * M / 4,
        scratch, peers, mine, E, ctx->rank, world, input_splits, output_splits,
        tokens_per_local_expert, sum_per_local_expert);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
