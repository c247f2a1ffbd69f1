// pkb/26_moe_token_preprocess (ParallelKernelBench problem 26): the split sizes of an MoE
// expert-parallel all-to-all. Each rank holds the one-hot routing of its M tokens,
// expert_mask[e][k][m] (E x K x M fp32, 1 where token m's slot-k expert is e); rank g owns
// experts [g * El, (g + 1) * El), El = E / W. As PyTorch computes it:
//   c[e]          = sum_{k, m} expert_mask[e][k][m]               (fp32; exact integers)
//   input_splits[g]  = sum_{l < El} c[g * El + l]                 (i64: rows sent to rank g)
//   G[s][e]       = rank s's c[e]                                 (all-gather)
//   tokens_per_local_expert[s][l] = G[s][rank * El + l]           (fp32, W x El)
//   output_splits[s] = sum_l tokens_per_local_expert[s][l]        (i64: rows received from s)
//   sum_per_local_expert[l] = sum_s tokens_per_local_expert[s][l] (fp32)
// Baseline: a column-sum kernel (fp32 atomics of per-CTA sums: every partial is an integer
// below 2^24, so the order does not matter), a host-driven NCCL all-gather of the E counts, a
// finishing kernel. No host synchronisation.
#include "pk_moe_routing.cuh"
#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const float *, int64_t *, int64_t *, float *, float *,
                        size_t, int, int);

#define THREADS 256
#define CHUNKS 132 // CTAs per expert row: E x 132 CTAs, one full wave of an H200 at E = 8

static float *g_counts; // [E] this rank's counts, then [W][E] the gathered ones

// One CTA sums a slice of expert e's K * M mask values (16-byte loads) into counts[e].
__global__ void __launch_bounds__(THREADS)
    count_kernel(const float4 *mask, size_t row_vecs, float *counts) {
    const int e = blockIdx.y;
    const float4 *row = mask + (size_t)e * row_vecs;
    float s = 0.f;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < row_vecs;
         i += (size_t)gridDim.x * THREADS) {
        const float4 v = row[i];
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, off);
    __shared__ float warp_sums[THREADS / 32];
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < THREADS / 32; w++)
            t += warp_sums[w];
        atomicAdd(&counts[e], t);
    }
}

// The splits and the local experts' counts from the local and the gathered counts.
__global__ void finish_kernel(const float *local, const float *gathered, int E, int world, int rank,
                              int64_t *input_splits, int64_t *output_splits, float *per_local,
                              float *sum_local) {
    const int el = E / world;
    const int t = threadIdx.x;
    if (t < world) {
        float in = 0.f, out = 0.f;
        for (int l = 0; l < el; l++) {
            in += local[t * el + l];
            const float c = gathered[(size_t)t * E + rank * el + l];
            out += c;
            per_local[t * el + l] = c;
        }
        input_splits[t] = (int64_t)in;
        output_splits[t] = (int64_t)out;
    }
    if (t < el) {
        float s = 0.f;
        for (int q = 0; q < world; q++)
            s += gathered[(size_t)q * E + rank * el + t];
        sum_local[t] = s;
    }
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0];
    const int E = (int)call->dims[1], K = (int)call->dims[2];
    float *local = g_counts, *gathered = g_counts + E;
    if (cudaMemsetAsync(local, 0, (size_t)E * sizeof(float), ctx->stream) != cudaSuccess)
        return 2000;
    // (K * M) % 4 == 0 (constraint): every row is whole 16-byte vectors
    count_kernel<<<dim3(CHUNKS, E), THREADS, 0, ctx->stream>>>(
        static_cast<const float4 *>(call->args[0]), (size_t)K * M / 4, local);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    const ncclResult_t r =
        ncclAllGather(local, gathered, (size_t)E, ncclFloat, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    finish_kernel<<<1, 64, 0, ctx->stream>>>(
        local, gathered, E, ctx->world_size, ctx->rank, static_cast<int64_t *>(call->args[1]),
        static_cast<int64_t *>(call->args[2]), static_cast<float *>(call->args[3]),
        static_cast<float *>(call->args[4]));
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

// generate(): the one-hot mask of this rank's routing (pk_moe_routing.cuh; mode = key % 4).
static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0];
    const int E = (int)call->dims[1], K = (int)call->dims[2];
    static PkMoeRouting r; // 2 KB: off the stack
    pk_moe_routing_make(seed, key, ctx->world_size, E, K, &r);
    pk_moe_mask_kernel<<<1024, THREADS, 0, ctx->stream>>>(static_cast<float *>(call->args[0]), M,
                                                          ctx->rank, r);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static int init(const pk_ctx *ctx) {
    return cudaMalloc(&g_counts, (size_t)(PK_MAX_RANKS + 1) * PK_MOE_MAX_E * sizeof(float)) ==
                   cudaSuccess
               ? 0
               : 2001;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    cudaFree(g_counts);
    g_counts = NULL;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 5 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const float *>(c->args[0]), static_cast<int64_t *>(c->args[1]),
        static_cast<int64_t *>(c->args[2]), static_cast<float *>(c->args[3]),
        static_cast<float *>(c->args[4]), (size_t)c->dims[0], (int)c->dims[1], (int)c->dims[2]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
