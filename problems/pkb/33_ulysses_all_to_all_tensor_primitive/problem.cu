// pkb/33_ulysses_all_to_all_tensor_primitive (ParallelKernelBench problem 33): DeepSpeed-
// Ulysses' all-to-all with scatter_dim = 0, gather_dim = 1. Rank r holds x (M, N); chunk j of
// it (rows [j*Mw, (j+1)*Mw), Mw = M / W) goes to rank j, and every rank concatenates what it
// receives along the columns:
//   y[i, j*N + c] = x_j[r*Mw + i, c]        y: (Mw, W*N)
#include "pk_problem_module.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, __nv_bfloat16 *, size_t, size_t);

#define THREADS 256

// The chunks received from the other ranks, (W, Mw, N): ncclMemAlloc'ed and registered as an
// NCCL window, as the harness makes its own reference outputs (host-driven ncclSend/ncclRecv
// between the windowed arena and plain cudaMalloc memory hangs in NCCL 2.28.3: docs/problems.md,
// known issues). Made in the first reference call (init() does not know the dims), an untimed
// correctness trial that every rank makes: registration is collective.
static struct {
    void *ptr;
    size_t bytes;
    ncclWindow_t win;
} g_work;

struct Sources {
    const uint4 *chunk[PK_MAX_RANKS]; // chunk j: received from rank j (x's own chunk for j = r)
};

// torch.cat(chunks, dim=1): W chunks of (Mw, row_vecs) -> (Mw, W*row_vecs), 16-byte vectors.
__global__ void __launch_bounds__(THREADS)
    column_concat(Sources s, uint4 *y, int world, size_t Mw, size_t row_vecs) {
    const size_t n = Mw * (size_t)world * row_vecs, stride = (size_t)gridDim.x * THREADS;
    for (size_t o = (size_t)blockIdx.x * THREADS + threadIdx.x; o < n; o += stride) {
        const size_t v = o % row_vecs, j = (o / row_vecs) % (size_t)world,
                     i = o / row_vecs / (size_t)world;
        y[o] = s.chunk[j][i * row_vecs + v];
    }
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static void work_free(const pk_ctx *ctx) {
    if (g_work.ptr) {
        ncclCommWindowDeregister(ctx->comm, g_work.win);
        ncclMemFree(g_work.ptr);
    }
    g_work.ptr = NULL;
    g_work.bytes = 0;
}

static int work_reserve(const pk_ctx *ctx, size_t bytes) {
    if (g_work.bytes >= bytes)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    work_free(ctx);
    int rc = nccl_code(ncclMemAlloc(&g_work.ptr, bytes));
    if (!rc)
        rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_work.ptr, bytes, &g_work.win,
                                              NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        g_work.bytes = bytes;
    return rc;
}

// Baseline: PKB's all_to_all as host-driven NCCL send/recv of the W - 1 remote chunks (one
// group), then the concatenation along dim 1 as one permute kernel.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0], N = (size_t)call->dims[1];
    const int world = ctx->world_size, rank = ctx->rank;
    const size_t chunk = M / (size_t)world * N; // elements
    int rc = work_reserve(ctx, (size_t)world * chunk * sizeof(__nv_bfloat16));
    if (rc)
        return rc;
    const __nv_bfloat16 *x = static_cast<const __nv_bfloat16 *>(call->args[0]);
    __nv_bfloat16 *work = static_cast<__nv_bfloat16 *>(g_work.ptr);
    rc = nccl_code(ncclGroupStart());
    for (int p = 0; p < world && !rc; p++) {
        if (p == rank)
            continue;
        rc = nccl_code(
            ncclSend(x + (size_t)p * chunk, chunk, ncclBfloat16, p, ctx->comm, ctx->stream));
        if (!rc)
            rc = nccl_code(
                ncclRecv(work + (size_t)p * chunk, chunk, ncclBfloat16, p, ctx->comm, ctx->stream));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    Sources s = {};
    for (int j = 0; j < world; j++)
        s.chunk[j] = reinterpret_cast<const uint4 *>(j == rank ? x + (size_t)rank * chunk
                                                               : work + (size_t)j * chunk);
    column_concat<<<4 * 132, THREADS, 0, ctx->stream>>>(s, static_cast<uint4 *>(call->args[1]),
                                                        world, M / (size_t)world, N / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static void fini(const pk_ctx *ctx) {
    work_free(ctx);
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
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
