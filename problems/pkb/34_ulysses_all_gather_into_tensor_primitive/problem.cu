// pkb/34_ulysses_all_gather_into_tensor_primitive (ParallelKernelBench problem 34): every
// rank holds x (M, N) and needs y = torch.cat([x_0, ..., x_{W-1}], dim=0), (W M, N): PKB's
// dist.all_gather_into_tensor. The rank-major layout of y is exactly NCCL's all-gather output.
#include "pk_problem_module.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, __nv_bfloat16 *, size_t, size_t);

// Baseline: one host-driven NCCL all-gather straight into y (no copy after it).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0], N = (size_t)call->dims[1];
    const ncclResult_t r =
        ncclAllGather(call->args[0], call->args[1], M * N, ncclBfloat16, ctx->comm, ctx->stream);
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                                          static_cast<__nv_bfloat16 *>(c->args[1]),
                                          (size_t)c->dims[0], (size_t)c->dims[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};
    return &module;
}
