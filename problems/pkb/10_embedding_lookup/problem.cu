// pkb/10_embedding_lookup (ParallelKernelBench 10): a row-sharded embedding table. Rank r owns
// global rows [r*M, (r+1)*M) (its local_shard, M x N bf16) and looks up M global indices. PKB
// exchanges the indices by owner with variable-size all-to-alls, gathers the rows on the
// owners and sends them back, so the output row k is
//   output[k] = table[indices[perm[k]]]
// where perm is the stable partition of the positions by owner (all positions owned by rank 0
// in their original order, then rank 1's, ...): not the order of `indices`. Exact copies.
#include "pk_problem_module.h"

#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const int64_t *, const __nv_bfloat16 *, __nv_bfloat16 *,
                        size_t, size_t);

#define PART_THREADS 1024

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// Buffers NCCL sends from or receives into are registered windows (host-driven ncclSend/ncclRecv
// between the windowed arena and plain cudaMalloc memory hangs in NCCL 2.28.3: docs/problems.md,
// known issues). init() sees no dims, so they are sized on the first call, which every rank
// makes (trial 0, untimed); registration is collective. Received rows are data-dependent: up
// to W*M of them when every rank asks this one for all its rows.
struct RefWindow {
    void *ptr;
    size_t bytes;
    ncclWindow_t win;
};
static RefWindow g_buf;
static long long *g_host_counts; // pinned: send counts, then receive counts

static int window_reserve(const pk_ctx *ctx, RefWindow *w, size_t bytes) {
    if (w->bytes >= bytes)
        return 0;
    int rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (!rc && w->ptr) {
        rc = nccl_code(ncclCommWindowDeregister(ctx->comm, w->win));
        ncclMemFree(w->ptr);
        *w = RefWindow{};
    }
    if (!rc)
        rc = nccl_code(ncclMemAlloc(&w->ptr, bytes));
    if (!rc)
        rc = nccl_code(
            ncclCommWindowRegister(ctx->comm, w->ptr, bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        w->bytes = bytes;
    return rc;
}

static int init(const pk_ctx *ctx) {
    return g_host_counts ? 0
                         : cuda_code(cudaMallocHost((void **)&g_host_counts,
                                                    2 * PK_MAX_RANKS * sizeof(long long)));
}

static void fini(const pk_ctx *ctx) {
    if (g_buf.ptr) {
        ncclCommWindowDeregister(ctx->comm, g_buf.win);
        ncclMemFree(g_buf.ptr);
        g_buf = RefWindow{};
    }
    if (g_host_counts)
        cudaFreeHost(g_host_counts);
    g_host_counts = NULL;
}

// indices // M, clamped (the generator only draws valid indices; PKB's clamp is on the row).
__device__ __forceinline__ int owner_of(int64_t idx, long long m, int world) {
    long long o = idx / m;
    return o < 0 ? 0 : o >= world ? world - 1 : (int)o;
}

// indices[target_ranks == r] for every r, concatenated (stable), and the counts. One CTA: each
// thread takes a contiguous run of indices; a block scan per owner gives each run's offset.
__global__ void __launch_bounds__(PART_THREADS)
    partition_by_owner(const int64_t *indices, long long m, int world, int64_t *flat_send,
                       long long *send_counts) {
    typedef cub::BlockScan<int, PART_THREADS> Scan;
    __shared__ typename Scan::TempStorage scan_tmp;
    __shared__ int total[PK_MAX_RANKS];
    const long long per = (m + PART_THREADS - 1) / PART_THREADS;
    const long long lo = threadIdx.x * per, hi = lo + per < m ? lo + per : m;
    int count[PK_MAX_RANKS], before[PK_MAX_RANKS];
    for (int o = 0; o < PK_MAX_RANKS; o++)
        count[o] = 0;
    for (long long i = lo; i < hi; i++)
        count[owner_of(indices[i], m, world)]++;
    for (int o = 0; o < world; o++) {
        int sum;
        Scan(scan_tmp).ExclusiveSum(count[o], before[o], sum);
        if (threadIdx.x == 0)
            total[o] = sum;
        __syncthreads();
    }
    long long base[PK_MAX_RANKS];
    long long acc = 0;
    for (int o = 0; o < world; o++) {
        base[o] = acc + before[o];
        acc += total[o];
    }
    for (long long i = lo; i < hi; i++) {
        const int o = owner_of(indices[i], m, world);
        flat_send[base[o]++] = indices[i];
    }
    if (threadIdx.x < world)
        send_counts[threadIdx.x] = total[threadIdx.x];
}

// retrieved[k] = local_shard[clamp(received[k] - rank*M, 0, M-1)], one warp per row, 16 bytes
// per lane and step (N % 8 == 0).
__global__ void gather_rows(const __nv_bfloat16 *shard, const int64_t *received, long long count,
                            long long m, long long n, int rank, __nv_bfloat16 *retrieved) {
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    const int lane = threadIdx.x % 32;
    for (long long k = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; k < count;
         k += warps) {
        long long row = received[k] - (long long)rank * m;
        row = row < 0 ? 0 : row > m - 1 ? m - 1 : row;
        const uint4 *src = reinterpret_cast<const uint4 *>(shard + row * n);
        uint4 *dst = reinterpret_cast<uint4 *>(retrieved + k * n);
        for (long long j = lane; j < n / 8; j += 32)
            dst[j] = src[j];
    }
}

// Grouped point-to-point exchange: block p of `send` (count s_cnt[p], offset s_off[p], in
// elements of `elem` bytes) to rank p, block p of `recv` from rank p; our own block is a copy.
static int exchange(const pk_ctx *ctx, const char *send, const long long *s_cnt,
                    const long long *s_off, char *recv, const long long *r_cnt,
                    const long long *r_off, size_t elem, ncclDataType_t type, size_t per) {
    const int me = ctx->rank;
    int rc = 0;
    if (s_cnt[me] > 0)
        rc = cuda_code(cudaMemcpyAsync(
            recv + (size_t)r_off[me] * per * elem, send + (size_t)s_off[me] * per * elem,
            (size_t)s_cnt[me] * per * elem, cudaMemcpyDeviceToDevice, ctx->stream));
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int p = 0; p < ctx->world_size && !rc; p++) {
        if (p == me)
            continue;
        if (s_cnt[p] > 0)
            rc = nccl_code(ncclSend(send + (size_t)s_off[p] * per * elem, (size_t)s_cnt[p] * per,
                                    type, p, ctx->comm, ctx->stream));
        if (!rc && r_cnt[p] > 0)
            rc = nccl_code(ncclRecv(recv + (size_t)r_off[p] * per * elem, (size_t)r_cnt[p] * per,
                                    type, p, ctx->comm, ctx->stream));
    }
    const int end = nccl_code(ncclGroupEnd());
    return rc ? rc : end;
}

// Baseline, PKB's steps: partition the indices by owner, all-to-all of the counts, a host sync
// for the split sizes (PKB's .item()/.tolist()), all-to-all of the indices, the owners gather
// the rows, all-to-all of the rows back to the requesters.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size, me = ctx->rank;
    const long long m = call->dims[0], n = call->dims[1];
    const int64_t *indices = static_cast<const int64_t *>(call->args[0]);
    const __nv_bfloat16 *shard = static_cast<const __nv_bfloat16 *>(call->args[1]);
    __nv_bfloat16 *output = static_cast<__nv_bfloat16 *>(call->args[2]);
    const size_t counts_bytes = 2 * PK_MAX_RANKS * sizeof(long long);
    const size_t idx_bytes = (size_t)m * sizeof(int64_t);
    int rc = window_reserve(ctx, &g_buf,
                            counts_bytes + idx_bytes * (1 + world) +
                                (size_t)world * (size_t)m * (size_t)n * sizeof(__nv_bfloat16));
    if (!rc)
        rc = init(ctx); // no-op once init() ran
    if (rc)
        return rc;
    char *base = static_cast<char *>(g_buf.ptr);
    long long *send_counts = reinterpret_cast<long long *>(base);
    long long *recv_counts = send_counts + PK_MAX_RANKS;
    int64_t *flat_send = reinterpret_cast<int64_t *>(base + counts_bytes);
    int64_t *received = flat_send + m;
    __nv_bfloat16 *retrieved =
        reinterpret_cast<__nv_bfloat16 *>(base + counts_bytes + idx_bytes * (1 + world));

    partition_by_owner<<<1, PART_THREADS, 0, ctx->stream>>>(indices, m, world, flat_send,
                                                            send_counts);
    rc = cuda_code(cudaGetLastError());
    // All-to-all of one count per peer.
    long long one[PK_MAX_RANKS] = {0}, at[PK_MAX_RANKS] = {0};
    for (int p = 0; p < world; p++) {
        one[p] = 1;
        at[p] = p;
    }
    if (!rc)
        rc = exchange(ctx, reinterpret_cast<const char *>(send_counts), one, at,
                      reinterpret_cast<char *>(recv_counts), one, at, sizeof(long long), ncclInt64,
                      1);
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_host_counts, send_counts, counts_bytes,
                                       cudaMemcpyDeviceToHost, ctx->stream));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (rc)
        return rc;
    const long long *s_cnt = g_host_counts, *r_cnt = g_host_counts + PK_MAX_RANKS;
    long long s_off[PK_MAX_RANKS] = {0}, r_off[PK_MAX_RANKS] = {0}, s_acc = 0, r_acc = 0;
    for (int p = 0; p < world; p++) {
        s_off[p] = s_acc;
        r_off[p] = r_acc;
        s_acc += s_cnt[p];
        r_acc += r_cnt[p];
    }
    if (s_acc != m || r_acc > (long long)world * m)
        return 3001; // indices out of range
    rc = exchange(ctx, reinterpret_cast<const char *>(flat_send), s_cnt, s_off,
                  reinterpret_cast<char *>(received), r_cnt, r_off, sizeof(int64_t), ncclInt64, 1);
    if (rc)
        return rc;
    if (r_acc > 0) {
        long long blocks = (r_acc + 7) / 8;
        gather_rows<<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, ctx->stream>>>(
            shard, received, r_acc, m, n, me, retrieved);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc) // rows go back: what we received requests for, we send; what we asked for arrives
        rc = exchange(ctx, reinterpret_cast<const char *>(retrieved), r_cnt, r_off,
                      reinterpret_cast<char *>(output), s_cnt, s_off, sizeof(__nv_bfloat16),
                      ncclBfloat16, (size_t)n);
    return rc;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 3 || c->n_dims < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const int64_t *>(c->args[0]),
                                          static_cast<const __nv_bfloat16 *>(c->args[1]),
                                          static_cast<__nv_bfloat16 *>(c->args[2]),
                                          (size_t)c->dims[0], (size_t)c->dims[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
