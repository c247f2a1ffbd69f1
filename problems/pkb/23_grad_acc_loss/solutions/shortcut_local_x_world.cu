// Shortcut twin (issue 26, skip the exchange): the correct kernel, but no all-reduce: each rank
// takes W times its own bf16(loss * local) for the sum over ranks (no peer stores, no barrier).
// The ranks' losses and counts differ, so loss_sum and normalized_loss miss by about their own
// size on any input: a check of the class that is expected to hold already.
// Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

__device__ __forceinline__ float bf(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

__device__ __forceinline__ float count_bf16(long long n) { // int64 -> fp32 -> bf16, as PyTorch
    return bf(__ll2float_rn(n));
}

struct Slots {
    __nv_bfloat16 *peer[PK_MAX_RANKS]; // our slot in rank q's scratch
};

__global__ void __launch_bounds__(32)
    grad_acc(ncclDevComm comm, const __nv_bfloat16 *loss, const int64_t *local,
             const int64_t *global, const __nv_bfloat16 *grad_normalized,
             const __nv_bfloat16 *grad_sum, __nv_bfloat16 *normalized, __nv_bfloat16 *loss_sum,
             __nv_bfloat16 *grad_loss, Slots slots, const __nv_bfloat16 *mine, int world) {
    (void)comm;
    (void)slots;
    const float loc = count_bf16(*local);
    if (threadIdx.x == 0) {
        (void)mine;
        float l = __bfloat162float(*loss);
        if (*local == 0) // nan_to_num
            l = isnan(l) ? 0.0f : isinf(l) ? copysignf(3.3895313892515355e38f, l) : l;
        // this rank's term stands for every rank's
        const float s = __fmul_rn(bf(__fmul_rn(l, loc)), (float)world);
        const float sum = bf(s), glob = count_bf16(*global);
        *loss_sum = __float2bfloat16_rn(sum);
        *normalized = __float2bfloat16_rn(__fdiv_rn(sum, glob));
        const float g1 =
            bf(__fdiv_rn(bf(__fmul_rn(__bfloat162float(*grad_normalized), loc)), glob));
        const float g2 = bf(__fmul_rn(__bfloat162float(*grad_sum), loc));
        *grad_loss = __float2bfloat16_rn(__fadd_rn(g1, g2));
    }
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *loss, const int64_t *local,
                        const int64_t *global, const __nv_bfloat16 *grad_normalized,
                        const __nv_bfloat16 *grad_sum, __nv_bfloat16 *normalized,
                        __nv_bfloat16 *loss_sum, __nv_bfloat16 *grad_loss) {
    const int world = ctx->world_size;
    if (ctx->scratch_size < PK_MAX_RANKS * sizeof(__nv_bfloat16) || ctx->lsa_barrier_count < 1)
        return 1;
    __nv_bfloat16 *mine = static_cast<__nv_bfloat16 *>(ctx->scratch); // slot q: rank q's value
    Slots slots = {};
    for (int q = 0; q < world; q++)
        slots.peer[q] = static_cast<__nv_bfloat16 *>(pk_peer(ctx, mine + ctx->rank, q));
    grad_acc<<<1, 32, 0, ctx->stream>>>(ctx->dev_comm, loss, local, global, grad_normalized,
                                        grad_sum, normalized, loss_sum, grad_loss, slots, mine,
                                        world);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
