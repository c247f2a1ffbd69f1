// pkb/30_moe_epgroupgemm_lora_backward (ParallelKernelBench problem 30): the gradient exchange
// of an expert-parallel grouped-GEMM LoRA backward. Every rank holds its own LoRA weight
// gradients grad_fc1_1_lora_A (r x in_f), grad_fc1_2_lora_A (r x in_f) and grad_fc2_lora_B
// (out_f x r), bf16; every rank must end with their sums over the ranks:
//   fc1_1_out = sum_q grad_fc1_1_lora_A_q,  fc1_2_out = ...,  fc2_out = sum_q grad_fc2_lora_B_q
// PKB all-reduces the three tensors in place; here the inputs stay unchanged and the sums are
// outputs. Baseline: PyTorch's three dist.all_reduce calls, i.e. three host-driven NCCL
// all-reduces (bf16, sum), one after another.
#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                        const __nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *, __nv_bfloat16 *,
                        size_t, size_t, size_t);

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t r = (size_t)call->dims[0], in_f = (size_t)call->dims[1],
                 out_f = (size_t)call->dims[2];
    const size_t count[3] = {r * in_f, r * in_f, out_f * r};
    for (int t = 0; t < 3; t++) {
        const int rc = nccl_code(ncclAllReduce(call->args[t], call->args[3 + t], count[t],
                                               ncclBfloat16, ncclSum, ctx->comm, ctx->stream));
        if (rc)
            return rc;
    }
    return 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 6 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const __nv_bfloat16 *>(c->args[1]),
        static_cast<const __nv_bfloat16 *>(c->args[2]), static_cast<__nv_bfloat16 *>(c->args[3]),
        static_cast<__nv_bfloat16 *>(c->args[4]), static_cast<__nv_bfloat16 *>(c->args[5]),
        (size_t)c->dims[0], (size_t)c->dims[1], (size_t)c->dims[2]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};
    return &module;
}
