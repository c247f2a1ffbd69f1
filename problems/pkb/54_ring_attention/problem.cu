// pkb/54_ring_attention: ParallelKernelBench problem 54 (reference/54_ring_attention.py), causal
// ring attention (context parallel). The sequence of T positions is split into W contiguous
// shards of S = T / W; rank r holds q, k, v of its shard (B, S, H, D), bf16, and must produce
//   out[b, i, h, :] = sum_{j <= r*S + i} softmax_j(scale * q[b, i, h, :] . K[b, j, h, :]) V[b, j,
//   h, :]
// over the global keys K, V (every rank's k, v in rank order): causal attention of its queries
// to every earlier position, PKB's (causal=True) ring: W - 1 steps that pass k, v to rank r + 1,
// rank r attends to the blocks of ranks r, r-1, ..., 0 and merges the partial results (fp32
// output and logsumexp), the final output rounded to bf16.
#include "pk_problem_module.h"

#include <cuda_bf16.h>

#include "pk_attention.cuh"

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t, float);

// The ring's receive buffers, two (k, v) pairs of the shard's size: ncclMemAlloc'ed and
// registered as an NCCL window, as the harness makes its own reference outputs (host-driven
// ncclSend/ncclRecv between the windowed arena and plain cudaMalloc memory hangs in NCCL 2.28.3:
// docs/problems.md, known issues). The running fp32 output and logsumexp are plain cudaMalloc.
// Made in the first reference call (init() does not know the dims), an untimed correctness
// trial that every rank makes: registration is collective.
static struct {
    void *ptr;
    size_t bytes;
    ncclWindow_t win;
    float *acc; // (B, S, H, D) fp32, then (B, S, H) lse
    size_t acc_bytes;
} g_work;

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static void work_free(const pk_ctx *ctx) {
    if (g_work.ptr) {
        ncclCommWindowDeregister(ctx->comm, g_work.win);
        ncclMemFree(g_work.ptr);
    }
    cudaFree(g_work.acc);
    g_work.ptr = NULL;
    g_work.acc = NULL;
    g_work.bytes = g_work.acc_bytes = 0;
}

static int work_reserve(const pk_ctx *ctx, size_t bytes, size_t acc_bytes) {
    if (g_work.bytes >= bytes && g_work.acc_bytes >= acc_bytes)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    work_free(ctx);
    int rc = nccl_code(ncclMemAlloc(&g_work.ptr, bytes));
    if (!rc)
        rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_work.ptr, bytes, &g_work.win,
                                              NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g_work.acc, acc_bytes));
    if (!rc) {
        g_work.bytes = bytes;
        g_work.acc_bytes = acc_bytes;
    }
    return rc;
}

// Baseline: PKB's ring, one step after another (pk_attn_ring_forward of pk_attention.cuh). Step
// s: rank r attends to the block of rank r - s (if s <= r: causal) with the flash-style tile
// (bf16 tensor cores, fp32 online softmax, the score matrix never in memory; P split into two
// bf16 terms for the PV product, ~16 bits, since PKB's attention is fp32), merging into the
// running fp32 output and lse in the kernel's epilogue (the last block writes the bf16 output);
// then host-driven NCCL passes the current k, v to rank r + 1 and receives rank r - 1's (one
// group).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int B = (int)call->dims[0], H = (int)call->dims[2], S = (int)call->dims[4];
    const int world = ctx->world_size, rank = ctx->rank;
    const size_t n = (size_t)B * S * H * PK_ATTN_D; // elements of q, k, v, out on this rank
    int rc = work_reserve(ctx, 4 * n * sizeof(bf16), (n + (size_t)B * S * H) * sizeof(float));
    if (rc)
        return rc;
    PkAttnRing r = {};
    r.q = static_cast<const bf16 *>(call->args[0]);
    r.k = static_cast<const bf16 *>(call->args[1]);
    r.v = static_cast<const bf16 *>(call->args[2]);
    r.out = static_cast<bf16 *>(call->args[3]);
    r.B = B;
    r.S = S;
    r.H = H;
    r.causal = 1; // PKB's inputs pass causal=True
    r.scale = (float)call->params[0];
    r.comm = ctx->comm;
    r.rank = rank;
    r.world = world;
    r.ring = static_cast<bf16 *>(g_work.ptr);
    r.acc = g_work.acc;
    return pk_attn_ring_forward<PK_ATTN_P_SPLIT>(r, ctx->stream);
}

static void fini(const pk_ctx *ctx) {
    work_free(ctx);
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 5 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[4], (size_t)c->dims[2], (size_t)c->dims[3], (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
