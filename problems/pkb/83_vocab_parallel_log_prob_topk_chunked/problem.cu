// pkb/83_vocab_parallel_log_prob_topk_chunked (ParallelKernelBench 83): problem 82 processed in
// chunks of batch*chunk consecutive flattened tokens. Rank r holds the logits of all
// T = batch*seq tokens for vocabulary entries [r*vl, (r+1)*vl). For each chunk [start, end):
// an all-to-all gives rank r the chunk's tokens [start + r*lt, start + (r+1)*lt) (lt = (end -
// start)/W) with the whole vocabulary; each row is filtered with top-k then top-p as PKB's
// _apply_top_k_top_p (stable ascending sort, keep >= the k-th largest, bf16 softmax, bf16
// cumulative sum, keep where it exceeds 1 - top_p, last position always kept); the fp32
// log-softmax of the filtered row is taken at the target (-inf if filtered out) and
// all-gathered into out[start..end). Every rank ends with all T log-probs: the same function
// of each token as 82, except that the bf16 cumulative sum's rounding follows the chunk's row
// count (PyTorch's scan picks its tile width from it).
// The outputs are not unique (ties at the cut, cumulative sums within rounding of the
// threshold), so check() accepts the log-prob of every admissible kept set.
#include "pk_ref_vocab_topk.cuh"

// 82/83's output: every rank's out[t] must be the log-prob of one admissible kept set.
__global__ void compare_logprob(const float *got, const float *want, const float *desc,
                                long long tokens, CheckAcc *acc) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < tokens;
         t += (long long)gridDim.x * blockDim.x) {
        const float g = got[t];
        const bool ok = logprob_ok(desc + t * DESC_STRIDE, g);
        note_error(acc, g, want[t]);
        if (!ok)
            atomicMin(&acc->bad, (unsigned long long)t);
    }
}

// Baseline, PKB's loop over chunks of `chunk_tokens` consecutive tokens (82: one chunk): the
// vp->seq all-to-all (grouped send/recv), the per-token filter and log-softmax kernel, an
// all-gather of the fp32 log-probs into out[start..]. One after another, no overlap.
static int run_reference(const pk_problem_call *call, long long chunk_tokens) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size;
    const long long tokens = call->dims[0] * call->dims[1];
    const int vl = (int)(call->dims[2] / world);
    const FilterParams f = filter_params(call->params[0], call->params[1], vl * world);
    const __nv_bfloat16 *logits = static_cast<const __nv_bfloat16 *>(call->args[0]);
    const int64_t *target = static_cast<const int64_t *>(call->args[1]);
    float *out = static_cast<float *>(call->args[2]);
    const long long most = chunk_tokens < tokens ? chunk_tokens : tokens;
    const size_t rows_bytes = (size_t)most * vl * sizeof(__nv_bfloat16);
    int rc = window_reserve(ctx, &g_ref, rows_bytes + (size_t)most * sizeof(float));
    if (rc)
        return rc;
    __nv_bfloat16 *rows = static_cast<__nv_bfloat16 *>(g_ref.ptr);
    float *lp = reinterpret_cast<float *>(static_cast<char *>(g_ref.ptr) + rows_bytes);
    for (long long start = 0; start < tokens && !rc; start += chunk_tokens) {
        const long long cur = tokens - start < chunk_tokens ? tokens - start : chunk_tokens;
        const long long lt = cur / world;
        rc = all_to_all(ctx, logits + start * vl, rows, (size_t)lt * vl, sizeof(__nv_bfloat16),
                        ncclBfloat16);
        if (!rc)
            rc = launch_tokens<MODE_LOGPROB>(ctx->stream, rows, (int)lt, vl, world,
                                             start + ctx->rank * lt, target, NULL, f, chunk_tokens,
                                             tokens, lp);
        if (!rc)
            rc = nccl_code(
                ncclAllGather(lp, out + start, (size_t)lt, ncclFloat32, ctx->comm, ctx->stream));
    }
    return rc;
}

static int run_check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                     long long chunk_tokens, pk_check_report *out) {
    if (arg != 2)
        return -1;
    const float *all = NULL;
    CheckAcc *acc = NULL;
    int rc = check_descriptors(got, chunk_tokens, &all, &acc);
    if (rc)
        return rc;
    const long long tokens = got->dims[0] * got->dims[1];
    compare_logprob<<<(unsigned)((tokens + 255) / 256), 256, 0, got->ctx->stream>>>(
        static_cast<const float *>(got->args[2]), static_cast<const float *>(want->args[2]), all,
        tokens, acc);
    rc = cuda_code(cudaGetLastError());
    return rc ? rc : check_report(want, got, arg, acc, out);
}

static int reference(const pk_problem_call *call) {
    return run_reference(call, call->dims[0] * call->dims[3]);
}

static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    return run_check(want, got, arg, got->dims[0] * got->dims[3], out);
}

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const int64_t *, float *, size_t,
                        size_t, size_t, size_t, int, double);

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 3 || c->n_dims < 4 || c->n_params < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                                          static_cast<const int64_t *>(c->args[1]),
                                          static_cast<float *>(c->args[2]), (size_t)c->dims[0],
                                          (size_t)c->dims[1], (size_t)c->dims[2],
                                          (size_t)c->dims[3], (int)c->params[0], c->params[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, check};
    return &module;
}
