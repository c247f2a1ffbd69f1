/* collectives/gather: the root ends with y = the rank-major concatenation of every rank's x; other
 * ranks' y is not used. */
#include "../pk_coll_module.cuh"

/* Baseline: host-driven NCCL send/recv to the root, which every NCCL 2.x has (ncclGather is
 * recent). */
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t n = (size_t)call->dims[0];
    return pk_coll_rooted_p2p(ctx, call->root, static_cast<const __nv_bfloat16 *>(call->args[0]),
                              static_cast<__nv_bfloat16 *>(call->args[1]), n, 1);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, pk_coll_invoke, NULL, NULL, NULL, NULL};
    return &module;
}
