// cuco/dsv3_moe_dispatch (CUCo's "DeepSeek-V3 MoE Dispatch and Combine" workload, its dispatch
// half: steps (1) quantize tokens to int8 and (2) dispatch them to the experts' ranks): every
// rank holds M tokens of DeepSeek-V3's hidden size Hd = 7168 and their top-K = 8 of E = 256
// experts (group-limited: TG = 4 of G = 8 groups), experts split evenly over the ranks (rank g
// holds experts [g El, (g + 1) El), El = E / W). Per token m of rank s:
//   amax_m = max |x_m|,  scale_m = amax_m / 127 (fp32),
//   q_m = scale_m > 0 ? clamp(rint(x_m / scale_m), -127, 127) : 0              (int8, per element)
// and every (token, expert) pair becomes one row on the expert's rank. Rank g's rows are in one
// fixed order: local expert e = 0..El-1, then source rank s = 0..W-1, then token m ascending:
//   recv_x[j] = q_m of rank s, recv_scale[j] = scale_m, recv_src[j] = s M + m,
//   expert_counts[e] = the rows of local expert e.
// The receive buffers are capacities of W M K rows (a rank may receive up to K rows of every
// token of every rank) and in-out: rows beyond the received ones keep their values.
#include "pk_moe_routing_grouped.cuh"
#include "pk_problem_module.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

#define THREADS 256

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const int64_t *, int8_t *, float *, int64_t *,
                        int64_t *, size_t, size_t, int, int);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// ---------------------------------------------------------------------------------------------
// generate(): topk_idx of this rank from DeepSeek-V3's group-limited routing, mode by key % 4
// (problems/include/pk_moe_routing_grouped.cuh), the same routing on every rank.
// ---------------------------------------------------------------------------------------------

static PkGroupedRouting g_routing; // 8 KB: static, not on the stack

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const long long M = call->dims[0];
    const int E = (int)call->dims[2], K = (int)call->dims[3], G = (int)call->dims[4],
              TG = (int)call->dims[5];
    pk_gr_make(seed, key, ctx->world_size, E, G, TG, K, &g_routing);
    pk_gr_topk_kernel<<<132, 128, 0, ctx->stream>>>(static_cast<int64_t *>(call->args[1]),
                                                    (size_t)M, ctx->rank, g_routing);
    return cuda_code(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// The reference: CUCo's host-driven baseline with variable-size transfers (its padded
// ncclAlltoAll would move more): quantize, the send lists (expert-major, tokens ascending), the
// rows packed per destination, the counts exchanged and brought to the host (a stream
// synchronisation), one NCCL group of send/recv of the rows, scales and sources, then a kernel
// that reorders the received chunks from (source, expert) to (expert, source). No overlap.
// ---------------------------------------------------------------------------------------------

// One CTA per token: amax, scale, int8 row.
struct MaxOp {
    __device__ float operator()(float a, float b) const {
        return fmaxf(a, b);
    }
};

__global__ void quantize_rows(const bf16 *x, long long Hd, int8_t *q, float *scale) {
    typedef cub::BlockReduce<float, THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ float s_scale;
    const long long m = blockIdx.x;
    const bf16 *row = x + m * Hd;
    float amax = 0.f;
    for (long long i = threadIdx.x; i < Hd; i += THREADS)
        amax = fmaxf(amax, fabsf(__bfloat162float(row[i])));
    amax = Reduce(tmp).Reduce(amax, MaxOp());
    if (threadIdx.x == 0) {
        s_scale = amax / 127.f;
        scale[m] = s_scale;
    }
    __syncthreads();
    const float sc = s_scale;
    for (long long i = threadIdx.x; i < Hd; i += THREADS) {
        float v = sc > 0.f ? rintf(__bfloat162float(row[i]) / sc) : 0.f;
        v = fminf(fmaxf(v, -127.f), 127.f);
        q[m * Hd + i] = (int8_t)v;
    }
}

// One CTA per global expert e: the tokens that chose e, ascending (a block scan over the tokens):
// pos[m K + k] = the token's place among them (k its slot for e), counts[e] = how many.
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
        __syncthreads(); // tmp is reused
    }
    if (threadIdx.x == 0)
        counts[e] = running;
}

// Exclusive prefix of the E counts (E <= 256): one thread.
__global__ void prefix_counts(const int64_t *counts, int E, int64_t *off) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        long long acc = 0;
        for (int e = 0; e < E; e++) {
            off[e] = acc;
            acc += counts[e];
        }
    }
}

// A warp per (token, slot): its row at off[e] + pos in the send buffers (expert-major: the
// rows of rank q's experts are contiguous).
__global__ void pack_rows(const int64_t *topk, const int32_t *pos, const int64_t *off,
                          const uint4 *q, const float *scale, long long M, int K, long long vecs,
                          int rank, uint4 *send_x, float *send_scale, int64_t *send_src) {
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < M * K;
         w += warps) {
        const long long m = w / K;
        const long long j = off[topk[w]] + pos[w];
        for (long long v = threadIdx.x % 32; v < vecs; v += 32)
            send_x[j * vecs + v] = q[m * vecs + v];
        if (threadIdx.x % 32 == 0) {
            send_scale[j] = scale[m];
            send_src[j] = (long long)rank * M + m;
        }
    }
}

// Output row j (< total) from chunk c (output order: local expert, then source): the staged row
// stage_off[c] + (j - out_start[c]). A warp per row.
__global__ void reorder_rows(const int64_t *out_start, const int64_t *stage_off, int chunks,
                             long long total, long long vecs, const uint4 *stage_x,
                             const float *stage_scale, const int64_t *stage_src, uint4 *recv_x,
                             float *recv_scale, int64_t *recv_src) {
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long j = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; j < total;
         j += warps) {
        int lo = 0, hi = chunks - 1; // the last chunk that starts at or before j
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (out_start[mid] <= j)
                lo = mid;
            else
                hi = mid - 1;
        }
        const long long src = stage_off[lo] + (j - out_start[lo]);
        for (long long v = threadIdx.x % 32; v < vecs; v += 32)
            recv_x[j * vecs + v] = stage_x[src * vecs + v];
        if (threadIdx.x % 32 == 0) {
            recv_scale[j] = stage_scale[src];
            recv_src[j] = stage_src[src];
        }
    }
}

// Registered buffers of the reference (NCCL 2.28 can hang between registered and plain
// memory), made in the first reference call (a correctness trial: registration is collective,
// every rank in the same order).
enum {
    B_Q,
    B_SCALE,
    B_POS,
    B_COUNTS,
    B_OFF,
    B_RCOUNTS,
    B_SEND_X,
    B_SEND_SCALE,
    B_SEND_SRC,
    B_STAGE_X,
    B_STAGE_SCALE,
    B_STAGE_SRC,
    B_TABLE,
    N_BUFS
};
static struct {
    void *p;
    size_t bytes;
    ncclWindow_t win;
} g_bufs[N_BUFS];
static int64_t *g_host; // pinned: counts (E), received counts (E), chunk table (2 E), El counts

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
    return cuda_code(cudaMallocHost((void **)&g_host, 5 * PK_GR_MAX_E * sizeof(int64_t)));
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
    g_host = NULL;
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long M = call->dims[0], Hd = call->dims[1];
    const int E = (int)call->dims[2], K = (int)call->dims[3], El = E / W;
    const long long vecs = Hd / 16, R = (long long)W * M * K;
    const bf16 *x = static_cast<const bf16 *>(call->args[0]);
    const int64_t *topk = static_cast<const int64_t *>(call->args[1]);
    int8_t *recv_x = static_cast<int8_t *>(call->args[2]);
    float *recv_scale = static_cast<float *>(call->args[3]);
    int64_t *recv_src = static_cast<int64_t *>(call->args[4]);
    int64_t *expert_counts = static_cast<int64_t *>(call->args[5]);
    cudaStream_t s = ctx->stream;
    if (Hd % 16 != 0 || E > PK_GR_MAX_E)
        return 3000;
    void *b[N_BUFS];
    const size_t sizes[N_BUFS] = {(size_t)(M * Hd),        (size_t)M * 4,       (size_t)(M * K) * 4,
                                  (size_t)E * 8,           (size_t)E * 8,       (size_t)E * 8,
                                  (size_t)(M * K * Hd),    (size_t)(M * K) * 4, (size_t)(M * K) * 8,
                                  (size_t)(R * Hd),        (size_t)R * 4,       (size_t)R * 8,
                                  (size_t)(2 * E + El) * 8};
    int rc = init(ctx);
    for (int i = 0; i < N_BUFS && !rc; i++)
        rc = ref_buffer(ctx, i, sizes[i], &b[i]);
    if (rc)
        return rc;
    quantize_rows<<<(unsigned)M, THREADS, 0, s>>>(x, Hd, static_cast<int8_t *>(b[B_Q]),
                                                  static_cast<float *>(b[B_SCALE]));
    expert_scan<<<E, THREADS, 0, s>>>(topk, M, K, static_cast<int32_t *>(b[B_POS]),
                                      static_cast<int64_t *>(b[B_COUNTS]));
    prefix_counts<<<1, 32, 0, s>>>(static_cast<const int64_t *>(b[B_COUNTS]), E,
                                   static_cast<int64_t *>(b[B_OFF]));
    pack_rows<<<4 * 132, THREADS, 0, s>>>(
        topk, static_cast<const int32_t *>(b[B_POS]), static_cast<const int64_t *>(b[B_OFF]),
        static_cast<const uint4 *>(b[B_Q]), static_cast<const float *>(b[B_SCALE]), M, K, vecs, r,
        static_cast<uint4 *>(b[B_SEND_X]), static_cast<float *>(b[B_SEND_SCALE]),
        static_cast<int64_t *>(b[B_SEND_SRC]));
    rc = cuda_code(cudaGetLastError());
    // The counts: rank q gets this rank's counts of its experts (El each).
    const int64_t *counts = static_cast<const int64_t *>(b[B_COUNTS]);
    int64_t *rcounts = static_cast<int64_t *>(b[B_RCOUNTS]);
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
    // Per peer: rows sent (its experts' counts) and received (the counts it sent us), offsets.
    long long soff[PK_MAX_RANKS + 1] = {0}, roff[PK_MAX_RANKS + 1] = {0};
    for (int q = 0; q < W; q++) {
        long long n = 0, m = 0;
        for (int e = 0; e < El; e++) {
            n += g_host[q * El + e];
            m += g_host[E + q * El + e];
        }
        soff[q + 1] = soff[q] + n;
        roff[q + 1] = roff[q] + m;
    }
    if (soff[W] != M * K || roff[W] > R)
        return 3001; // not this problem's inputs (a token's experts must be distinct, in range)
    uint8_t *sx = static_cast<uint8_t *>(b[B_SEND_X]), *tx = static_cast<uint8_t *>(b[B_STAGE_X]);
    float *ss = static_cast<float *>(b[B_SEND_SCALE]), *ts = static_cast<float *>(b[B_STAGE_SCALE]);
    int64_t *sr = static_cast<int64_t *>(b[B_SEND_SRC]),
            *tr = static_cast<int64_t *>(b[B_STAGE_SRC]);
    rc = nccl_code(ncclGroupStart());
    for (int q = 0; q < W && !rc; q++) {
        const long long n = soff[q + 1] - soff[q], m = roff[q + 1] - roff[q];
        if (n > 0) {
            rc =
                nccl_code(ncclSend(sx + soff[q] * Hd, (size_t)(n * Hd), ncclInt8, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclSend(ss + soff[q], (size_t)n, ncclFloat32, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclSend(sr + soff[q], (size_t)n, ncclInt64, q, ctx->comm, s));
        }
        if (!rc && m > 0) {
            rc =
                nccl_code(ncclRecv(tx + roff[q] * Hd, (size_t)(m * Hd), ncclInt8, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(ts + roff[q], (size_t)m, ncclFloat32, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(tr + roff[q], (size_t)m, ncclInt64, q, ctx->comm, s));
        }
    }
    const int end2 = nccl_code(ncclGroupEnd());
    rc = rc ? rc : end2;
    if (rc)
        return rc;
    // Chunk (e, source q): out_start in the output order, stage_off in the received order.
    int64_t *out_start = g_host + 2 * E, *stage_off = g_host + 3 * E, *ecount = g_host + 4 * E;
    long long acc = 0;
    for (int e = 0; e < El; e++) {
        ecount[e] = 0;
        for (int q = 0; q < W; q++) {
            long long within = 0;
            for (int e2 = 0; e2 < e; e2++)
                within += g_host[E + q * El + e2];
            out_start[e * W + q] = acc;
            stage_off[e * W + q] = roff[q] + within;
            acc += g_host[E + q * El + e];
            ecount[e] += g_host[E + q * El + e];
        }
    }
    int64_t *table = static_cast<int64_t *>(b[B_TABLE]);
    rc = cuda_code(
        cudaMemcpyAsync(table, out_start, (size_t)(2 * E + El) * 8, cudaMemcpyHostToDevice, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(expert_counts, table + 2 * E, (size_t)El * 8,
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc && acc > 0) {
        reorder_rows<<<4 * 132, THREADS, 0, s>>>(
            table, table + E, El * W, acc, vecs, static_cast<const uint4 *>(b[B_STAGE_X]), ts, tr,
            reinterpret_cast<uint4 *>(recv_x), recv_scale, recv_src);
        rc = cuda_code(cudaGetLastError());
    }
    return rc;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 6 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<int8_t *>(c->args[2]), static_cast<float *>(c->args[3]),
        static_cast<int64_t *>(c->args[4]), static_cast<int64_t *>(c->args[5]), (size_t)c->dims[0],
        (size_t)c->dims[1], (int)c->dims[2], (int)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
