/* collectives/alltoall: block j (n/W elements) of rank i's x ends in block i of rank j's y. */
#include "../pk_coll_module.cuh"

/* Block p of x goes to peer p, block p of y comes from peer p; our own block is a copy. */
static int coll_alltoall_p2p(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y,
                             size_t block) {
    const size_t own = (size_t)ctx->rank * block;
    int rc = pk_coll_cuda_code(cudaMemcpyAsync(y + own, x + own, block * sizeof(__nv_bfloat16),
                                               cudaMemcpyDeviceToDevice, ctx->stream));
    if (rc != 0)
        return rc;
    rc = pk_coll_nccl_code(ncclGroupStart());
    if (rc != 0)
        return rc;
    for (int p = 0; p < ctx->world_size && rc == 0; p++) {
        if (p == ctx->rank)
            continue;
        rc = pk_coll_nccl_code(
            ncclSend(x + (size_t)p * block, block, ncclBfloat16, p, ctx->comm, ctx->stream));
        if (rc == 0)
            rc = pk_coll_nccl_code(
                ncclRecv(y + (size_t)p * block, block, ncclBfloat16, p, ctx->comm, ctx->stream));
    }
    const int end = pk_coll_nccl_code(ncclGroupEnd());
    return rc != 0 ? rc : end;
}

/* Baseline: host-driven NCCL send/recv with every peer, which every NCCL 2.x has (ncclAlltoAll is
 * recent). */
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t n = (size_t)call->dims[0];
    return coll_alltoall_p2p(ctx, static_cast<const __nv_bfloat16 *>(call->args[0]),
                             static_cast<__nv_bfloat16 *>(call->args[1]),
                             n / (size_t)ctx->world_size);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, pk_coll_invoke, NULL, NULL, NULL, NULL};
    return &module;
}
