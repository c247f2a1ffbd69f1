/* collectives/allreduce: every rank ends with y = sum over ranks of x (bf16, n elements). */
#include "../pk_coll_module.cuh"

/* Baseline: one host-driven NCCL all-reduce. */
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t n = (size_t)call->dims[0];
    return pk_coll_nccl_code(ncclAllReduce(call->args[0], call->args[1], n, ncclBfloat16, ncclSum,
                                           ctx->comm, ctx->stream));
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, pk_coll_invoke, NULL, NULL, NULL, NULL};
    return &module;
}
