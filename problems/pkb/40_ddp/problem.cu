// pkb/40_ddp (ParallelKernelBench problem 40): one data-parallel training step of a two-layer
// MLP (Linear -> ReLU -> Linear, MSE loss) with Adam. Rank 0's parameters and Adam moments are
// broadcast; every rank runs forward and backward on its own rows of the batch; the gradients
// are all-reduced and averaged; every rank takes the same Adam step (PyTorch's bf16 op-by-op
// rounding) and returns the updated parameters and moments.
//
// Flat layout (PKB's _flatten_dense_tensors order): [W1 (hidden x d_in) | b1 (hidden) |
// W2 (d_out x hidden) | b2 (d_out)], row-major, P elements.
#include "pk_ref_mlp.cuh"
#include "pk_ref_adam.cuh"

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, bf16 *, bf16 *, bf16 *, size_t, size_t, size_t, size_t,
                        double, double, double, double, int);

// ---- Problem 40 ----

// Baseline, in PKB's order: three broadcasts from rank 0 (params, exp_avg, exp_avg_sq) into
// the outputs, forward and backward, an all-reduce of the flat gradient, Adam in place.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const mlp_dims d = {(int)call->dims[4], (int)call->dims[1], (int)call->dims[2],
                        (int)call->dims[3]};
    const size_t P = d.P();
    bf16 *p = static_cast<bf16 *>(call->args[5]), *m = static_cast<bf16 *>(call->args[6]),
         *v = static_cast<bf16 *>(call->args[7]);
    const size_t work_bytes = mlp_workspace_bytes(d);
    char *buf = static_cast<char *>(workspace(work_bytes + 2 * P + 256));
    if (!buf)
        return 3000;
    bf16 *grad = reinterpret_cast<bf16 *>(buf + ((work_bytes + 255) & ~(size_t)255));
    ncclResult_t r;
    if ((r = ncclBroadcast(call->args[2], p, P, ncclBfloat16, 0, ctx->comm, ctx->stream)) ||
        (r = ncclBroadcast(call->args[3], m, P, ncclBfloat16, 0, ctx->comm, ctx->stream)) ||
        (r = ncclBroadcast(call->args[4], v, P, ncclBfloat16, 0, ctx->comm, ctx->stream)))
        return 1000 + (int)r;
    int rc = mlp_grads(ctx->stream, d, static_cast<const bf16 *>(call->args[0]),
                       static_cast<const bf16 *>(call->args[1]), p, grad, buf);
    if (rc)
        return 2000 + rc;
    if ((r = ncclAllReduce(grad, grad, P, ncclBfloat16, ncclSum, ctx->comm, ctx->stream)))
        return 1000 + (int)r;
    adam<<<grid_for(P), THREADS, 0, ctx->stream>>>(
        p, m, v, grad, p, m, v, P,
        make_consts(call->params[0], call->params[1], call->params[2], call->params[3],
                    (int)call->params[4], ctx->world_size));
    return cudaGetLastError() == cudaSuccess ? 0 : 2100;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 8 || c->n_dims < 5 || c->n_params < 5)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<const bf16 *>(c->args[4]), static_cast<bf16 *>(c->args[5]),
        static_cast<bf16 *>(c->args[6]), static_cast<bf16 *>(c->args[7]), (size_t)c->dims[4],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3], c->params[0], c->params[1],
        c->params[2], c->params[3], (int)c->params[4]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
