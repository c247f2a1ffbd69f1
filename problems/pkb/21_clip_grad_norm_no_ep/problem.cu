// pkb/21_clip_grad_norm_no_ep (ParallelKernelBench problem 21): FSDP gradient-norm clipping.
// Each rank holds its shards of three gradients (M x N bf16 each). Every rank must return the
// global L2 norm over all shards of all ranks and its gradients clipped to max_norm, as
// PyTorch computes them:
//   acc   = sum over tensors t of (sqrt(sum of f32(g_t)^2))^2   (per tensor: torch.norm, then ** 2)
//   total = sqrt(all-reduce(acc))                                (fp32)
//   if total > max_norm: out_t = bf16(f32(g_t) * f32(bf16(coef))), coef = (1 / total) * max_norm
//   else:                out_t = g_t
// PKB clips in place and returns only the norm; here the clipped gradients are outputs. The
// predicate stays on the device: no host synchronisation.
#include "pk_problem_module.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                        const __nv_bfloat16 *, float *, __nv_bfloat16 *, __nv_bfloat16 *,
                        __nv_bfloat16 *, size_t, size_t, float);

#define THREADS 256
#define TENSORS 3
#define BLOCKS_PER_TENSOR 264 // partial sums per tensor: 6 CTAs per SM over the 3 tensors

static float *g_work; // [TENSORS][BLOCKS_PER_TENSOR] partial sums, then the global sum

struct Grads {
    const uint4 *in[TENSORS];
    uint4 *out[TENSORS];
};

__device__ float block_sum(float v) { // every thread gets the CTA's total (fixed order)
    __shared__ float warp_sums[32];
    __shared__ float total;
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (unsigned w = 0; w < blockDim.x / 32; w++)
            s += warp_sums[w];
        total = s;
    }
    __syncthreads();
    const float t = total;
    __syncthreads();
    return t;
}

// Grid (BLOCKS_PER_TENSOR, TENSORS): fp32 partial sums of squares, 16-byte loads.
__global__ void __launch_bounds__(THREADS) sumsq_partials(Grads g, float *partials, size_t vecs) {
    const uint4 *x = g.in[blockIdx.y];
    float acc = 0.f;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs;
         i += (size_t)gridDim.x * THREADS) {
        const uint4 v = x[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            acc = fmaf(f.x, f.x, acc);
            acc = fmaf(f.y, f.y, acc);
        }
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

// One CTA: each tensor's norm, then PKB's acc = ((0 + n0^2) + n1^2) + n2^2, into acc_out.
__global__ void __launch_bounds__(THREADS) local_norm_sq(const float *partials, float *acc_out) {
    float acc = 0.f;
    for (int t = 0; t < TENSORS; t++) {
        float s = 0.f;
        for (int b = threadIdx.x; b < BLOCKS_PER_TENSOR; b += THREADS)
            s += partials[t * BLOCKS_PER_TENSOR + b];
        const float norm = sqrtf(block_sum(s));      // torch.norm(g.float(), 2)
        acc = __fadd_rn(acc, __fmul_rn(norm, norm)); // acc + gn ** 2 (pow 2 is x * x)
    }
    if (threadIdx.x == 0)
        *acc_out = acc;
}

// total = sqrt(global sum); clip (or copy) every gradient with the device-side predicate.
__global__ void __launch_bounds__(THREADS)
    clip(Grads g, const float *global_sq, float *total_norm, size_t vecs, float max_norm) {
    const float total = sqrtf(*global_sq); // total_p ** (1 / 2)
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        *total_norm = total;
    const bool clipped = total > max_norm;
    // coef = max_norm / total is reciprocal(total) * max_norm; mul_ casts it to bf16 first
    const float coef = __bfloat162float(__float2bfloat16_rn(__fmul_rn(__frcp_rn(total), max_norm)));
    const uint4 *x = g.in[blockIdx.y];
    uint4 *y = g.out[blockIdx.y];
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs;
         i += (size_t)gridDim.x * THREADS) {
        uint4 v = x[i];
        if (clipped) {
            __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float2 f = __bfloat1622float2(h[k]);
                h[k] = __floats2bfloat162_rn(f.x * coef, f.y * coef);
            }
        }
        y[i] = v;
    }
}

// Baseline: partial sums of squares, the local norm, one host-driven fp32 NCCL all-reduce of
// the scalar, then the clip kernel (which also writes the norm). No host synchronisation.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t n = (size_t)call->dims[0] * (size_t)call->dims[1];
    const float max_norm = (float)call->params[0];
    if (!g_work && cudaMalloc(&g_work, (TENSORS * BLOCKS_PER_TENSOR + 1) * sizeof(float)) !=
                       cudaSuccess) // first call only: an untimed correctness trial
        return 2001;
    float *global_sq = g_work + TENSORS * BLOCKS_PER_TENSOR;
    Grads g;
    for (int t = 0; t < TENSORS; t++) {
        g.in[t] = static_cast<const uint4 *>(call->args[t]);
        g.out[t] = static_cast<uint4 *>(call->args[4 + t]);
    }
    sumsq_partials<<<dim3(BLOCKS_PER_TENSOR, TENSORS), THREADS, 0, ctx->stream>>>(g, g_work, n / 8);
    local_norm_sq<<<1, THREADS, 0, ctx->stream>>>(g_work, global_sq);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t r =
        ncclAllReduce(global_sq, global_sq, 1, ncclFloat, ncclSum, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    clip<<<dim3(2 * 132, TENSORS), THREADS, 0, ctx->stream>>>(
        g, global_sq, static_cast<float *>(call->args[3]), n / 8, max_norm);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    cudaFree(g_work);
    g_work = NULL;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 7 || c->n_dims < 2 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const __nv_bfloat16 *>(c->args[1]),
        static_cast<const __nv_bfloat16 *>(c->args[2]), static_cast<float *>(c->args[3]),
        static_cast<__nv_bfloat16 *>(c->args[4]), static_cast<__nv_bfloat16 *>(c->args[5]),
        static_cast<__nv_bfloat16 *>(c->args[6]), (size_t)c->dims[0], (size_t)c->dims[1],
        (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
