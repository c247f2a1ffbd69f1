/* collectives/reducescatter: rank r ends with y = block r (n/W elements) of the sum over ranks of
 * x. */
#include "../pk_coll_module.cuh"

/* Baseline: one host-driven NCCL reduce-scatter. */
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t n = (size_t)call->dims[0];
    return pk_coll_nccl_code(ncclReduceScatter(call->args[0], call->args[1],
                                               n / (size_t)ctx->world_size, ncclBfloat16, ncclSum,
                                               ctx->comm, ctx->stream));
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, pk_coll_invoke, NULL, NULL, NULL, NULL};
    return &module;
}
