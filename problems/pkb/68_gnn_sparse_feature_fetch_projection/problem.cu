// pkb/68_gnn_sparse_feature_fetch_projection (ParallelKernelBench problem 68): the feature fetch
// of distributed GNN inference: a node embedding table of N rows (E wide, bf16) is sharded over
// the W ranks in contiguous blocks of S = N / W rows (rank o holds rows [o S, (o + 1) S)). Every
// rank has Q query node ids; it fetches their rows from the owners and projects them with its
// own proj_matrix (E x O, bf16):
//   out_r[i] = bf16( table[ids_r[i]] @ proj_r )      table[g] = shard_o[g - o S], o = g / S
// (fp32 accumulation). PKB: a stable argsort of the owners, the counts, the ids and the rows by
// three all_to_all_single, the rows put back in query order, then emb @ proj_matrix.
#include "pk_problem_module.h"
#include "pk_splitmix.h"
#include "pk_splits.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cublas_v2.h>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const int64_t *, const bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 4000 + (int)s;
}

// This rank's cuBLAS handle and workspace (32 MiB, what PyTorch gives cuBLAS on Hopper), made
// once by init() outside timing; the reference's buffers, made in the first reference call (a
// correctness trial: window registration is collective) and grown with the dims. The NCCL
// buffers (sorted ids, received ids, fetched rows, gathered rows, the counts) are one
// ncclMemAlloc'ed block registered as a window (NCCL 2.28 can hang between registered and plain
// memory, docs/problems.md, known issues); the sort's and the projection's input are plain.
#define BLAS_WS_BYTES ((size_t)32 << 20)
static struct {
    cublasHandle_t blas;
    void *blas_ws;
    cudaStream_t blas_stream;
    char *nccl;
    size_t nccl_bytes;
    ncclWindow_t win;
    char *plain;
    size_t plain_bytes;
    int64_t *host; // pinned: [0, 8) send counts, [8, 16) receive counts
} g_ref;

static int blas_on(cudaStream_t stream) {
    if (g_ref.blas_stream == stream)
        return 0;
    int rc = blas_code(cublasSetStream(g_ref.blas, stream));
    if (!rc)
        rc = blas_code(cublasSetWorkspace(g_ref.blas, g_ref.blas_ws, BLAS_WS_BYTES));
    g_ref.blas_stream = rc ? NULL : stream;
    return rc;
}

static int init(const pk_ctx *ctx) {
    if (g_ref.blas)
        return 0;
    int rc = blas_code(cublasCreate(&g_ref.blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g_ref.blas_ws, BLAS_WS_BYTES));
    if (!rc)
        rc = cuda_code(cudaMallocHost((void **)&g_ref.host, 2 * PK_MAX_RANKS * sizeof(int64_t)));
    return rc ? rc : blas_on(ctx->stream);
}

static void release(const pk_ctx *ctx) {
    if (g_ref.nccl) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.nccl);
    }
    if (g_ref.plain)
        cudaFree(g_ref.plain);
    g_ref.nccl = g_ref.plain = NULL;
    g_ref.nccl_bytes = g_ref.plain_bytes = 0;
}

static void fini(const pk_ctx *ctx) {
    release(ctx);
    if (g_ref.blas)
        cublasDestroy(g_ref.blas);
    cudaFree(g_ref.blas_ws);
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    g_ref = {};
}

static size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}

// owner[i] = min(ids[i] / S, W - 1) (the sort key), pos[i] = i, and the send counts (PKB's
// scatter_add_ of ones), by shared-memory atomics.
__global__ void owners_kernel(const int64_t *ids, long long Q, long long S, int W,
                              unsigned char *owner, int *pos, int64_t *counts) {
    __shared__ unsigned long long cnt[PK_MAX_RANKS];
    if (threadIdx.x < PK_MAX_RANKS)
        cnt[threadIdx.x] = 0;
    __syncthreads();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < Q;
         i += (long long)gridDim.x * blockDim.x) {
        long long o = ids[i] / S;
        o = o < 0 ? 0 : o > W - 1 ? W - 1 : o;
        owner[i] = (unsigned char)o;
        pos[i] = (int)i;
        atomicAdd(&cnt[o], 1ULL);
    }
    __syncthreads();
    if (threadIdx.x < W && cnt[threadIdx.x])
        atomicAdd(reinterpret_cast<unsigned long long *>(counts) + threadIdx.x, cnt[threadIdx.x]);
}

__global__ void gather_ids(const int64_t *ids, const int *perm, int64_t *sorted, long long Q) {
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < Q;
         j += (long long)gridDim.x * blockDim.x)
        sorted[j] = ids[perm[j]];
}

// fetched[j] = shard[recv_ids[j] - r S] (PKB's local_embedding_shard[local_ids]), 16-byte rows.
__global__ void fetch_rows(const uint4 *shard, const int64_t *recv_ids, uint4 *fetched, long long n,
                           long long base, long long S, long long vecs) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n * vecs;
         e += (long long)gridDim.x * blockDim.x) {
        long long l = recv_ids[e / vecs] - base;
        l = l < 0 ? 0 : l >= S ? S - 1 : l; // the generator writes only this rank's rows
        fetched[e] = shard[l * vecs + e % vecs];
    }
}

// emb[perm[j]] = gathered[j] (PKB's gathered[argsort(sort_idx)]).
__global__ void unsort_rows(const uint4 *gathered, const int *perm, uint4 *emb, long long Q,
                            long long vecs) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < Q * vecs;
         e += (long long)gridDim.x * blockDim.x)
        emb[(long long)perm[e / vecs] * vecs + e % vecs] = gathered[e];
}

// Baseline, PKB's steps: owners and counts, the counts exchanged (NCCL), CUB's stable radix sort
// of the owners (PyTorch's argsort(stable=True)), the counts to the host and a synchronisation
// (PKB's .tolist()), the ids in sorted order, the ids exchanged (NCCL send/recv), the local rows
// fetched, the rows exchanged back, put back in query order, then the projection by cuBLAS
// (bf16 tensor cores, fp32 accumulation: torch's emb @ proj_matrix). No overlap.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long N = call->dims[0], E = call->dims[1], O = call->dims[2], Q = call->dims[3];
    const long long S = N / W, vecs = E / 8;
    const bf16 *shard = static_cast<const bf16 *>(call->args[0]);
    const int64_t *ids = static_cast<const int64_t *>(call->args[1]);
    const bf16 *proj = static_cast<const bf16 *>(call->args[2]);
    bf16 *out = static_cast<bf16 *>(call->args[3]);
    cudaStream_t s = ctx->stream;
    if (E % 8 != 0 || Q > 0x7fffffffLL)
        return 3002;
    int rc = init(ctx);
    if (!rc)
        rc = blas_on(s);
    // NCCL block: sorted ids (Q), received ids (W Q), fetched rows (W Q E), gathered rows (Q E),
    // counts (2 x PK_MAX_RANKS)
    const size_t row = (size_t)E * sizeof(bf16);
    const size_t o_rids = align256(8 * (size_t)Q), o_fet = o_rids + align256(8 * (size_t)(W * Q));
    const size_t o_gat = o_fet + align256((size_t)(W * Q) * row);
    const size_t o_cnt = o_gat + align256((size_t)Q * row);
    const size_t nccl_bytes = o_cnt + 2 * PK_MAX_RANKS * sizeof(int64_t);
    size_t tmp = 0;
    if (!rc)
        rc = cuda_code(cub::DeviceRadixSort::SortPairs(NULL, tmp, (unsigned char *)NULL,
                                                       (unsigned char *)NULL, (int *)NULL,
                                                       (int *)NULL, (int)Q, 0, 8, s));
    // plain block: keys in/out, values in/out, the embeddings in query order (Q E), CUB's temporary
    const size_t o_kout = align256((size_t)Q), o_vin = o_kout + align256((size_t)Q);
    const size_t o_vout = o_vin + align256(4 * (size_t)Q), o_emb = o_vout + align256(4 * (size_t)Q);
    const size_t o_tmp = o_emb + align256((size_t)Q * row), plain_bytes = o_tmp + tmp;
    if (!rc && (g_ref.nccl_bytes < nccl_bytes || g_ref.plain_bytes < plain_bytes)) {
        release(ctx);
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.nccl, nccl_bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.nccl, nccl_bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.nccl_bytes = nccl_bytes;
        if (!rc)
            rc = cuda_code(cudaMalloc((void **)&g_ref.plain, plain_bytes));
        if (!rc)
            g_ref.plain_bytes = plain_bytes;
    }
    if (rc)
        return rc;
    int64_t *sorted = reinterpret_cast<int64_t *>(g_ref.nccl);
    int64_t *rids = reinterpret_cast<int64_t *>(g_ref.nccl + o_rids);
    bf16 *fet = reinterpret_cast<bf16 *>(g_ref.nccl + o_fet);
    bf16 *gat = reinterpret_cast<bf16 *>(g_ref.nccl + o_gat);
    int64_t *scnt = reinterpret_cast<int64_t *>(g_ref.nccl + o_cnt), *rcnt = scnt + PK_MAX_RANKS;
    unsigned char *kin = reinterpret_cast<unsigned char *>(g_ref.plain);
    unsigned char *kout = reinterpret_cast<unsigned char *>(g_ref.plain + o_kout);
    int *vin = reinterpret_cast<int *>(g_ref.plain + o_vin);
    int *perm = reinterpret_cast<int *>(g_ref.plain + o_vout);
    bf16 *emb = reinterpret_cast<bf16 *>(g_ref.plain + o_emb);
    int bits = 1;
    while ((1 << bits) < W)
        bits++;
    rc = cuda_code(cudaMemsetAsync(scnt, 0, PK_MAX_RANKS * sizeof(int64_t), s));
    if (!rc) {
        owners_kernel<<<264, 256, 0, s>>>(ids, Q, S, W, kin, vin, scnt);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc) { // the counts: every rank sends its count for q to q
        rc = nccl_code(ncclGroupStart());
        for (int q = 0; q < W && !rc; q++) {
            rc = nccl_code(ncclSend(scnt + q, 1, ncclInt64, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(rcnt + q, 1, ncclInt64, q, ctx->comm, s));
        }
        const int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
    }
    if (!rc)
        rc = cuda_code(cub::DeviceRadixSort::SortPairs(g_ref.plain + o_tmp, tmp, kin, kout, vin,
                                                       perm, (int)Q, 0, bits, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_ref.host, scnt, 2 * PK_MAX_RANKS * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    const int64_t *sent = g_ref.host, *recvd = g_ref.host + PK_MAX_RANKS;
    long long so[PK_MAX_RANKS + 1] = {0}, ro[PK_MAX_RANKS + 1] = {0};
    for (int q = 0; q < W; q++) {
        if (sent[q] < 0 || recvd[q] < 0)
            return 3000;
        so[q + 1] = so[q] + sent[q];
        ro[q + 1] = ro[q] + recvd[q];
    }
    if (so[W] != Q || ro[W] > W * Q)
        return 3001;
    gather_ids<<<264, 256, 0, s>>>(ids, perm, sorted, Q);
    rc = cuda_code(cudaGetLastError());
    // the ids: to each owner; ours by a device copy
    if (!rc && sent[r] > 0)
        rc = cuda_code(cudaMemcpyAsync(rids + ro[r], sorted + so[r], sent[r] * sizeof(int64_t),
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc) {
        rc = nccl_code(ncclGroupStart());
        for (int k = 1; k < W && !rc; k++) {
            const int q = (r + k) % W;
            if (sent[q] > 0)
                rc = nccl_code(
                    ncclSend(sorted + so[q], (size_t)sent[q], ncclInt64, q, ctx->comm, s));
            if (!rc && recvd[q] > 0)
                rc =
                    nccl_code(ncclRecv(rids + ro[q], (size_t)recvd[q], ncclInt64, q, ctx->comm, s));
        }
        const int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
    }
    if (!rc && ro[W] > 0) {
        fetch_rows<<<4 * 132, 256, 0, s>>>(reinterpret_cast<const uint4 *>(shard), rids,
                                           reinterpret_cast<uint4 *>(fet), ro[W], r * S, S, vecs);
        rc = cuda_code(cudaGetLastError());
    }
    // the rows back: what we fetched for q (recvd[q] rows) to q, ours by a device copy
    if (!rc && sent[r] > 0)
        rc = cuda_code(cudaMemcpyAsync(gat + so[r] * E, fet + ro[r] * E, (size_t)sent[r] * row,
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc) {
        rc = nccl_code(ncclGroupStart());
        for (int k = 1; k < W && !rc; k++) {
            const int q = (r + k) % W;
            if (recvd[q] > 0)
                rc = nccl_code(ncclSend(fet + ro[q] * E, (size_t)(recvd[q] * E), ncclBfloat16, q,
                                        ctx->comm, s));
            if (!rc && sent[q] > 0)
                rc = nccl_code(ncclRecv(gat + so[q] * E, (size_t)(sent[q] * E), ncclBfloat16, q,
                                        ctx->comm, s));
        }
        const int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
    }
    if (rc)
        return rc;
    unsort_rows<<<4 * 132, 256, 0, s>>>(reinterpret_cast<const uint4 *>(gat), perm,
                                        reinterpret_cast<uint4 *>(emb), Q, vecs);
    rc = cuda_code(cudaGetLastError());
    // row-major out[Q x O] = emb[Q x E] proj[E x O]: column-major out^T = proj^T emb^T
    const float one = 1.f, zero = 0.f;
    if (!rc)
        rc = blas_code(cublasGemmEx(g_ref.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)O, (int)Q, (int)E,
                                    &one, proj, CUDA_R_16BF, (int)O, emb, CUDA_R_16BF, (int)E,
                                    &zero, out, CUDA_R_16BF, (int)O, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    return rc;
}

// input_node_ids of one call, per rank (rank r's query i). PKB's (key % 12 == 0): owner
// (i + r) % W, row (7 i + r) % S. Otherwise the owners follow a split matrix from pk_splits_make
// (salt 0x68326100; balanced, skewed with zeros, one hot owner that serves most queries, mostly
// the querier's own shard, by key % 4) laid over the queries by an affine permutation, and the
// row within the owner's shard by key % 3: PKB's (7 i + r) % S, power law (pk_skewed_id: a few
// hot rows), or the shards' edges (half of the queries at row 0 or S - 1 of a shard drawn
// uniformly, whatever the split: an owner computed one row off lands in the neighbouring shard;
// the other half uniform in the split's owner).
struct Owners {
    long long start[PK_MAX_RANKS + 1];
};

__global__ void ids_kernel(Owners o, int W, int r, int pkb, unsigned long long a,
                           unsigned long long b, uint64_t base, int mode, long long S, long long Q,
                           int64_t *ids) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < Q;
         i += (long long)gridDim.x * blockDim.x) {
        long long owner, row;
        if (pkb) {
            owner = (i + r) % W;
            row = (7 * i + r) % S;
        } else {
            const long long p = (long long)(((unsigned __int128)a * (unsigned long long)i + b) %
                                            (unsigned long long)Q);
            int j = 0;
            while (j < W - 1 && p >= o.start[j + 1])
                j++;
            owner = j;
            const uint64_t h = pk_splitmix64(base + (uint64_t)i);
            if (mode == 0)
                row = (7 * i + r) % S;
            else if (mode == 1)
                row = pk_skewed_id(h, PK_DEGREE_POWER, S);
            else if (h & 1) { // a shard's edge, of any shard: the split's owner is overridden
                owner = (long long)(pk_splitmix64(h ^ 0x5ULL) % (uint64_t)W);
                row = (h >> 1) & 1 ? S - 1 : 0;
            } else {
                row = (long long)(pk_splitmix64(h) % (uint64_t)S);
            }
        }
        ids[i] = owner * S + row;
    }
}

static unsigned long long gcd(unsigned long long x, unsigned long long y) {
    while (y) {
        const unsigned long long t = x % y;
        x = y;
        y = t;
    }
    return x;
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long N = call->dims[0], Q = call->dims[3];
    PkSplits S;
    pk_splits_make(seed, 0x68326100ULL, key, W, Q, W * Q, &S);
    Owners o;
    o.start[0] = 0;
    for (int j = 0; j < W; j++)
        o.start[j + 1] = o.start[j] + S.s[r][j];
    const uint64_t base = pk_splitmix64(
        seed ^ pk_splitmix64(0x68696400ULL ^ ((uint64_t)(unsigned)key << 8) ^ (uint64_t)r));
    unsigned long long a = 1 + pk_splitmix64(base ^ 0xa) % (unsigned long long)Q;
    while (gcd(a, (unsigned long long)Q) != 1)
        a = a % (unsigned long long)Q + 1;
    const unsigned long long b = pk_splitmix64(base ^ 0xb) % (unsigned long long)Q;
    const int pkb = ((key % 12) + 12) % 12 == 0;
    ids_kernel<<<264, 256, 0, ctx->stream>>>(o, W, r, pkb, a, b, base, pk_degree_mode(key), N / W,
                                             Q, static_cast<int64_t *>(call->args[1]));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
