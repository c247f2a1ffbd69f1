// pkb/38_ulysses_gather_seq_scatter_heads_qkv (ParallelKernelBench problem 38): DeepSpeed-
// Ulysses' all-to-all of a fused QKV projection, from a sequence split to a head split. Rank r
// holds qkv (B, S, 3 H D), its S positions of a W S-long sequence, viewed as (B, S, 3, H D)
// (q, k, v); it needs columns [r C, (r+1) C) (C = H D / W) of each of q, k and v, for the whole
// sequence, unpadded to Useq positions:
//   y[b, q*S + s, k, c] = qkv_q[b, s, k, r*C + c]     y: (B, Useq, 3 C), q*S + s < Useq
// Useq = unpadded_dim_size when it is non-zero and not a multiple of W (PKB's slice), else W S.
// Only y's first B Useq 3 C elements are output (check() below).
#include "pk_ulysses.cuh"

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, __nv_bfloat16 *, size_t, size_t,
                        size_t, size_t, size_t);

static PkUlyWork g_work; // send and receive chunks, (W, B S 3 C) each

// dims: B, S, H, D; params: unpadded_dim_size.
static long long used_len(const pk_problem_call *call) {
    return pk_uly_unpadded_len((long long)call->params[0], call->ctx->world_size, call->dims[1]);
}

static int reference(const pk_problem_call *call) {
    const size_t B = (size_t)call->dims[0], S = (size_t)call->dims[1], H = (size_t)call->dims[2],
                 D = (size_t)call->dims[3];
    return pk_uly_gather_seq_reference(call, &g_work, B, S, 3, H * D, used_len(call));
}

static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    const long long useq = used_len(want);
    if (arg != 1 || useq < 0)
        return -1;
    const size_t c = (size_t)want->dims[2] * (size_t)want->dims[3] / (size_t)want->ctx->world_size;
    return pk_uly_check_prefix(want, got, arg, (size_t)want->dims[0] * (size_t)useq * 3 * c, out);
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    return pk_uly_check_init();
}

static void fini(const pk_ctx *ctx) {
    pk_uly_work_free(ctx, &g_work);
    pk_uly_check_fini();
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 4 || c->n_params < 1 || c->params[0] < 0)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<__nv_bfloat16 *>(c->args[1]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (size_t)c->dims[3], (size_t)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, check};
    return &module;
}
