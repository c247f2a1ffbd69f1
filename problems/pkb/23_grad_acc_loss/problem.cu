// pkb/23_grad_acc_loss (ParallelKernelBench 23): token-weighted loss normalization across
// data-parallel ranks, forward and backward, on 0-dim tensors:
//   loss_sum   = all_reduce_sum(loss * local_tokens)            (bf16)
//   normalized = loss_sum / global_tokens                       (bf16)
//   grad_loss  = grad_normalized * local / global + grad_sum * local
// with `loss` replaced by nan_to_num(loss) on a rank that has no tokens.
//
// PyTorch's rounding points are kept: every operand is a 0-dim CUDA tensor, so the int64 token
// counts are cast to bf16 before each bf16 operation (a count bf16 cannot hold is rounded), and
// every operation rounds its fp32 result to bf16 once.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const int64_t *, const int64_t *,
                        const __nv_bfloat16 *, const __nv_bfloat16 *, __nv_bfloat16 *,
                        __nv_bfloat16 *, __nv_bfloat16 *);

__device__ __forceinline__ float bf(float v) { // one bf16 rounding
    return __bfloat162float(__float2bfloat16_rn(v));
}

// int64 -> bf16 as PyTorch casts it (through fp32, round to nearest even).
__device__ __forceinline__ float count_bf16(long long n) {
    return bf(__ll2float_rn(n));
}

// torch.nan_to_num on bf16: NaN -> 0, +-inf -> the largest finite bf16.
__device__ __forceinline__ float nan_to_num_bf16(float v) {
    if (isnan(v))
        return 0.0f;
    if (isinf(v))
        return v > 0 ? 3.3895313892515355e38f : -3.3895313892515355e38f;
    return v;
}

// loss_sum (before the all-reduce) = bf16(loss * bf16(local)).
__global__ void local_loss_sum(const __nv_bfloat16 *loss, const int64_t *local,
                               __nv_bfloat16 *loss_sum) {
    float l = __bfloat162float(*loss);
    if (*local == 0)
        l = nan_to_num_bf16(l);
    *loss_sum = __float2bfloat16_rn(__fmul_rn(l, count_bf16(*local)));
}

// normalized = bf16(loss_sum / bf16(global)); grad_loss = bf16(g1 + g2) with
// g1 = bf16(bf16(grad_normalized * bf16(local)) / bf16(global)), g2 = bf16(grad_sum * bf16(local)).
__global__ void finish(const __nv_bfloat16 *loss_sum, const int64_t *local, const int64_t *global,
                       const __nv_bfloat16 *grad_normalized, const __nv_bfloat16 *grad_sum,
                       __nv_bfloat16 *normalized, __nv_bfloat16 *grad_loss) {
    const float loc = count_bf16(*local), glob = count_bf16(*global);
    *normalized = __float2bfloat16_rn(__fdiv_rn(__bfloat162float(*loss_sum), glob));
    const float g1 = bf(__fdiv_rn(bf(__fmul_rn(__bfloat162float(*grad_normalized), loc)), glob));
    const float g2 = bf(__fmul_rn(__bfloat162float(*grad_sum), loc));
    *grad_loss = __float2bfloat16_rn(__fadd_rn(g1, g2));
}

// Baseline, as PKB's solution() without its host sync (`local.item() == 0` is decided on the
// device): one kernel, a host-driven NCCL bf16 all-reduce of one value (in place, in the
// output), one kernel.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const __nv_bfloat16 *loss = static_cast<const __nv_bfloat16 *>(call->args[0]);
    const int64_t *local = static_cast<const int64_t *>(call->args[1]);
    const int64_t *global = static_cast<const int64_t *>(call->args[2]);
    __nv_bfloat16 *loss_sum = static_cast<__nv_bfloat16 *>(call->args[6]);
    local_loss_sum<<<1, 1, 0, ctx->stream>>>(loss, local, loss_sum);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t e =
        ncclAllReduce(loss_sum, loss_sum, 1, ncclBfloat16, ncclSum, ctx->comm, ctx->stream);
    if (e != ncclSuccess)
        return 1000 + (int)e;
    finish<<<1, 1, 0, ctx->stream>>>(
        loss_sum, local, global, static_cast<const __nv_bfloat16 *>(call->args[3]),
        static_cast<const __nv_bfloat16 *>(call->args[4]),
        static_cast<__nv_bfloat16 *>(call->args[5]), static_cast<__nv_bfloat16 *>(call->args[7]));
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 8)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const int64_t *>(c->args[1]), static_cast<const int64_t *>(c->args[2]),
        static_cast<const __nv_bfloat16 *>(c->args[3]),
        static_cast<const __nv_bfloat16 *>(c->args[4]), static_cast<__nv_bfloat16 *>(c->args[5]),
        static_cast<__nv_bfloat16 *>(c->args[6]), static_cast<__nv_bfloat16 *>(c->args[7]));
}

// Inputs the generic generator cannot express: token counts consistent across ranks
// (global = sum of every rank's local), drawn from (seed, key) identically on every rank.
//   local_q = 1 + u_q % (M*N) for every rank q (PKB: M*N on every rank, so local/global = 1/W);
//   key % 3 = 0: grad_normalized = 1, grad_sum = 0 (PKB's); 1: grad_normalized ~ N(0, 1),
//   grad_sum = 0; 2: both ~ N(0, 1), grad_sum scaled by 2^-20 so that both terms of grad_loss
//   count; the same on every rank (one upstream gradient);
//   key % 4 = 3: rank (key / 4) % W has no tokens and loss = NaN (nan_to_num must catch it).
// `loss` keeps the generic N(0, 1) draw otherwise.
static double normal(uint64_t z) {
    return sqrt(-2.0 * log(pk_splitmix_unit(z))) * cos(6.283185307179586 * pk_splitmix_unit(z + 1));
}

__global__ void gen_write(__nv_bfloat16 *loss, int64_t *local, int64_t *global,
                          __nv_bfloat16 *grad_normalized, __nv_bfloat16 *grad_sum,
                          long long my_local, long long total, float gn, float gs, int nan_loss) {
    *local = my_local;
    *global = total;
    *grad_normalized = __float2bfloat16_rn(gn);
    *grad_sum = __float2bfloat16_rn(gs);
    if (nan_loss)
        *loss = __float2bfloat16_rn(__int_as_float(0x7fc00000));
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const long long tokens = call->dims[0] * call->dims[1];
    const uint64_t k = pk_splitmix64(seed ^ pk_splitmix64((uint64_t)(unsigned)key));
    // At W = 1 (the single-GPU diagnostic) the only rank cannot be the empty one (no tokens).
    const int empty = key % 4 == 3 && ctx->world_size > 1 ? (key / 4) % ctx->world_size : -1;
    long long total = 0, mine = 0;
    for (int q = 0; q < ctx->world_size; q++) {
        const long long n =
            q == empty ? 0
                       : 1 + (long long)(pk_splitmix64(k + 16 + (uint64_t)q) % (uint64_t)tokens);
        total += n;
        if (q == ctx->rank)
            mine = n;
    }
    float gn = 1.0f, gs = 0.0f;
    if (key % 3 >= 1)
        gn = (float)normal(k + 2);
    if (key % 3 == 2)
        gs = (float)(normal(k + 4) * 0x1p-20);
    gen_write<<<1, 1, 0, ctx->stream>>>(
        static_cast<__nv_bfloat16 *>(call->args[0]), static_cast<int64_t *>(call->args[1]),
        static_cast<int64_t *>(call->args[2]), static_cast<__nv_bfloat16 *>(call->args[3]),
        static_cast<__nv_bfloat16 *>(call->args[4]), mine, total, gn, gs, ctx->rank == empty);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, NULL, NULL};
    return &module;
}
