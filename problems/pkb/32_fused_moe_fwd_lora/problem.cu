// pkb/32_fused_moe_fwd_lora (ParallelKernelBench problem 32): the expert-parallel fused MoE
// forward of pkb/31 with LoRA adapters on the three expert projections.
// Every rank holds M tokens (hidden_states, M x N), its own router (gate_weight E x N,
// gate_bias E) and its own expert MLP (gate_proj, up_proj: I x N + I; down_proj: N x I + N),
// with LoRA adapters (A_g, A_u: r x N; B_g, B_u: I x r; A_d: r x I; B_d: N x r), which is the
// MLP of its El = E / W experts [rank * El, (rank + 1) * El). As PyTorch does it:
//   p        = bf16(softmax(bf16(x gate_weight^T + gate_bias)))        (M x E)
//   w, sel   = torch.topk(p, K)                                        (M x K)
//   dispatch : every token's row to the rank of each of its K experts (expert-major order,
//              variable-size all_to_all_single, split sizes all-gathered and read on the host)
//   y        = down(h) + (h A_d^T) B_d, h = silu(gate(x) + (x A_g^T) B_g) * (up(x) + (x A_u^T) B_u)
//              on every received row, with the MLP of the receiving rank (every op rounded to
//              bf16: PKB's expert_forward_lora)
//   combine  : the rows back to their token's rank (all_to_all_single in reverse)
//   out[m]   = sum over k of bf16(w[m][k] * y of (m, sel[m][k]))      (bf16 scatter_add_)
// Output: out (M x N bf16). The routing (generate(), problems/include/pk_moe_ffn.cuh) is one
// of pk_moe_routing.cuh's modes per call (balanced, skewed, a hot and an empty expert, a rank
// group that gets no token), with a margin between the K-th and (K+1)-th logit that makes it
// unique at every precision.
// Baseline (pk_moe_ref_forward): cuBLASLt linears (bias epilogue, as addmm), a softmax/top-k
// kernel, an NCCL all-gather of the expert counts and a host synchronisation, the expert-major
// permutation and gather, grouped ncclSend/ncclRecv, the rank's MLP on all received rows (one
// GEMM per projection and LoRA factor, a bf16 add per adapter: every local expert has the same
// weights), grouped send/recv back, and a weighted scatter-add with bf16 atomics. PKB's chunk
// sorts around the MLP are left out: they permute rows through a row-wise function and back.
#include "pk_moe_ffn.cuh"
#include "pk_problem_module.h"

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, bf16 *, size_t, size_t, size_t, int, int, int);

static PkMoeRef g_ref;

static const bf16 *in(const pk_problem_call *c, int i) {
    return static_cast<const bf16 *>(c->args[i]);
}

static int reference(const pk_problem_call *call) {
    const size_t M = (size_t)call->dims[0];
    PkMoeExpert ex = {};
    ex.wg = in(call, 3), ex.bg = in(call, 4), ex.wu = in(call, 5), ex.bu = in(call, 6);
    ex.wd = in(call, 7), ex.bd = in(call, 8);
    ex.ag = in(call, 9), ex.bgl = in(call, 10), ex.au = in(call, 11), ex.bul = in(call, 12);
    ex.ad = in(call, 13), ex.bdl = in(call, 14);
    ex.N = (int)call->dims[1], ex.I = (int)call->dims[2], ex.r = (int)call->dims[5];
    return pk_moe_ref_forward(&g_ref, call->ctx, in(call, 0), in(call, 1), in(call, 2), ex,
                              static_cast<bf16 *>(call->args[15]), M, (int)call->dims[3],
                              (int)call->dims[4]);
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    return pk_moe_design(ctx->stream, seed, key, ctx->rank, ctx->world_size, (int)call->dims[3],
                         (int)call->dims[4], static_cast<bf16 *>(call->args[0]),
                         static_cast<bf16 *>(call->args[1]), in(call, 2), (size_t)call->dims[0],
                         (size_t)call->dims[1]);
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    return pk_moe_ref_init(&g_ref);
}

static void fini(const pk_ctx *ctx) {
    pk_moe_ref_fini(&g_ref, ctx->comm);
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 16 || c->n_dims < 6)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, in(c, 0), in(c, 1), in(c, 2), in(c, 3), in(c, 4), in(c, 5), in(c, 6), in(c, 7),
        in(c, 8), in(c, 9), in(c, 10), in(c, 11), in(c, 12), in(c, 13), in(c, 14),
        static_cast<bf16 *>(c->args[15]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (int)c->dims[3], (int)c->dims[4], (int)c->dims[5]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
