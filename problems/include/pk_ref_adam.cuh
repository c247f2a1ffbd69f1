// The reference library's Adam step in PyTorch's bf16 op-by-op chain, shared by pkb/40, 41 and
// 42 (47 adds decoupled weight decay and keeps its own). Needs THREADS (pk_ref_mlp.cuh).
//
// Prompt: Adam as PyTorch's bf16 op-by-op chain, one elementwise kernel.
#pragma once

#include "pk_ref_mlp.cuh"

// ---- Adam, PyTorch's bf16 chain (problems 40-43, 47) ----

// Every op computes in fp32 and rounds to bf16 once; a Python scalar enters as (float)scalar;
// division by a Python scalar multiplies by (float)(1.0 / scalar); tensor / tensor and sqrt
// are IEEE.
struct adam_consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc1, inv_bc2, eps, neg_lr, inv_world;
};

static adam_consts make_consts(double lr, double beta1, double beta2, double eps, int step,
                               int world) {
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step); // math.pow
    return {(float)beta1,         (float)(1.0 - beta1), (float)beta2,
            (float)(1.0 - beta2), (float)(1.0 / bc1),   (float)(1.0 / bc2),
            (float)eps,           (float)(-lr),         (float)(1.0 / world)};
}

// g = flat_grad.div_(world) of the summed gradient, then
//   m.mul_(beta1).add_(g, alpha=1-beta1); v.mul_(beta2).addcmul_(g, g, value=1-beta2)
//   p.add_((m / bc1).div((v / bc2).sqrt().add(eps)).mul(-lr))
// Outputs may alias inputs (each element is read before it is written, by the same thread).
__global__ void __launch_bounds__(THREADS)
    adam(const bf16 *p_in, const bf16 *m_in, const bf16 *v_in, const bf16 *grad_sum, bf16 *p_out,
         bf16 *m_out, bf16 *v_out, size_t n, adam_consts c) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS) {
        const float g = r16(f32(grad_sum[i]) * c.inv_world);
        const float m = r16(fmaf(c.one_minus_beta1, g, r16(f32(m_in[i]) * c.beta1)));
        const float v = r16(fmaf(c.one_minus_beta2, g * g, r16(f32(v_in[i]) * c.beta2)));
        const float m_hat = r16(m * c.inv_bc1), v_hat = r16(v * c.inv_bc2);
        const float denom = r16(r16(__fsqrt_rn(v_hat)) + c.eps);
        const float step = r16(r16(__fdiv_rn(m_hat, denom)) * c.neg_lr);
        p_out[i] = __float2bfloat16_rn(f32(p_in[i]) + step);
        m_out[i] = __float2bfloat16_rn(m);
        v_out[i] = __float2bfloat16_rn(v);
    }
}
