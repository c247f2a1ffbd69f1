// pkb/69_gnn_negative_scoring (ParallelKernelBench problem 69): the ranking metric of link
// prediction with negative sampling. Rank r holds rows_r positive scores (pos_r, bf16) and for
// each a row of G negative scores (neg_r, rows_r x G, bf16), rows_r different per rank (zero
// included). Every rank gathers every rank's rows (rank order) and ranks each positive among its
// negatives by sigmoid, descending (PKB's _calc_ranking: torch.sort of sigmoid([pos, negs]),
// then the position of the positive, plus one). With s(x) = bf16(1 / (1 + expf(-x))) (PyTorch's
// sigmoid of a bf16 tensor) and, for global row j, gt_j = #{n : s(neg_j[n]) > s(pos_j)} and
// ge_j = #{n : s(neg_j[n]) >= s(pos_j)}:
//   ranks[j] in [1 + gt_j, 1 + ge_j]   (torch.sort is not stable: any place among the ties)
//   total = rows_0 + ... + rows_{W-1}; ranks[j] = 0 for j >= total.
// The output is not unique where scores tie, so ranks has a custom checker (check() below).
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const int64_t *, int64_t *,
                        int64_t *, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// The reference's buffers, made in the first reference call (window registration is
// collective) and grown with the dims: one ncclMemAlloc'ed block registered as a window
// (docs/problems.md, known issues) with the row counts and every rank's gathered scores; the
// admissible range [lo, hi] of every output row, which reference() records for check() (the
// runner calls check() right after the reference on the same inputs, in trials and for every
// verified timed call), and the pinned row counts.
static struct {
    char *buf;
    size_t bytes;
    ncclWindow_t win;
    long long *lo, *hi;
    size_t range_rows;
    unsigned long long *bad;
    int64_t *host;
} g_ref;

static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_ref.host)
        return 0;
    int rc = cuda_code(cudaMallocHost((void **)&g_ref.host, 2 * PK_MAX_RANKS * sizeof(int64_t)));
    if (!rc)
        rc = cuda_code(cudaMalloc((void **)&g_ref.bad, 2 * sizeof(unsigned long long)));
    return rc;
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.buf) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.buf);
    }
    cudaFree(g_ref.lo);
    cudaFree(g_ref.hi);
    cudaFree(g_ref.bad);
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    g_ref = {};
}

// s(x): PyTorch's sigmoid of a bf16 value (computed in fp32, rounded to bf16).
static __device__ __forceinline__ float sig_bf16(bf16 x) {
    return __bfloat162float(__float2bfloat16(1.f / (1.f + expf(-__bfloat162float(x)))));
}

// One warp per gathered row: gt and ge over its G negatives; ranks[j] = 1 + gt (the positive
// first among its ties: one admissible order), the range [1 + gt, 1 + ge] recorded.
__global__ void rank_rows(const bf16 *pos, const bf16 *neg, long long total, long long G,
                          int64_t *ranks, long long *lo, long long *hi) {
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long j = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; j < total;
         j += warps) {
        const float p = sig_bf16(pos[j]);
        int gt = 0, ge = 0;
        for (long long n = threadIdx.x % 32; n < G; n += 32) {
            const float s = sig_bf16(neg[j * G + n]);
            gt += s > p;
            ge += s >= p;
        }
        for (int o = 16; o > 0; o >>= 1) {
            gt += __shfl_xor_sync(0xffffffffu, gt, o);
            ge += __shfl_xor_sync(0xffffffffu, ge, o);
        }
        if (threadIdx.x % 32 == 0) {
            ranks[j] = 1 + gt;
            lo[j] = 1 + gt;
            hi[j] = 1 + ge;
        }
    }
}

// Baseline, PKB's steps: the row counts summed over the ranks (PKB's all_reduce of a one-hot
// size vector: NCCL) and read back with a synchronisation, every rank's positives and negatives
// gathered by one NCCL group of send/recv (PKB's all_to_all_single of the data repeated W
// times, i.e. an all-gather of unequal shards; own rows by device copies), then the ranking (a
// warp per row: counts instead of PKB's full sort, same result), the tail zeroed, the total.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long P = call->dims[0], G = call->dims[1];
    const bf16 *pos = static_cast<const bf16 *>(call->args[0]);
    const bf16 *neg = static_cast<const bf16 *>(call->args[1]);
    int64_t *ranks = static_cast<int64_t *>(call->args[3]);
    int64_t *total_out = static_cast<int64_t *>(call->args[4]);
    cudaStream_t s = ctx->stream;
    int rc = init(ctx);
    // block: sizes (PK_MAX_RANKS), gathered positives (W P), gathered negatives (W P G)
    const size_t o_pos = 256, o_neg = o_pos + ((size_t)(W * P) * sizeof(bf16) + 255) / 256 * 256;
    const size_t bytes = o_neg + (size_t)(W * P * G) * sizeof(bf16);
    if (!rc && g_ref.bytes < bytes) {
        if (g_ref.buf) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.buf);
            g_ref.buf = NULL;
            g_ref.bytes = 0;
        }
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.buf, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.buf, bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.bytes = bytes;
    }
    if (!rc && g_ref.range_rows < (size_t)(W * P)) {
        cudaFree(g_ref.lo);
        cudaFree(g_ref.hi);
        g_ref.lo = g_ref.hi = NULL;
        g_ref.range_rows = 0;
        rc = cuda_code(cudaMalloc((void **)&g_ref.lo, (size_t)(W * P) * sizeof(long long)));
        if (!rc)
            rc = cuda_code(cudaMalloc((void **)&g_ref.hi, (size_t)(W * P) * sizeof(long long)));
        if (!rc)
            g_ref.range_rows = (size_t)(W * P);
    }
    if (rc)
        return rc;
    int64_t *sizes = reinterpret_cast<int64_t *>(g_ref.buf);
    bf16 *gpos = reinterpret_cast<bf16 *>(g_ref.buf + o_pos);
    bf16 *gneg = reinterpret_cast<bf16 *>(g_ref.buf + o_neg);
    rc = cuda_code(cudaMemsetAsync(sizes, 0, W * sizeof(int64_t), s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(sizes + r, call->args[2], sizeof(int64_t),
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc)
        rc = nccl_code(ncclAllReduce(sizes, sizes, W, ncclInt64, ncclSum, ctx->comm, s));
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(g_ref.host, sizes, W * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    const int64_t *rows = g_ref.host;
    long long off[PK_MAX_RANKS + 1] = {0};
    for (int q = 0; q < W; q++) {
        if (rows[q] < 0 || rows[q] > P)
            return 3000;
        off[q + 1] = off[q] + rows[q];
    }
    const long long total = off[W];
    if (rows[r] > 0) {
        rc = cuda_code(cudaMemcpyAsync(gpos + off[r], pos, rows[r] * sizeof(bf16),
                                       cudaMemcpyDeviceToDevice, s));
        if (!rc)
            rc = cuda_code(cudaMemcpyAsync(gneg + off[r] * G, neg, rows[r] * G * sizeof(bf16),
                                           cudaMemcpyDeviceToDevice, s));
    }
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int k = 1; k < W && !rc; k++) {
        const int q = (r + k) % W;
        if (rows[r] > 0) {
            rc = nccl_code(ncclSend(pos, (size_t)rows[r], ncclBfloat16, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclSend(neg, (size_t)(rows[r] * G), ncclBfloat16, q, ctx->comm, s));
        }
        if (!rc && rows[q] > 0) {
            rc = nccl_code(ncclRecv(gpos + off[q], (size_t)rows[q], ncclBfloat16, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(gneg + off[q] * G, (size_t)(rows[q] * G), ncclBfloat16, q,
                                        ctx->comm, s));
        }
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    if (total > 0) {
        rank_rows<<<4 * 132, 256, 0, s>>>(gpos, gneg, total, G, ranks, g_ref.lo, g_ref.hi);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc && total < W * P)
        rc = cuda_code(cudaMemsetAsync(ranks + total, 0, (W * P - total) * sizeof(int64_t), s));
    g_ref.host[PK_MAX_RANKS] = total;
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(total_out, g_ref.host + PK_MAX_RANKS, sizeof(int64_t),
                                       cudaMemcpyHostToDevice, s));
    if (!rc) // check() reads the range; the next call's host writes follow this copy
        rc = cuda_code(cudaStreamSynchronize(s));
    return rc;
}

// bad[0]: the first row j whose rank is outside [lo_j, hi_j] (j < total) or not 0 (j >= total).
__global__ void check_ranks(const int64_t *got, const long long *lo, const long long *hi,
                            long long total, long long n, unsigned long long *bad) {
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (long long)gridDim.x * blockDim.x) {
        const long long g = got[j];
        const int ok = j < total ? g >= lo[j] && g <= hi[j] : g == 0;
        if (!ok)
            atomicMin(bad, (unsigned long long)j);
    }
}

// check(): ranks against the admissible ranges the reference just recorded (its total from the
// reference's own total output). total itself is checked exactly by the generic checker.
static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    if (arg != 3)
        return -1;
    cudaStream_t s = got->ctx->stream;
    int64_t total = 0;
    unsigned long long bad = ~0ull;
    const long long n = (long long)got->counts[3];
    int rc =
        cuda_code(cudaMemcpyAsync(&total, want->args[4], sizeof total, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaMemsetAsync(g_ref.bad, 0xff, sizeof *g_ref.bad, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    if (total < 0 || total > n || (size_t)total > g_ref.range_rows)
        return 3001;
    check_ranks<<<4 * 132, 256, 0, s>>>(static_cast<const int64_t *>(got->args[3]), g_ref.lo,
                                        g_ref.hi, total, n, g_ref.bad);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(&bad, g_ref.bad, sizeof bad, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    out->passed = bad == ~0ull;
    out->bad_index = out->passed ? -1 : (long long)bad;
    out->expected = out->got = out->max_abs = out->max_rel = 0;
    if (!out->passed) {
        int64_t g = 0;
        long long l = 0;
        rc = cuda_code(cudaMemcpy(&g, static_cast<const int64_t *>(got->args[3]) + bad, sizeof g,
                                  cudaMemcpyDeviceToHost));
        if (!rc && (long long)bad < total)
            rc = cuda_code(cudaMemcpy(&l, g_ref.lo + bad, sizeof l, cudaMemcpyDeviceToHost));
        out->expected = (double)l; // the lowest admissible rank (0 past the total)
        out->got = (double)g;
        out->max_abs = fabs(out->got - out->expected);
    }
    return rc;
}

// rows_r of one call, from (seed, key), the same pattern on every rank, by key % 4: PKB's
// (P - 2 + r % 3: 512 + r % 3 at PKB's W = 2 size); one rank (drawn) with no row, the others P;
// ragged (P / 2 .. P, odd and even); rank 0 a single row, the others P. Every call gathers at
// least W P / 2 rows.
__global__ void rows_kernel(int64_t *rows, long long v) {
    *rows = v;
}

static long long rows_of(uint64_t seed, int key, int W, int r, long long P) {
    const uint64_t base =
        pk_splitmix64(seed ^ pk_splitmix64(0x69726f00ULL + (uint64_t)(unsigned)key));
    const int mode = ((key % 4) + 4) % 4;
    if (mode == 0)
        return P - 2 + r % 3;
    if (mode == 1)
        return r == (int)(pk_splitmix64(base + 1) % (uint64_t)W) ? 0 : P;
    if (mode == 2)
        return P - (long long)(pk_splitmix64(base + 2 + (uint64_t)r) % (uint64_t)(P / 2 + 1));
    return r == 0 ? 1 : P;
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    rows_kernel<<<1, 1, 0, ctx->stream>>>(
        static_cast<int64_t *>(call->args[2]),
        rows_of(seed, key, ctx->world_size, ctx->rank, call->dims[0]));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 5 || c->n_dims < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<int64_t *>(c->args[3]),
        static_cast<int64_t *>(c->args[4]), (size_t)c->dims[0], (size_t)c->dims[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, check};
    return &module;
}
