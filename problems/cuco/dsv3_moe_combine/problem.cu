// cuco/dsv3_moe_combine (CUCo's "DeepSeek-V3 MoE Dispatch and Combine" workload, its combine,
// step 4): the expert outputs go back to their tokens' ranks and each token's K outputs are
// summed with its routing weights. Layout as cuco/dsv3_moe_dispatch leaves it: rank g holds
// experts [g El, (g + 1) El), El = E / W, and its rows in the order (local expert, source rank,
// token ascending): expert_out (W M K x Hd capacity, bf16: the first sum(expert_counts) rows are
// the experts' outputs), recv_src (s M + m of each row) and expert_counts (El). Every rank s
// also holds its tokens' routing: topk_idx (M x K, DeepSeek-V3's group-limited top-8 of 256)
// and topk_weights (M x K, fp32). Per token m of rank s:
//   out_s[m] = bf16( sum_k topk_weights[m][k] * expert_out_g[row(m, k)] )       (fp32 sum)
// where row(m, k) is the row of token (s, m) for expert e = topk_idx[m][k] on its rank g = e / El.
#include "pk_moe_routing_grouped.cuh"
#include "pk_problem_module.h"

#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

#define THREADS 256

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const int64_t *, const int64_t *,
                        const int64_t *, const float *, bf16 *, size_t, size_t, int, int);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// ---------------------------------------------------------------------------------------------
// generate(): the routing of every rank (pk_moe_routing_grouped.cuh, mode by key % 4), this
// rank's topk_idx, and the dispatch's layout of this rank's experts: recv_src in the order
// (local expert, source, token ascending) and expert_counts. The expert outputs and the weights
// are the generic generators' (rows of expert_out beyond the used ones are never read).
// ---------------------------------------------------------------------------------------------

static PkGroupedRouting g_routing; // 8 KB: static, not on the stack
static int64_t *g_all_topk;        // W M K: every rank's routing, made once
static size_t g_all_topk_n;
static int64_t *g_gen_counts; // El: rows per local expert (pass 1), then their prefix

__global__ void all_topk_kernel(int64_t *all, size_t M, int W, PkGroupedRouting r) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)W * M;
         i += (size_t)gridDim.x * blockDim.x) {
        int ex[PK_GR_MAX_K];
        pk_gr_route(r, (int)(i / M), i % M, ex);
        for (int k = 0; k < r.K; k++)
            all[i * r.K + k] = ex[k];
    }
}

// One CTA per local expert e (global g El + e): its (source, token) pairs in order. Pass 1
// (src == NULL) counts them; pass 2 writes recv_src from the exclusive prefix `first`.
__global__ void layout_kernel(const int64_t *all, long long M, int K, int W, int g, int El,
                              const int64_t *first, int64_t *counts, int64_t *src) {
    typedef cub::BlockScan<int, THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const int e = blockIdx.x;
    const long long eg = (long long)g * El + e;
    long long running = first ? first[e] : 0;
    for (long long base = 0; base < (long long)W * M; base += THREADS) {
        const long long i = base + threadIdx.x; // source i / M, token i % M
        int hit = 0;
        if (i < (long long)W * M)
            for (int k = 0; k < K; k++)
                hit |= all[i * K + k] == eg;
        int p, total;
        Scan(tmp).ExclusiveSum(hit, p, total);
        if (hit && src)
            src[running + p] = i;
        running += total;
        __syncthreads();
    }
    if (threadIdx.x == 0 && counts)
        counts[e] = running;
}

__global__ void prefix_small(const int64_t *counts, int n, int64_t *first) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        long long acc = 0;
        for (int i = 0; i < n; i++) {
            first[i] = acc;
            acc += counts[i];
        }
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, g = ctx->rank;
    const long long M = call->dims[0];
    const int E = (int)call->dims[2], K = (int)call->dims[3], G = (int)call->dims[4],
              TG = (int)call->dims[5], El = E / W;
    cudaStream_t s = ctx->stream;
    const size_t n = (size_t)(W * M * K);
    int rc = 0;
    if (g_all_topk_n < n) {
        cudaFree(g_all_topk);
        g_all_topk = NULL;
        g_all_topk_n = 0;
        rc = cuda_code(cudaMalloc((void **)&g_all_topk, n * sizeof(int64_t)));
        if (!rc)
            g_all_topk_n = n;
    }
    if (!rc && !g_gen_counts)
        rc = cuda_code(cudaMalloc((void **)&g_gen_counts, PK_GR_MAX_E * sizeof(int64_t)));
    if (rc)
        return rc;
    pk_gr_make(seed, key, W, E, G, TG, K, &g_routing);
    all_topk_kernel<<<264, 128, 0, s>>>(g_all_topk, (size_t)M, W, g_routing);
    rc = cuda_code(cudaMemcpyAsync(call->args[3], g_all_topk + (size_t)g * M * K,
                                   (size_t)(M * K) * sizeof(int64_t), cudaMemcpyDeviceToDevice, s));
    int64_t *counts = static_cast<int64_t *>(call->args[2]);
    if (!rc) {
        layout_kernel<<<El, THREADS, 0, s>>>(g_all_topk, M, K, W, g, El, NULL, counts, NULL);
        prefix_small<<<1, 32, 0, s>>>(counts, El, g_gen_counts);
        layout_kernel<<<El, THREADS, 0, s>>>(g_all_topk, M, K, W, g, El, g_gen_counts, NULL,
                                             static_cast<int64_t *>(call->args[1]));
        rc = cuda_code(cudaGetLastError());
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// The reference: CUCo's host-driven combine (its reverse all-to-all) with variable sizes. As a
// token owner, this rank finds where each of its (token, expert) rows will land (the
// dispatch's send layout: expert-major, tokens ascending, a block scan per expert); the counts
// are exchanged and brought to the host (a stream synchronisation); as an expert rank it
// gathers its rows per source (a chunk table) and one NCCL group of send/recv brings every row
// home; then a kernel sums each token's K rows with its weights in fp32. No overlap.
// ---------------------------------------------------------------------------------------------

__global__ void expert_scan(const int64_t *topk, long long M, int K, int32_t *pos,
                            int64_t *counts) {
    typedef cub::BlockScan<int, THREADS> Scan;
    __shared__ typename Scan::TempStorage tmp;
    const int e = blockIdx.x;
    long long running = 0;
    for (long long base = 0; base < M; base += THREADS) {
        const long long m = base + threadIdx.x;
        int slot = -1;
        if (m < M)
            for (int k = 0; k < K; k++)
                if (topk[m * K + k] == e)
                    slot = k;
        int p, total;
        Scan(tmp).ExclusiveSum(slot >= 0 ? 1 : 0, p, total);
        if (slot >= 0)
            pos[m * K + slot] = (int32_t)(running + p);
        running += total;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        counts[e] = running;
}

// Row j of the send buffer (source-major) from chunk c: expert_out row src_start[c] + (j -
// dst_start[c]). A warp per row.
__global__ void gather_rows(const int64_t *dst_start, const int64_t *src_start, int chunks,
                            long long total, long long vecs, const uint4 *in, uint4 *out) {
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long j = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; j < total;
         j += warps) {
        int lo = 0, hi = chunks - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (dst_start[mid] <= j)
                lo = mid;
            else
                hi = mid - 1;
        }
        const long long src = src_start[lo] + (j - dst_start[lo]);
        for (long long v = threadIdx.x % 32; v < vecs; v += 32)
            out[j * vecs + v] = in[src * vecs + v];
    }
}

// One CTA per token: out[m] = bf16(sum_k w[m][k] * rows[off[e_k] + pos[m][k]]), fp32, slot order.
__global__ void weighted_sum(const int64_t *topk, const float *w, const int32_t *pos,
                             const int64_t *off, const bf16 *rows, long long Hd, int K, bf16 *out) {
    const long long m = blockIdx.x;
    for (long long i = threadIdx.x; i < Hd; i += THREADS) {
        float acc = 0.f;
        for (int k = 0; k < K; k++) {
            const long long row = off[topk[m * K + k]] + pos[m * K + k];
            acc += w[m * K + k] * __bfloat162float(rows[row * Hd + i]);
        }
        out[m * Hd + i] = __float2bfloat16(acc);
    }
}

enum { B_POS, B_COUNTS, B_OFF, B_RCOUNTS, B_SEND, B_RECV, B_TABLE, N_BUFS };
static struct {
    void *p;
    size_t bytes;
    ncclWindow_t win;
} g_bufs[N_BUFS];
static int64_t *g_host; // pinned: counts (E), received counts (E), chunk table (2 E)

static int ref_buffer(const pk_ctx *ctx, int i, size_t bytes, void **out) {
    bytes = bytes ? bytes : 16;
    if (g_bufs[i].bytes < bytes) {
        if (g_bufs[i].p) {
            ncclCommWindowDeregister(ctx->comm, g_bufs[i].win);
            ncclMemFree(g_bufs[i].p);
            g_bufs[i].p = NULL;
            g_bufs[i].bytes = 0;
        }
        int rc = nccl_code(ncclMemAlloc(&g_bufs[i].p, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_bufs[i].p, bytes, &g_bufs[i].win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (rc)
            return rc;
        g_bufs[i].bytes = bytes;
    }
    *out = g_bufs[i].p;
    return 0;
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_host)
        return 0;
    return cuda_code(cudaMallocHost((void **)&g_host, 4 * PK_GR_MAX_E * sizeof(int64_t)));
}

static void fini(const pk_ctx *ctx) {
    for (int i = 0; i < N_BUFS; i++)
        if (g_bufs[i].p) {
            ncclCommWindowDeregister(ctx->comm, g_bufs[i].win);
            ncclMemFree(g_bufs[i].p);
            g_bufs[i].p = NULL;
            g_bufs[i].bytes = 0;
        }
    if (g_host)
        cudaFreeHost(g_host);
    cudaFree(g_all_topk);
    cudaFree(g_gen_counts);
    g_host = NULL;
    g_all_topk = NULL;
    g_all_topk_n = 0;
    g_gen_counts = NULL;
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size;
    const long long M = call->dims[0], Hd = call->dims[1];
    const int E = (int)call->dims[2], K = (int)call->dims[3], El = E / W;
    const long long vecs = Hd / 8, R = (long long)W * M * K;
    const bf16 *expert_out = static_cast<const bf16 *>(call->args[0]);
    const int64_t *topk = static_cast<const int64_t *>(call->args[3]);
    const float *w = static_cast<const float *>(call->args[4]);
    bf16 *out = static_cast<bf16 *>(call->args[5]);
    cudaStream_t s = ctx->stream;
    if (Hd % 8 != 0 || E > PK_GR_MAX_E)
        return 3000;
    void *b[N_BUFS];
    const size_t sizes[N_BUFS] = {(size_t)(M * K) * 4,  (size_t)E * 8,
                                  (size_t)E * 8,        (size_t)E * 8,
                                  (size_t)(R * Hd) * 2, (size_t)(M * K * Hd) * 2,
                                  (size_t)(2 * E) * 8};
    int rc = init(ctx);
    for (int i = 0; i < N_BUFS && !rc; i++)
        rc = ref_buffer(ctx, i, sizes[i], &b[i]);
    if (rc)
        return rc;
    int64_t *counts = static_cast<int64_t *>(b[B_COUNTS]),
            *rcounts = static_cast<int64_t *>(b[B_RCOUNTS]);
    expert_scan<<<E, THREADS, 0, s>>>(topk, M, K, static_cast<int32_t *>(b[B_POS]), counts);
    prefix_small<<<1, 32, 0, s>>>(counts, E, static_cast<int64_t *>(b[B_OFF]));
    rc = cuda_code(cudaGetLastError());
    // rcounts[q El + e]: rows of this rank's expert e that belong to rank q's tokens.
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int q = 0; q < W && !rc; q++) {
        rc = nccl_code(ncclSend(counts + (size_t)q * El, El, ncclInt64, q, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(rcounts + (size_t)q * El, El, ncclInt64, q, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    rc = rc ? rc : end;
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_host, counts, E * 8, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_host + E, rcounts, E * 8, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    // As the expert rank: chunk (q, e) of the send buffer (source-major) from the canonical
    // position of (e, q) in expert_out. As the token owner: rows from rank g land at the
    // dispatch's send offsets of g's experts (soff).
    const int64_t *rc_h = g_host + E;
    int64_t *dst_start = g_host + 2 * E, *src_start = g_host + 3 * E;
    long long ebase[PK_GR_MAX_E + 1] = {0};
    for (int e = 0; e < El; e++) {
        long long tot = 0;
        for (int q = 0; q < W; q++)
            tot += rc_h[q * El + e];
        ebase[e + 1] = ebase[e] + tot;
    }
    if (ebase[El] > R)
        return 3001;
    long long sendoff[PK_MAX_RANKS + 1] = {0}, recvoff[PK_MAX_RANKS + 1] = {0}, acc = 0;
    for (int q = 0; q < W; q++) {
        sendoff[q] = acc;
        for (int e = 0; e < El; e++) {
            long long before = 0; // rows of sources < q in expert e's segment
            for (int q2 = 0; q2 < q; q2++)
                before += rc_h[q2 * El + e];
            dst_start[q * El + e] = acc;
            src_start[q * El + e] = ebase[e] + before;
            acc += rc_h[q * El + e];
        }
        long long n = 0;
        for (int e = 0; e < El; e++)
            n += g_host[q * El + e];
        recvoff[q + 1] = recvoff[q] + n;
    }
    sendoff[W] = acc;
    if (recvoff[W] != M * K)
        return 3002; // not this problem's inputs
    int64_t *table = static_cast<int64_t *>(b[B_TABLE]);
    rc = cuda_code(
        cudaMemcpyAsync(table, dst_start, (size_t)(2 * E) * 8, cudaMemcpyHostToDevice, s));
    bf16 *send = static_cast<bf16 *>(b[B_SEND]), *recv = static_cast<bf16 *>(b[B_RECV]);
    if (!rc && acc > 0) {
        gather_rows<<<4 * 132, THREADS, 0, s>>>(table, table + E, E, acc, vecs,
                                                reinterpret_cast<const uint4 *>(expert_out),
                                                reinterpret_cast<uint4 *>(send));
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int q = 0; q < W && !rc; q++) {
        const long long n = sendoff[q + 1] - sendoff[q], m = recvoff[q + 1] - recvoff[q];
        if (n > 0)
            rc = nccl_code(
                ncclSend(send + sendoff[q] * Hd, (size_t)(n * Hd), ncclBfloat16, q, ctx->comm, s));
        if (!rc && m > 0)
            rc = nccl_code(
                ncclRecv(recv + recvoff[q] * Hd, (size_t)(m * Hd), ncclBfloat16, q, ctx->comm, s));
    }
    const int end2 = nccl_code(ncclGroupEnd());
    rc = rc ? rc : end2;
    if (rc)
        return rc;
    weighted_sum<<<(unsigned)M, THREADS, 0, s>>>(topk, w, static_cast<const int32_t *>(b[B_POS]),
                                                 static_cast<const int64_t *>(b[B_OFF]), recv, Hd,
                                                 K, out);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 6 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<const int64_t *>(c->args[3]),
        static_cast<const float *>(c->args[4]), static_cast<bf16 *>(c->args[5]), (size_t)c->dims[0],
        (size_t)c->dims[1], (int)c->dims[2], (int)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
