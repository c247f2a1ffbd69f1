// pkb/84_vocab_parallel_log_prob_topk_chunked_backward (ParallelKernelBench 84): the gradient of
// the filtered log-softmax of 83 with respect to the vocab-parallel logits. Rank r holds the
// logits of all T = batch*seq tokens for vocabulary entries [r*vl, (r+1)*vl). Per chunk of
// batch*chunk consecutive tokens: an all-to-all gives rank r the chunk's tokens
// [start + r*lt, start + (r+1)*lt) with the whole vocabulary; each row is filtered as PKB's
// _apply_top_k_top_p (stable ascending sort, keep >= the k-th largest, bf16 softmax, bf16
// cumulative sum, keep where it exceeds 1 - top_p, last position always kept), p = fp32
// softmax of the filtered row, and the gradient row is
//   g[v] = ((v == target ? 1 : 0) - p[v]) * grad_output[t] * keep[v]      (fp32, PKB's op order)
// which a second all-to-all returns to the vocabulary owners: rank r ends with its slice
// g[t, r*vl:(r+1)*vl] of every token. The outputs are not unique (ties at the cut, cumulative
// sums within rounding of the threshold), so check() accepts every admissible kept set.
#include "pk_ref_vocab_topk.cuh"

// 84's output: rank r holds its vocabulary slice of every token's gradient row. Per token, the
// slice must match one admissible kept set entirely (grad_ok per element).
__global__ void compare_grad(const float *got, const float *want, const __nv_bfloat16 *logits,
                             const float *desc, long long tokens, int vl, int rank, CheckAcc *acc) {
    const int lane = threadIdx.x % 32;
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long t = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; t < tokens;
         t += warps) {
        const float *d = desc + t * DESC_STRIDE;
        const int n = (int)d[0], tgt = (int)d[2];
        const float mx = d[1], go = d[3];
        const float *g = got + t * vl;
        const __nv_bfloat16 *x = logits + t * vl;
        bool ok = false;
        for (int i = 0; i < n && !ok; i++) {
            bool all = true;
            for (int e = lane; e < vl; e += 32)
                all &= grad_ok(g[e], __bfloat162float(x[e]), rank * vl + e, tgt, go, mx,
                               d[5 + 3 * i], d[6 + 3 * i], d[7 + 3 * i]);
            ok = __all_sync(0xffffffffu, all);
        }
        int first_bad = vl;
        for (int e = lane; e < vl; e += 32) {
            note_error(acc, g[e], want[t * vl + e]);
            if (!ok && first_bad == vl &&
                !grad_ok(g[e], __bfloat162float(x[e]), rank * vl + e, tgt, go, mx, d[5], d[6],
                         d[7]))
                first_bad = e;
        }
        for (int o = 16; o > 0; o >>= 1)
            first_bad = min(first_bad, __shfl_xor_sync(0xffffffffu, first_bad, o));
        if (!ok && lane == 0)
            atomicMin(&acc->bad, (unsigned long long)(t * vl + (first_bad < vl ? first_bad : 0)));
    }
}

// Baseline, PKB's loop over chunks of batch*chunk consecutive tokens: the vp->seq all-to-all
// (bf16), the per-token filter and gradient kernel (written in the (rank, token, vocab slice)
// order of the way back), the seq->vp all-to-all (fp32) straight into this rank's rows of the
// output. One after another, no overlap.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size;
    const long long tokens = call->dims[0] * call->dims[1];
    const long long chunk_tokens = call->dims[0] * call->dims[3];
    const int vl = (int)(call->dims[2] / world);
    const FilterParams f = filter_params(call->params[0], call->params[1], vl * world);
    const __nv_bfloat16 *logits = static_cast<const __nv_bfloat16 *>(call->args[0]);
    const int64_t *target = static_cast<const int64_t *>(call->args[1]);
    const __nv_bfloat16 *go = static_cast<const __nv_bfloat16 *>(call->args[2]);
    float *out = static_cast<float *>(call->args[3]);
    const long long most = chunk_tokens < tokens ? chunk_tokens : tokens;
    const size_t rows_bytes = (size_t)most * vl * sizeof(__nv_bfloat16);
    int rc = window_reserve(ctx, &g_ref, rows_bytes + (size_t)most * vl * sizeof(float));
    if (rc)
        return rc;
    __nv_bfloat16 *rows = static_cast<__nv_bfloat16 *>(g_ref.ptr);
    float *grads = reinterpret_cast<float *>(static_cast<char *>(g_ref.ptr) + rows_bytes);
    for (long long start = 0; start < tokens && !rc; start += chunk_tokens) {
        const long long cur = tokens - start < chunk_tokens ? tokens - start : chunk_tokens;
        const long long lt = cur / world;
        rc = all_to_all(ctx, logits + start * vl, rows, (size_t)lt * vl, sizeof(__nv_bfloat16),
                        ncclBfloat16);
        if (!rc)
            rc = launch_tokens<MODE_GRAD>(ctx->stream, rows, (int)lt, vl, world,
                                          start + ctx->rank * lt, target, go, f, chunk_tokens,
                                          tokens, grads);
        if (!rc)
            rc = all_to_all(ctx, grads, out + start * vl, (size_t)lt * vl, sizeof(float),
                            ncclFloat32);
    }
    return rc;
}

static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    if (arg != 3)
        return -1;
    const float *all = NULL;
    CheckAcc *acc = NULL;
    int rc = check_descriptors(got, got->dims[0] * got->dims[3], &all, &acc);
    if (rc)
        return rc;
    const long long tokens = got->dims[0] * got->dims[1];
    const int vl = (int)(got->dims[2] / got->ctx->world_size);
    compare_grad<<<1024, 256, 0, got->ctx->stream>>>(
        static_cast<const float *>(got->args[3]), static_cast<const float *>(want->args[3]),
        static_cast<const __nv_bfloat16 *>(got->args[0]), all, tokens, vl, got->ctx->rank, acc);
    rc = cuda_code(cudaGetLastError());
    return rc ? rc : check_report(want, got, arg, acc, out);
}

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const int64_t *,
                        const __nv_bfloat16 *, float *, size_t, size_t, size_t, size_t, int,
                        double);

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 4 || c->n_params < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const int64_t *>(c->args[1]), static_cast<const __nv_bfloat16 *>(c->args[2]),
        static_cast<float *>(c->args[3]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (size_t)c->dims[3], (int)c->params[0], c->params[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, check};
    return &module;
}
