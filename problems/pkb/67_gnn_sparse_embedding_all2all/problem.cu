// pkb/67_gnn_sparse_embedding_all2all (ParallelKernelBench problem 67): the sparse embedding
// exchange of distributed GNN training: every rank holds nnz (node id, embedding row) pairs and
// sends each pair to the rank that owns its node, owner = idx % W. Rank r holds idx (nnz node
// ids in [0, N), int64) and value (nnz x D, bf16); it receives, from every rank q in rank order,
// q's pairs owned by r, in q's original order (PKB's stable argsort by owner, then
// all_to_all_single of the ids and of the rows):
//   recv_idx_r   = concat over q = 0 .. W-1 of [idx_q[i]   for i < nnz if idx_q[i] % W == r]
//   recv_value_r = concat over q = 0 .. W-1 of [value_q[i] for i < nnz if idx_q[i] % W == r]
//   recv_count_r = the number of pairs received; the capacities' rows beyond it are zero.
#include "pk_problem_module.h"
#include "pk_splitmix.h"
#include "pk_splits.cuh"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const int64_t *, const bf16 *, int64_t *, bf16 *, int64_t *,
                        size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// The reference's buffers, made in the first reference call (a correctness trial: window
// registration is collective) and grown when the dims grow. The NCCL buffers (the send-ordered
// ids and rows, the send and receive splits) are one ncclMemAlloc'ed block registered as a
// window (NCCL 2.28 can hang between registered and plain memory, docs/problems.md, known
// issues); the sort's keys, values and temporary storage are plain device memory.
static struct {
    char *nccl;
    size_t nccl_bytes;
    ncclWindow_t win;
    char *sort;
    size_t sort_bytes;
    int64_t *host; // pinned: [0, W) send splits, [W, 2W) receive splits, [2W] the total
} g_ref;

static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_ref.host)
        return 0;
    return cuda_code(
        cudaMallocHost((void **)&g_ref.host, (2 * PK_MAX_RANKS + 1) * sizeof(int64_t)));
}

static void release(const pk_ctx *ctx) {
    if (g_ref.nccl) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.nccl);
    }
    if (g_ref.sort)
        cudaFree(g_ref.sort);
    g_ref.nccl = g_ref.sort = NULL;
    g_ref.nccl_bytes = g_ref.sort_bytes = 0;
}

static void fini(const pk_ctx *ctx) {
    release(ctx);
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    g_ref = {};
}

static size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}

// owner[i] = idx[i] % W (the sort key), pos[i] = i (the value the sort carries), and the
// send splits (PKB's bincount of the owners).
__global__ void owners_kernel(const int64_t *idx, long long nnz, int W, unsigned char *owner,
                              int *pos, int64_t *splits) {
    __shared__ unsigned long long cnt[PK_MAX_RANKS];
    if (threadIdx.x < PK_MAX_RANKS)
        cnt[threadIdx.x] = 0;
    __syncthreads();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nnz;
         i += (long long)gridDim.x * blockDim.x) {
        long long o = idx[i] % W;
        o = o < 0 ? o + W : o;
        owner[i] = (unsigned char)o;
        pos[i] = (int)i;
        atomicAdd(&cnt[o], 1ULL);
    }
    __syncthreads();
    if (threadIdx.x < W && cnt[threadIdx.x])
        atomicAdd(reinterpret_cast<unsigned long long *>(splits) + threadIdx.x, cnt[threadIdx.x]);
}

// send_idx[j] = idx[perm[j]], send_value[j] = value[perm[j]] (rows of `vecs` 16-byte vectors).
__global__ void gather_kernel(const int64_t *idx, const uint4 *value, const int *perm,
                              int64_t *send_idx, uint4 *send_value, long long nnz, long long vecs) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < nnz * vecs;
         e += (long long)gridDim.x * blockDim.x) {
        const long long j = e / vecs, v = e % vecs, i = perm[j];
        send_value[e] = value[i * vecs + v];
        if (v == 0)
            send_idx[j] = idx[i];
    }
}

// Baseline, PKB's steps: owners and send splits (bincount), the splits exchanged (NCCL, PKB's
// first all_to_all_single), a stable radix sort of the owners (PKB's argsort(stable=True):
// CUB's, as PyTorch's), the splits to the host and a stream synchronisation (PKB's .tolist()),
// the gather into send order, the capacities' tails zeroed and the count written, then two NCCL
// groups of send/recv (PKB's two all_to_all_single: ids, then rows), this rank's own part by a
// device copy. No overlap.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long nnz = call->dims[1], D = call->dims[2], C = call->dims[3];
    const int64_t *idx = static_cast<const int64_t *>(call->args[0]);
    const bf16 *value = static_cast<const bf16 *>(call->args[1]);
    int64_t *ridx = static_cast<int64_t *>(call->args[2]);
    bf16 *rval = static_cast<bf16 *>(call->args[3]);
    int64_t *rcount = static_cast<int64_t *>(call->args[4]);
    cudaStream_t s = ctx->stream;
    if (D % 8 != 0 || nnz > 0x7fffffffLL)
        return 3002;
    int rc = init(ctx);
    // NCCL block: send_idx (8 nnz), send_value (2 nnz D), splits (2 x 8 PK_MAX_RANKS)
    const size_t o_val = align256(8 * (size_t)nnz), o_spl = o_val + align256(2 * (size_t)(nnz * D));
    const size_t nccl_bytes = o_spl + 2 * 8 * PK_MAX_RANKS;
    // sort block: keys in/out (nnz bytes each), values in/out (4 nnz each), CUB's temporary
    size_t tmp = 0;
    if (!rc)
        rc = cuda_code(cub::DeviceRadixSort::SortPairs(NULL, tmp, (unsigned char *)NULL,
                                                       (unsigned char *)NULL, (int *)NULL,
                                                       (int *)NULL, (int)nnz, 0, 8, s));
    const size_t o_kout = align256((size_t)nnz), o_vin = o_kout + align256((size_t)nnz);
    const size_t o_vout = o_vin + align256(4 * (size_t)nnz),
                 o_tmp = o_vout + align256(4 * (size_t)nnz);
    const size_t sort_bytes = o_tmp + tmp;
    if (!rc && (g_ref.nccl_bytes < nccl_bytes || g_ref.sort_bytes < sort_bytes)) {
        release(ctx);
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.nccl, nccl_bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.nccl, nccl_bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.nccl_bytes = nccl_bytes;
        if (!rc)
            rc = cuda_code(cudaMalloc((void **)&g_ref.sort, sort_bytes));
        if (!rc)
            g_ref.sort_bytes = sort_bytes;
    }
    if (rc)
        return rc;
    int64_t *send_idx = reinterpret_cast<int64_t *>(g_ref.nccl);
    bf16 *send_val = reinterpret_cast<bf16 *>(g_ref.nccl + o_val);
    int64_t *send_spl = reinterpret_cast<int64_t *>(g_ref.nccl + o_spl);
    int64_t *recv_spl = send_spl + PK_MAX_RANKS;
    unsigned char *kin = reinterpret_cast<unsigned char *>(g_ref.sort);
    unsigned char *kout = reinterpret_cast<unsigned char *>(g_ref.sort + o_kout);
    int *vin = reinterpret_cast<int *>(g_ref.sort + o_vin);
    int *perm = reinterpret_cast<int *>(g_ref.sort + o_vout);
    int bits = 0;
    while ((1 << bits) < W)
        bits++;
    rc = cuda_code(cudaMemsetAsync(send_spl, 0, W * sizeof(int64_t), s));
    if (!rc) {
        owners_kernel<<<264, 256, 0, s>>>(idx, nnz, W, kin, vin, send_spl);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc) { // the splits: every rank sends its count for q to q
        rc = nccl_code(ncclGroupStart());
        for (int q = 0; q < W && !rc; q++) {
            rc = nccl_code(ncclSend(send_spl + q, 1, ncclInt64, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(recv_spl + q, 1, ncclInt64, q, ctx->comm, s));
        }
        const int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
    }
    if (!rc)
        rc = cuda_code(cub::DeviceRadixSort::SortPairs(g_ref.sort + o_tmp, tmp, kin, kout, vin,
                                                       perm, (int)nnz, 0, bits > 0 ? bits : 1, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_ref.host, send_spl, 2 * PK_MAX_RANKS * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    const int64_t *sent = g_ref.host, *recvd = g_ref.host + PK_MAX_RANKS;
    long long in_off[PK_MAX_RANKS + 1] = {0}, out_off[PK_MAX_RANKS + 1] = {0};
    for (int q = 0; q < W; q++) {
        if (sent[q] < 0 || recvd[q] < 0)
            return 3000;
        in_off[q + 1] = in_off[q] + sent[q];
        out_off[q + 1] = out_off[q] + recvd[q];
    }
    const long long total = out_off[W];
    if (in_off[W] != nnz || total > C)
        return 3001; // more than the capacity: not this problem's inputs
    const long long vecs = D / 8;
    const size_t row = (size_t)D * sizeof(bf16);
    gather_kernel<<<4 * 132, 256, 0, s>>>(idx, reinterpret_cast<const uint4 *>(value), perm,
                                          send_idx, reinterpret_cast<uint4 *>(send_val), nnz, vecs);
    rc = cuda_code(cudaGetLastError());
    g_ref.host[2 * PK_MAX_RANKS] = total;
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(rcount, g_ref.host + 2 * PK_MAX_RANKS, sizeof(int64_t),
                                       cudaMemcpyHostToDevice, s));
    if (!rc && total < C)
        rc = cuda_code(cudaMemsetAsync(ridx + total, 0, (size_t)(C - total) * 8, s));
    if (!rc && total < C)
        rc = cuda_code(cudaMemsetAsync(rval + total * D, 0, (size_t)(C - total) * row, s));
    if (!rc && sent[r] > 0)
        rc = cuda_code(cudaMemcpyAsync(ridx + out_off[r], send_idx + in_off[r], sent[r] * 8,
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc && sent[r] > 0)
        rc = cuda_code(cudaMemcpyAsync(rval + out_off[r] * D, send_val + in_off[r] * D,
                                       (size_t)sent[r] * row, cudaMemcpyDeviceToDevice, s));
    for (int pass = 0; pass < 2 && !rc; pass++) { // PKB: the ids, then the rows
        rc = nccl_code(ncclGroupStart());
        for (int k = 1; k < W && !rc; k++) {
            const int q = (r + k) % W;
            if (sent[q] > 0)
                rc = nccl_code(pass ? ncclSend(send_val + in_off[q] * D, (size_t)(sent[q] * D),
                                               ncclBfloat16, q, ctx->comm, s)
                                    : ncclSend(send_idx + in_off[q], (size_t)sent[q], ncclInt64, q,
                                               ctx->comm, s));
            if (!rc && recvd[q] > 0)
                rc = nccl_code(pass ? ncclRecv(rval + out_off[q] * D, (size_t)(recvd[q] * D),
                                               ncclBfloat16, q, ctx->comm, s)
                                    : ncclRecv(ridx + out_off[q], (size_t)recvd[q], ncclInt64, q,
                                               ctx->comm, s));
        }
        const int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
    }
    return rc;
}

// The ids of one call: a split matrix S from pk_splits_make (salt 0x67326100; S[r][j] = how
// many of rank r's nnz pairs rank j owns; rows sum to nnz, columns to at most C: balanced,
// skewed with zeros, a hot owner, mostly local, by key % 4), the owners laid out by an affine
// permutation of the positions (pair i's owner is j where pi(i) = (a i + b) mod nnz falls in
// S[r]'s j-th range: exact counts, scattered over the array), and the node below the owner by
// degree mode (pk_skewed_id over N / W nodes: uniform, power law, hubs by key % 3), so
// idx = node * W + owner.
struct Owners {
    long long start[PK_MAX_RANKS + 1];
};

__global__ void ids_kernel(Owners o, int W, unsigned long long a, unsigned long long b,
                           uint64_t base, int mode, long long nodes, long long nnz, int64_t *idx) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nnz;
         i += (long long)gridDim.x * blockDim.x) {
        const long long p = (long long)(((unsigned __int128)a * (unsigned long long)i + b) %
                                        (unsigned long long)nnz);
        int j = 0;
        while (j < W - 1 && p >= o.start[j + 1])
            j++;
        idx[i] = pk_skewed_id(pk_splitmix64(base + (uint64_t)i), mode, nodes) * W + j;
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
    const long long N = call->dims[0], nnz = call->dims[1], C = call->dims[3];
    PkSplits S;
    pk_splits_make(seed, 0x67326100ULL, key, W, nnz, C, &S);
    Owners o;
    o.start[0] = 0;
    for (int j = 0; j < W; j++)
        o.start[j + 1] = o.start[j] + S.s[r][j];
    const uint64_t base = pk_splitmix64(
        seed ^ pk_splitmix64(0x67696400ULL ^ ((uint64_t)(unsigned)key << 8) ^ (uint64_t)r));
    unsigned long long a = 1 + pk_splitmix64(base ^ 0xa) % (unsigned long long)nnz;
    while (gcd(a, (unsigned long long)nnz) != 1)
        a = a % (unsigned long long)nnz + 1;
    const unsigned long long b = pk_splitmix64(base ^ 0xb) % (unsigned long long)nnz;
    ids_kernel<<<264, 256, 0, ctx->stream>>>(o, W, a, b, base, pk_degree_mode(key), N / W, nnz,
                                             static_cast<int64_t *>(call->args[0]));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 5 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const int64_t *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<int64_t *>(c->args[2]), static_cast<bf16 *>(c->args[3]),
        static_cast<int64_t *>(c->args[4]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
