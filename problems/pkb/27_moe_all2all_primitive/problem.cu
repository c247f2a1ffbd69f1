// pkb/27_moe_all2all_primitive (ParallelKernelBench problem 27): a variable-size all-to-all
// (PyTorch's all_to_all_single with split sizes). Rank i holds M rows of N bf16 and sends its
// next input_split_sizes[j] rows, in order, to rank j; rank j writes the rows it receives from
// ranks 0, 1, ..., W - 1 one after another at the top of its output (output_split_sizes[s] rows
// from rank s). The output holds C rows (a capacity, as an MoE dispatch buffer has); the rows
// after the received ones are zero.
// Baseline: the split sizes copied to the host (a stream synchronisation, as PyTorch's
// .tolist()), a memset of the zero rows, the local rows copied, grouped ncclSend/ncclRecv.
#include "pk_problem_module.h"
#include "pk_splitmix.h"
#include "pk_splits.cuh"

#include <cuda_bf16.h>
#include <math.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const int64_t *, const int64_t *,
                        __nv_bfloat16 *, size_t, size_t, size_t);

static int64_t *g_host; // pinned: [0, W) input splits, [W, 2W) output splits

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const size_t M = (size_t)call->dims[0], N = (size_t)call->dims[1], C = (size_t)call->dims[2];
    const __nv_bfloat16 *x = static_cast<const __nv_bfloat16 *>(call->args[0]);
    __nv_bfloat16 *y = static_cast<__nv_bfloat16 *>(call->args[3]);
    int rc = cuda_code(cudaMemcpyAsync(g_host, call->args[1], W * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, ctx->stream));
    rc = rc ? rc
            : cuda_code(cudaMemcpyAsync(g_host + W, call->args[2], W * sizeof(int64_t),
                                        cudaMemcpyDeviceToHost, ctx->stream));
    rc = rc ? rc : cuda_code(cudaStreamSynchronize(ctx->stream));
    if (rc)
        return rc;
    size_t in_off[PK_MAX_RANKS + 1] = {0}, out_off[PK_MAX_RANKS + 1] = {0};
    for (int p = 0; p < W; p++) {
        if (g_host[p] < 0 || g_host[W + p] < 0)
            return 3000;
        in_off[p + 1] = in_off[p] + (size_t)g_host[p];
        out_off[p + 1] = out_off[p] + (size_t)g_host[W + p];
    }
    if (in_off[W] != M || out_off[W] > C || g_host[r] != g_host[W + r])
        return 3001; // inconsistent splits: not this problem's inputs
    const size_t row = N * sizeof(__nv_bfloat16), total = out_off[W];
    if (total < C)
        rc = cuda_code(cudaMemsetAsync(y + total * N, 0, (C - total) * row, ctx->stream));
    if (!rc && g_host[r] > 0)
        rc = cuda_code(cudaMemcpyAsync(y + out_off[r] * N, x + in_off[r] * N,
                                       (size_t)g_host[r] * row, cudaMemcpyDeviceToDevice,
                                       ctx->stream));
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int p = 0; p < W && !rc; p++) {
        if (p == r)
            continue;
        if (g_host[p] > 0)
            rc = nccl_code(ncclSend(x + in_off[p] * N, (size_t)g_host[p] * N, ncclBfloat16, p,
                                    ctx->comm, ctx->stream));
        if (!rc && g_host[W + p] > 0)
            rc = nccl_code(ncclRecv(y + out_off[p] * N, (size_t)g_host[W + p] * N, ncclBfloat16, p,
                                    ctx->comm, ctx->stream));
    }
    const int end = nccl_code(ncclGroupEnd());
    return rc ? rc : end;
}

// The split matrix of one call (pk_splits.cuh: every row sums to M, every column to at most
// C; the same on every rank, drawn from (seed, key) alone).
typedef PkSplits Splits;

__global__ void splits_kernel(Splits S, int rank, int W, int64_t *in, int64_t *out) {
    const int j = threadIdx.x;
    if (j < W) {
        in[j] = S.s[rank][j];
        out[j] = S.s[j][rank];
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    Splits S;
    pk_splits_make(seed, 0x61326100ULL, key, ctx->world_size, call->dims[0], call->dims[2], &S);
    splits_kernel<<<1, 32, 0, ctx->stream>>>(S, ctx->rank, ctx->world_size,
                                             static_cast<int64_t *>(call->args[1]),
                                             static_cast<int64_t *>(call->args[2]));
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static int init(const pk_ctx *ctx) {
    return cudaMallocHost(&g_host, 2 * PK_MAX_RANKS * sizeof(int64_t)) == cudaSuccess ? 0 : 2001;
}

static void fini(const pk_ctx *ctx) {
    cudaFreeHost(g_host);
    g_host = NULL;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const int64_t *>(c->args[1]), static_cast<const int64_t *>(c->args[2]),
        static_cast<__nv_bfloat16 *>(c->args[3]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
