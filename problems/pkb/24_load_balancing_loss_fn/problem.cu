// pkb/24_load_balancing_loss_fn (ParallelKernelBench problem 24): the MoE load-balancing loss.
// Each rank holds the router logits of its M tokens (M x E bf16, E = 8) and must return, as
// PyTorch computes it (top_k = 2, no attention mask):
//   p[i][e]  = bf16( expf(x[i][e] - max_e x[i]) / sum_e expf(x[i][e] - max_e x[i]) )
//   a_i, b_i = the experts of the largest and second largest p[i] (ties: the lower index)
//   f[k][e]  = (count of tokens whose slot-k expert is e) * (1/M)       (fp32, k = 0, 1)
//   P[e]     = bf16( (sum_i p[i][e]) * (1/M) )                          (fp32 sum)
//   loss_r   = (sum_{k,e} f[k][e] * P[e]) * E                           (fp32)
//   loss     = (sum_r loss_r) * (1/W)                                   (fp32, every rank)
// Baseline: a softmax kernel that writes the bf16 probabilities (PyTorch materializes them),
// a top-2 + statistics kernel with block partials, a finishing kernel, one host-driven fp32
// NCCL all-reduce, a scaling kernel. No host synchronisation.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, float *, size_t, int, int);

#define E 8
#define THREADS 256
#define BLOCKS 264        // 2 CTAs per SM of an H200
#define STATS (2 * E + E) // per block: slot-0 counts, slot-1 counts (as floats), prob sums
#define BIAS_RANGE 3.0    // generate(): per-(rank, expert) logit bias in (-3, 3]

static __nv_bfloat16 *g_probs; // M x E bf16 probabilities
static size_t g_probs_n;       // rows g_probs holds
static float *g_work;          // [BLOCKS][STATS] partials, then the local/global loss

struct Bias {
    float b[E];
};

// softmax of one row as PyTorch's warp softmax (8 lanes) computes it: fp32, butterfly sum.
static __device__ __forceinline__ void softmax_row(const uint4 v, float p[E]) {
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
    // shfl_xor butterfly over 8 lanes: offsets 4, 2, 1
    const float s = ((ex[0] + ex[4]) + (ex[2] + ex[6])) + ((ex[1] + ex[5]) + (ex[3] + ex[7]));
#pragma unroll
    for (int e = 0; e < E; e++)
        p[e] = __fdiv_rn(ex[e], s);
}

// Kernel A: routing_weights = softmax(gate_logits), bf16, one thread per row.
__global__ void __launch_bounds__(THREADS) softmax_kernel(const uint4 *x, uint4 *probs, size_t M) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < M;
         i += (size_t)gridDim.x * THREADS) {
        float p[E];
        softmax_row(x[i], p);
        uint4 out;
        __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
        for (int k = 0; k < E / 2; k++)
            o[k] = __floats2bfloat162_rn(p[2 * k], p[2 * k + 1]);
        probs[i] = out;
    }
}

// Sum of v over the CTA in a fixed order; the result is valid in thread 0.
static __device__ __forceinline__ float block_sum(float v, float *warp_sums) {
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    __syncthreads(); // warp_sums may still be read from the previous use
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.f;
    if (threadIdx.x == 0)
        for (int w = 0; w < THREADS / 32; w++)
            s += warp_sums[w];
    return s;
}

// Kernel B: top-2 of the bf16 probabilities, per-block slot counts and probability sums.
__global__ void __launch_bounds__(THREADS)
    stats_kernel(const uint4 *probs, float *partials, size_t M) {
    __shared__ float warp_sums[THREADS / 32];
    unsigned c0[E] = {}, c1[E] = {};
    float ps[E] = {};
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < M;
         i += (size_t)gridDim.x * THREADS) {
        const uint4 v = probs[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
        float p[E];
#pragma unroll
        for (int k = 0; k < E / 2; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            p[2 * k] = f.x;
            p[2 * k + 1] = f.y;
        }
        int a = 0;
#pragma unroll
        for (int e = 1; e < E; e++)
            a = p[e] > p[a] ? e : a;
        int b = a == 0 ? 1 : 0;
#pragma unroll
        for (int e = 0; e < E; e++)
            b = (e != a && p[e] > p[b]) ? e : b;
#pragma unroll
        for (int e = 0; e < E; e++) {
            c0[e] += e == a;
            c1[e] += e == b;
            ps[e] += p[e];
        }
    }
    // Counts per block <= M / BLOCKS + 1 < 2^24: exact as floats.
    float *out = partials + (size_t)blockIdx.x * STATS;
#pragma unroll
    for (int e = 0; e < E; e++) {
        const float s0 = block_sum((float)c0[e], warp_sums);
        const float s1 = block_sum((float)c1[e], warp_sums);
        const float sp = block_sum(ps[e], warp_sums);
        if (threadIdx.x == 0) {
            out[e] = s0;
            out[E + e] = s1;
            out[2 * E + e] = sp;
        }
    }
}

// Kernel C (one CTA): the block partials in block order, then PKB's means and the local loss.
__global__ void __launch_bounds__(THREADS)
    finish_kernel(const float *partials, int blocks, float tpe_factor, float prob_factor,
                  float *loss_local) {
    __shared__ double counts[2 * E]; // exact integers
    __shared__ float sums[E];
    if (threadIdx.x < STATS) {
        const int j = threadIdx.x;
        if (j < 2 * E) {
            double c = 0.0;
            for (int b = 0; b < blocks; b++)
                c += partials[(size_t)b * STATS + j];
            counts[j] = c;
        } else {
            float s = 0.f;
            for (int b = 0; b < blocks; b++)
                s += partials[(size_t)b * STATS + j];
            sums[j - 2 * E] = s;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float acc = 0.f;
        for (int k = 0; k < 2; k++)
            for (int e = 0; e < E; e++) {
                const float tpe = (float)counts[k * E + e] * tpe_factor; // mean of one_hot
                const float pbar = __bfloat162float(__float2bfloat16_rn(sums[e] * prob_factor));
                acc += tpe * pbar;
            }
        *loss_local = acc * (float)E; // overall_loss * num_experts
    }
}

// Kernel D: overall_loss / world_size (PyTorch: times the fp32 reciprocal of the Python int).
__global__ void scale_kernel(const float *sum, float *loss, float inv_world) {
    *loss = *sum * inv_world;
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0];
    if ((int)call->dims[1] != E || (int)call->params[0] != 2)
        return 2002;
    if (g_probs_n < M) { // first call only: an untimed correctness trial
        cudaFree(g_probs);
        g_probs = NULL;
        g_probs_n = 0;
        if (cudaMalloc(&g_probs, M * E * sizeof(__nv_bfloat16)) != cudaSuccess)
            return 2001;
        g_probs_n = M;
    }
    float *loss_sum = g_work + BLOCKS * STATS;
    const uint4 *x = static_cast<const uint4 *>(call->args[0]);
    uint4 *probs = reinterpret_cast<uint4 *>(g_probs);
    // torch.mean: sum * (float(outputs) / numel), the division in fp32
    const float tpe_factor = (float)(2 * E) / (float)(2 * E * M);
    const float prob_factor = (float)E / (float)(E * M);
    softmax_kernel<<<4 * BLOCKS, THREADS, 0, ctx->stream>>>(x, probs, M);
    stats_kernel<<<BLOCKS, THREADS, 0, ctx->stream>>>(probs, g_work, M);
    finish_kernel<<<1, 32 * ((STATS + 31) / 32), 0, ctx->stream>>>(g_work, BLOCKS, tpe_factor,
                                                                   prob_factor, loss_sum);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    const ncclResult_t r =
        ncclAllReduce(loss_sum, loss_sum, 1, ncclFloat, ncclSum, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    scale_kernel<<<1, 1, 0, ctx->stream>>>(loss_sum, static_cast<float *>(call->args[1]),
                                           (float)(1.0 / (double)ctx->world_size));
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

// generate(): adds bias.b[e] to column e of every row (fp32, rounded to bf16).
__global__ void __launch_bounds__(THREADS) bias_kernel(uint4 *x, size_t M, Bias bias) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < M;
         i += (size_t)gridDim.x * THREADS) {
        uint4 v = x[i];
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
        for (int k = 0; k < E / 2; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            h[k] = __floats2bfloat162_rn(f.x + bias.b[2 * k], f.y + bias.b[2 * k + 1]);
        }
        x[i] = v;
    }
}

// PKB's iid N(0, 1) logits make every expert equally likely and the loss 2 +- 1e-3 (meta.json
// "about"); keys with key % 4 != 0 get a per-(rank, expert) bias, the same on the whole column.
static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    if (key % 4 == 0)
        return 0;
    const pk_ctx *ctx = call->ctx;
    const size_t M = call->counts[0] / E;
    const uint64_t k =
        pk_splitmix64(seed ^ pk_splitmix64((uint64_t)(unsigned)key * 64 + (uint64_t)ctx->rank));
    Bias bias;
    for (int e = 0; e < E; e++)
        bias.b[e] = (float)(BIAS_RANGE * (2.0 * pk_splitmix_unit(k + (uint64_t)e) - 1.0));
    bias_kernel<<<4 * BLOCKS, THREADS, 0, ctx->stream>>>(static_cast<uint4 *>(call->args[0]), M,
                                                         bias);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    return cudaMalloc(&g_work, (BLOCKS * STATS + 1) * sizeof(float)) == cudaSuccess ? 0 : 2001;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    cudaFree(g_probs);
    cudaFree(g_work);
    g_probs = NULL;
    g_work = NULL;
    g_probs_n = 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 2 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                                          static_cast<float *>(c->args[1]), (size_t)c->dims[0],
                                          (int)c->dims[1], (int)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
