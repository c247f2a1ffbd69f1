// pkb/47_fsdp_step_e2e (ParallelKernelBench problem 47): one FSDP training step of a two-layer
// MLP (Linear -> ReLU -> Linear, MSE loss) with Adam and decoupled weight decay. Rank r holds
// shard r of the flat parameter vector and its Adam moments; the shards are all-gathered, every
// rank runs forward and backward on its own rows, the flat gradient is reduce-scattered and
// averaged, and every rank updates its shard (PyTorch's bf16 op-by-op rounding).
//
// Flat layout (PKB's _flatten_dense_tensors order): [W1 (hidden x d_in) | b1 (hidden) |
// W2 (d_out x hidden) | b2 (d_out)], row-major, P elements; shard r = [r*part, (r+1)*part).
#include "pk_ref_mlp.cuh"

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, bf16 *, bf16 *, bf16 *, size_t, size_t, size_t, size_t,
                        double, double, double, double, double, int);

// ---- Adam with weight decay, PyTorch's bf16 chain ----

// (The same chain as problems 40-43, plus decoupled weight decay.) Every op computes in fp32
// and rounds to bf16 once; a Python scalar enters as (float)scalar;
// division by a Python scalar multiplies by (float)(1.0 / scalar); tensor / tensor and sqrt
// are IEEE.
struct adam_consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc1, inv_bc2, eps, neg_lr, inv_world,
        neg_lr_wd;
};

static adam_consts make_consts(double lr, double beta1, double beta2, double eps,
                               double weight_decay, int step, int world) {
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step); // math.pow
    return {(float)beta1,         (float)(1.0 - beta1),       (float)beta2, (float)(1.0 - beta2),
            (float)(1.0 / bc1),   (float)(1.0 / bc2),         (float)eps,   (float)(-lr),
            (float)(1.0 / world), (float)(-lr * weight_decay)};
}

// g = g_shard.div_(world) of the reduce-scattered gradient, then
//   m.mul_(beta1).add_(g, alpha=1-beta1); v.mul_(beta2).addcmul_(g, g, value=1-beta2)
//   theta.add_((m / bc1).div((v / bc2).sqrt().add(eps)), alpha=-lr)
//   theta.add_(theta0, alpha=-lr*weight_decay)
// (add_ with alpha is one fp32 a + alpha * b and one rounding).
__global__ void __launch_bounds__(THREADS)
    adam_decay(const bf16 *theta0, const bf16 *m_in, const bf16 *v_in, const bf16 *grad_sum,
               bf16 *theta_out, bf16 *m_out, bf16 *v_out, size_t n, adam_consts c) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS) {
        const float g = r16(f32(grad_sum[i]) * c.inv_world);
        const float m = r16(fmaf(c.one_minus_beta1, g, r16(f32(m_in[i]) * c.beta1)));
        const float v = r16(fmaf(c.one_minus_beta2, g * g, r16(f32(v_in[i]) * c.beta2)));
        const float m_hat = r16(m * c.inv_bc1), v_hat = r16(v * c.inv_bc2);
        const float denom = r16(r16(__fsqrt_rn(v_hat)) + c.eps);
        const float q = r16(__fdiv_rn(m_hat, denom));
        const float t0 = f32(theta0[i]);
        const float t1 = r16(fmaf(c.neg_lr, q, t0));
        theta_out[i] = __float2bfloat16_rn(fmaf(c.neg_lr_wd, t0, t1));
        m_out[i] = __float2bfloat16_rn(m);
        v_out[i] = __float2bfloat16_rn(v);
    }
}

// ---- Problem 47 ----

// Baseline, in PKB's order: all-gather of the shards into the full flat vector, forward and
// backward, reduce-scatter of the flat gradient, Adam with weight decay on this rank's shard.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const mlp_dims d = {(int)call->dims[4], (int)call->dims[1], (int)call->dims[2],
                        (int)call->dims[3]};
    const size_t P = d.P(), part = (size_t)call->dims[6];
    const size_t work_bytes = mlp_workspace_bytes(d);
    char *buf = static_cast<char *>(workspace(work_bytes + 2 * (2 * P + part) + 768));
    if (!buf)
        return 3000;
    bf16 *full = reinterpret_cast<bf16 *>(buf + ((work_bytes + 255) & ~(size_t)255));
    bf16 *grad = reinterpret_cast<bf16 *>((reinterpret_cast<uintptr_t>(full + P) + 255) &
                                          ~static_cast<uintptr_t>(255));
    bf16 *grad_part = reinterpret_cast<bf16 *>((reinterpret_cast<uintptr_t>(grad + P) + 255) &
                                               ~static_cast<uintptr_t>(255));
    const bf16 *shard = static_cast<const bf16 *>(call->args[2]);
    ncclResult_t r = ncclAllGather(shard, full, part, ncclBfloat16, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    int rc = mlp_grads(ctx->stream, d, static_cast<const bf16 *>(call->args[0]),
                       static_cast<const bf16 *>(call->args[1]), full, grad, buf);
    if (rc)
        return 2000 + rc;
    if ((r = ncclReduceScatter(grad, grad_part, part, ncclBfloat16, ncclSum, ctx->comm,
                               ctx->stream)))
        return 1000 + (int)r;
    adam_decay<<<grid_for(part), THREADS, 0, ctx->stream>>>(
        shard, static_cast<const bf16 *>(call->args[3]), static_cast<const bf16 *>(call->args[4]),
        grad_part, static_cast<bf16 *>(call->args[5]), static_cast<bf16 *>(call->args[6]),
        static_cast<bf16 *>(call->args[7]), part,
        make_consts(call->params[0], call->params[1], call->params[2], call->params[3],
                    call->params[4], (int)call->params[5], ctx->world_size));
    return cudaGetLastError() == cudaSuccess ? 0 : 2100;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 8 || c->n_dims < 7 || c->n_params < 6)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<const bf16 *>(c->args[4]), static_cast<bf16 *>(c->args[5]),
        static_cast<bf16 *>(c->args[6]), static_cast<bf16 *>(c->args[7]), (size_t)c->dims[4],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3], c->params[0], c->params[1],
        c->params[2], c->params[3], c->params[4], (int)c->params[5]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
