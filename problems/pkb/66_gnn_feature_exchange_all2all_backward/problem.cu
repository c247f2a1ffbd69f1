// pkb/66_gnn_feature_exchange_all2all_backward (ParallelKernelBench problem 66): the backward of
// pkb/65's feature exchange. The gradients of the rows a rank received in the forward go back
// to the ranks that sent them, in variable-size chunks, and each owner adds them up by node:
// a row requested k times gets the sum of its k gradients (a scatter-add, PKB's sparse.mm of a
// one-hot COO matrix). Rank r holds grad_output (an O x D fp32 capacity; its first
// sum(counts_sent_r) rows are the gradients of pkb/65's output, the rest unused),
// seed_inverse_ids (T indices into [0, F)), counts_sent and counts_received (W counts each), in
// PKB's names and rotation (its _shift): chunk k of grad_output (counts_sent_r[k] rows) goes to
// rank (r + k) % W, chunk k of the received rows (counts_received_r[k]) comes from it.
//   recv_r[in_off_r[k] + i]   = grad_output_p[out_off_p[(r - p) % W] + i],  p = (r + k) % W,
//                               i < counts_received_r[k]
//   grad_features_r[f]        = sum over i < T with seed_inverse_ids_r[i] == f of recv_r[i]
// with in_off / out_off the exclusive prefix sums of counts_received / counts_sent. The counts
// are consistent: counts_sent_p[(r - p) % W] == counts_received_r[(p - r) % W], counts_received
// sums to T, counts_sent to at most O (problems/include/pk_splits.cuh).
#include "pk_problem_module.h"
#include "pk_splitmix.h"
#include "pk_splits.cuh"

typedef int (*entry_fn)(const pk_ctx *, const float *, const int64_t *, const int64_t *,
                        const int64_t *, float *, size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// The reference's received rows (ncclMemAlloc'ed and registered as an NCCL window: NCCL 2.28
// can hang between registered and plain memory, docs/problems.md, known issues), made in the
// first reference call (a correctness trial: registration is collective), and the pinned host
// copy of the counts ([0, W) counts_sent, [W, 2W) counts_received).
static struct {
    float *recv;
    size_t bytes;
    ncclWindow_t win;
    int64_t *host;
} g_ref;

static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_ref.host)
        return 0;
    return cuda_code(cudaMallocHost((void **)&g_ref.host, 2 * PK_MAX_RANKS * sizeof(int64_t)));
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.recv) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.recv);
    }
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    g_ref = {};
}

// grad[ids[i]] += recv[i] (PyTorch's index_add_ / sparse.mm scatter): a thread per 4 floats of
// a row, 16-byte loads, fp32 atomics (the order of the adds to one row is not fixed).
__global__ void scatter_add_rows(const float4 *recv, const int64_t *ids, float *grad, long long T,
                                 long long F, long long vecs) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < T * vecs;
         e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / vecs, v = e % vecs;
        long long id = ids[i];
        id = id < 0 ? 0 : id >= F ? F - 1 : id; // the generator writes only valid ids
        const float4 x = recv[e];
        float *g = grad + (id * vecs + v) * 4;
        atomicAdd(g, x.x);
        atomicAdd(g + 1, x.y);
        atomicAdd(g + 2, x.z);
        atomicAdd(g + 3, x.w);
    }
}

// Baseline, PKB's steps: the counts copied to the host and a stream synchronisation (PKB's
// counts are Python lists), one group of NCCL send/recv (PKB's dist.all_to_all of the shifted
// chunk lists: grad_output's chunk k to rank (r + k) % W, the received chunk k from it; this
// rank's own chunk, k = 0, by a device copy) into a buffer of T rows, then the scatter-add into
// the zeroed grad_features. No overlap.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long F = call->dims[0], D = call->dims[1], T = call->dims[2], O = call->dims[3];
    const float *gout = static_cast<const float *>(call->args[0]);
    const int64_t *ids = static_cast<const int64_t *>(call->args[1]);
    float *grad = static_cast<float *>(call->args[4]);
    cudaStream_t s = ctx->stream;
    if (D % 4 != 0)
        return 3002;
    int rc = init(ctx);
    const size_t bytes = (size_t)(T * D) * sizeof(float);
    if (!rc && g_ref.bytes < bytes) {
        if (g_ref.recv) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.recv);
            g_ref.recv = NULL;
            g_ref.bytes = 0;
        }
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.recv, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.recv, bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.bytes = bytes;
    }
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_ref.host, call->args[2], W * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_ref.host + W, call->args[3], W * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    const int64_t *sent = g_ref.host, *recvd = g_ref.host + W;
    long long in_off[PK_MAX_RANKS + 1] = {0}, out_off[PK_MAX_RANKS + 1] = {0};
    for (int k = 0; k < W; k++) {
        if (sent[k] < 0 || recvd[k] < 0)
            return 3000;
        in_off[k + 1] = in_off[k] + recvd[k];
        out_off[k + 1] = out_off[k] + sent[k];
    }
    if (in_off[W] != T || out_off[W] > O || sent[0] != recvd[0])
        return 3001; // inconsistent counts: not this problem's inputs
    const size_t row = (size_t)D * sizeof(float);
    rc = cuda_code(cudaMemsetAsync(grad, 0, (size_t)F * row, s));
    if (!rc && recvd[0] > 0)
        rc = cuda_code(
            cudaMemcpyAsync(g_ref.recv, gout, (size_t)recvd[0] * row, cudaMemcpyDeviceToDevice, s));
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int k = 1; k < W && !rc; k++) {
        const int q = (r + k) % W;
        if (sent[k] > 0)
            rc = nccl_code(ncclSend(gout + out_off[k] * D, (size_t)(sent[k] * D), ncclFloat32, q,
                                    ctx->comm, s));
        if (!rc && recvd[k] > 0)
            rc = nccl_code(ncclRecv(g_ref.recv + in_off[k] * D, (size_t)(recvd[k] * D), ncclFloat32,
                                    q, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    scatter_add_rows<<<8 * 132, 256, 0, s>>>(reinterpret_cast<const float4 *>(g_ref.recv), ids,
                                             grad, T, F, D / 4);
    return cuda_code(cudaGetLastError());
}

// Rank r's counts in PKB's rotated order, from the split matrix S of pkb/65's forward (S[i][j]:
// rows rank i gathered for rank j, so the gradients rank j sends back to rank i):
// counts_received[k] = S[r][(r + k) % W] (sums to T), counts_sent[k] = S[(r + k) % W][r].
__global__ void counts_kernel(PkSplits S, int r, int W, int64_t *sent, int64_t *recvd) {
    const int k = threadIdx.x;
    if (k < W) {
        recvd[k] = S.s[r][(r + k) % W];
        sent[k] = S.s[(r + k) % W][r];
    }
}

// seed_inverse_ids by degree mode (uniform, power law, four hubs; pk_skewed_id): a hub's
// gradient is the sum of thousands of rows.
__global__ void ids_kernel(uint64_t base, int mode, long long F, long long T, int64_t *ids) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < T;
         i += (long long)gridDim.x * blockDim.x)
        ids[i] = pk_skewed_id(pk_splitmix64(base + (uint64_t)i), mode, F);
}

// The counts from pk_splits_make(seed, salt 0x66326100, key) (rows sum to T, columns to at most
// O: balanced, skewed with zeros, a hot receiver, mostly local by key % 4), the ids by key % 3,
// per rank, from (seed, key, rank, index). grad_output's rows beyond sum(counts_sent) keep the
// generic generator's values: they must not be read into the result.
static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const long long F = call->dims[0], T = call->dims[2], O = call->dims[3];
    PkSplits S;
    pk_splits_make(seed, 0x66326100ULL, key, ctx->world_size, T, O, &S);
    counts_kernel<<<1, 32, 0, ctx->stream>>>(S, ctx->rank, ctx->world_size,
                                             static_cast<int64_t *>(call->args[2]),
                                             static_cast<int64_t *>(call->args[3]));
    const uint64_t base = pk_splitmix64(
        seed ^ pk_splitmix64(0x66696400ULL ^ ((uint64_t)(unsigned)key << 8) ^ (uint64_t)ctx->rank));
    ids_kernel<<<264, 256, 0, ctx->stream>>>(base, pk_degree_mode(key), F, T,
                                             static_cast<int64_t *>(call->args[1]));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 5 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const float *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<const int64_t *>(c->args[3]),
        static_cast<float *>(c->args[4]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
