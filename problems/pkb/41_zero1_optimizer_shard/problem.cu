// pkb/41_zero1_optimizer_shard (ParallelKernelBench problem 41): a ZeRO-1 training step of a
// two-layer MLP (Linear -> ReLU -> Linear, MSE loss) with Adam. Rank 0's parameters are
// broadcast; every rank runs forward and backward on its own rows; the gradients are
// all-reduced and averaged; rank r keeps the Adam moments of partition r of the flat vector
// only, updates that partition (PyTorch's bf16 op-by-op rounding), and the updated partitions
// are all-gathered.
//
// Flat layout (PKB's _flatten_dense_tensors order): [W1 (hidden x d_in) | b1 (hidden) |
// W2 (d_out x hidden) | b2 (d_out)], row-major, P elements; partition r = [r*part, (r+1)*part).
#include "pk_ref_mlp.cuh"
#include "pk_ref_adam.cuh"

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, bf16 *, bf16 *, bf16 *, size_t, size_t, size_t, size_t,
                        double, double, double, double, int);

// ---- Problem 41 ----

// Baseline, in PKB's order: broadcast of the parameters from rank 0 into params_out, forward
// and backward, all-reduce of the flat gradient, Adam on this rank's partition (in place in
// params_out), in-place all-gather of the partitions.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const mlp_dims d = {(int)call->dims[4], (int)call->dims[1], (int)call->dims[2],
                        (int)call->dims[3]};
    const size_t P = d.P(), part = (size_t)call->dims[6];
    bf16 *p = static_cast<bf16 *>(call->args[5]);
    bf16 *mine = p + (size_t)ctx->rank * part;
    const size_t work_bytes = mlp_workspace_bytes(d);
    char *buf = static_cast<char *>(workspace(work_bytes + 2 * P + 256));
    if (!buf)
        return 3000;
    bf16 *grad = reinterpret_cast<bf16 *>(buf + ((work_bytes + 255) & ~(size_t)255));
    ncclResult_t r = ncclBroadcast(call->args[2], p, P, ncclBfloat16, 0, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    int rc = mlp_grads(ctx->stream, d, static_cast<const bf16 *>(call->args[0]),
                       static_cast<const bf16 *>(call->args[1]), p, grad, buf);
    if (rc)
        return 2000 + rc;
    if ((r = ncclAllReduce(grad, grad, P, ncclBfloat16, ncclSum, ctx->comm, ctx->stream)))
        return 1000 + (int)r;
    adam<<<grid_for(part), THREADS, 0, ctx->stream>>>(
        mine, static_cast<const bf16 *>(call->args[3]), static_cast<const bf16 *>(call->args[4]),
        grad + (size_t)ctx->rank * part, mine, static_cast<bf16 *>(call->args[6]),
        static_cast<bf16 *>(call->args[7]), part,
        make_consts(call->params[0], call->params[1], call->params[2], call->params[3],
                    (int)call->params[4], ctx->world_size));
    if (cudaGetLastError() != cudaSuccess)
        return 2100;
    r = ncclAllGather(mine, p, part, ncclBfloat16, ctx->comm, ctx->stream);
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 8 || c->n_dims < 7 || c->n_params < 5)
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
