// pkb/43_fused_adam_grad_unshard_allgather (ParallelKernelBench problem 43): every rank holds
// its shard of a flat parameter vector (master weights, gradient, Adam moments), takes one
// Adam step on it with PyTorch's bf16 op-by-op rounding, and all ranks all-gather the updated
// shards in rank order.
#include "pk_problem_module.h"

#include <cuda_bf16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        bf16 *, size_t, double, double, double, double, int);

#define THREADS 256

// PKB's Adam in PyTorch (bf16 tensors, Python-float hyperparameters): every op computes in
// fp32 and rounds to bf16 once; a Python scalar enters as (float)scalar; division by a Python
// scalar is a multiply by (float)(1.0 / scalar); tensor / tensor is IEEE division.
struct adam_consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc1, inv_bc2, eps, neg_lr;
};

static adam_consts make_consts(double lr, double beta1, double beta2, double eps, int step) {
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step); // math.pow
    return {(float)beta1,       (float)(1.0 - beta1), (float)beta2, (float)(1.0 - beta2),
            (float)(1.0 / bc1), (float)(1.0 / bc2),   (float)eps,   (float)(-lr)};
}

__device__ __forceinline__ float r16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

// w' for one element of
//   m.mul_(beta1).add_(g, alpha=1-beta1); v.mul_(beta2).addcmul_(g, g, value=1-beta2)
//   w.add_((m / bc1).div((v / bc2).sqrt().add(eps)).mul(-lr))
__device__ __forceinline__ float adam_w(float w, float m0, float v0, float g,
                                        const adam_consts &c) {
    const float m = r16(fmaf(c.one_minus_beta1, g, r16(m0 * c.beta1)));
    const float v = r16(fmaf(c.one_minus_beta2, g * g, r16(v0 * c.beta2)));
    const float m_hat = r16(m * c.inv_bc1), v_hat = r16(v * c.inv_bc2);
    const float denom = r16(r16(__fsqrt_rn(v_hat)) + c.eps);
    const float step = r16(r16(__fdiv_rn(m_hat, denom)) * c.neg_lr);
    return r16(w + step);
}

// One kernel for the whole chain (PyTorch runs one kernel per op; fusing them only makes the
// baseline faster, with the same rounding points). It writes this rank's block of `out`.
__global__ void __launch_bounds__(THREADS)
    adam_shard(const bf16 *g, const bf16 *w, const bf16 *m0, const bf16 *v0, bf16 *out, size_t n,
               adam_consts c) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS)
        out[i] = __float2bfloat16_rn(adam_w(__bfloat162float(w[i]), __bfloat162float(m0[i]),
                                            __bfloat162float(v0[i]), __bfloat162float(g[i]), c));
}

static unsigned grid_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 132 * 16 ? (b ? b : 1) : 132 * 16);
}

// Baseline: the Adam kernel writes this rank's block of `gathered`, then a host-driven
// in-place NCCL all-gather (PKB: all_gather_into_tensor).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t P = (size_t)call->dims[0];
    const adam_consts c = make_consts(call->params[0], call->params[1], call->params[2],
                                      call->params[3], (int)call->params[4]);
    bf16 *gathered = static_cast<bf16 *>(call->args[4]);
    bf16 *mine = gathered + (size_t)ctx->rank * P;
    adam_shard<<<grid_for(P), THREADS, 0, ctx->stream>>>(
        static_cast<const bf16 *>(call->args[0]), static_cast<const bf16 *>(call->args[1]),
        static_cast<const bf16 *>(call->args[2]), static_cast<const bf16 *>(call->args[3]), mine, P,
        c);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t r = ncclAllGather(mine, gathered, P, ncclBfloat16, ctx->comm, ctx->stream);
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 5 || c->n_dims < 1 || c->n_params < 5)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<bf16 *>(c->args[4]), (size_t)c->dims[0], c->params[0], c->params[1],
        c->params[2], c->params[3], (int)c->params[4]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};
    return &module;
}
