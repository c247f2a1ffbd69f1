// pkb/79_dinov2_distributed_knn (ParallelKernelBench problem 79): DINOv2's k-NN evaluation with
// the training set split across ranks. Rank r holds Q test features (Q x D bf16), its shard of
// the training features, transposed (D x T bf16), and their labels (T int64). For each of its
// own queries q, over every rank's training items i (W T in all):
//   sim(q, i) = bf16(sum_d test[q][d] train[d][i])      (PKB: bf16 matmul, fp32 accumulation)
//   topk_sims[q] = the K largest sims, descending; topk_labels[q] = their items' labels.
// PKB's steps: for each owner, the owner broadcasts its queries, every rank takes the top K of
// its shard, the owner gathers the W K candidates and keeps the top K.
//
// Inputs (generate()) lie on a grid of 2^-9 with |x| <= 127 2^-9 and D <= 1024, so every
// partial sum is a multiple of 2^-18 below 2^6 in magnitude: exact in fp32, whatever the order.
// Each similarity is then one bf16 value for every honest kernel and topk_sims is unique
// (exact checker). The labels are not: items tie at the K-th similarity (bf16 rounding: ties
// are everywhere), and any of them may fill the last places. topk_labels has a custom checker:
// the reference records, per query, the labels of every item (on any rank) whose similarity
// equals the K-th; check() accepts a row iff its places above the K-th similarity hold, run by
// run of equal similarities (the reference's sims, which topk_sims must equal exactly), the
// reference's labels (as multisets) and the run of the K-th similarity holds labels drawn from
// that record (as a sub-multiset).
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const int64_t *, bf16 *,
                        int64_t *, size_t, size_t, size_t, size_t);

#define KMAX 256    // largest K (PKB's max_k is 200)
#define TIE_R 64    // per query and rank: labels of the local K-th's ties left out of its top K
#define THREADS 256 // top-k blocks: one per row, THREADS == KMAX (the bitonic sort)
#define BLAS_WS_BYTES ((size_t)32 << 20)

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 4000 + (int)s;
}

// cuBLAS (made once by init(), outside timing); the reference's NCCL buffers (one ncclMemAlloc'ed
// block registered as a window: NCCL 2.28 can hang between registered and plain memory,
// docs/problems.md, known issues): the gathered queries, the candidates sent and received
// (sims, labels, tie extras); plain: the similarity matrix, the tie record check() reads (one
// row per own query: count, then labels; count -1 when a rank's extras overflowed TIE_R) and
// check()'s flag.
static struct {
    cublasHandle_t blas;
    void *blas_ws;
    cudaStream_t blas_stream;
    char *nccl;
    size_t nccl_bytes;
    ncclWindow_t win;
    char *plain;
    size_t plain_bytes;
    int64_t *ties;
    long long tie_stride, tie_rows;
    unsigned long long *bad;
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
        rc = cuda_code(cudaMalloc((void **)&g_ref.bad, sizeof *g_ref.bad));
    return rc ? rc : blas_on(ctx->stream);
}

static void release(const pk_ctx *ctx) {
    if (g_ref.nccl) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.nccl);
    }
    cudaFree(g_ref.plain);
    g_ref.nccl = g_ref.plain = NULL;
    g_ref.nccl_bytes = g_ref.plain_bytes = 0;
    g_ref.ties = NULL;
    g_ref.tie_rows = 0;
}

static void fini(const pk_ctx *ctx) {
    release(ctx);
    if (g_ref.blas)
        cublasDestroy(g_ref.blas);
    cudaFree(g_ref.blas_ws);
    cudaFree(g_ref.bad);
    g_ref = {};
}

static size_t align256(size_t n) {
    return (n + 255) / 256 * 256;
}

// The order key of a bf16 (as unsigned 16 bits, ascending with the value; -0 as +0).
static __device__ __forceinline__ unsigned key16(unsigned short u) {
    if (u == 0x8000u)
        u = 0;
    return (u & 0x8000u) ? (~u & 0xffffu) : (u | 0x8000u);
}

static __device__ __forceinline__ unsigned key_of(bf16 v) {
    return key16(__bfloat16_as_ushort(v));
}

// Block-wide (THREADS threads): the K-th largest key t of key(0 .. n-1) (n >= K) and the number
// of keys above it, by two 8-bit histogram passes (radix select).
template <class F>
static __device__ void kth_key(F key, long long n, int K, unsigned *t, int *above) {
    __shared__ unsigned hist[256];
    __shared__ unsigned s_t;
    __shared__ int s_above;
    hist[threadIdx.x] = 0;
    __syncthreads();
    for (long long j = threadIdx.x; j < n; j += THREADS)
        atomicAdd(&hist[key(j) >> 8], 1u);
    __syncthreads();
    if (threadIdx.x == 0) {
        int cum = 0, b = 255;
        for (; b > 0 && cum + (int)hist[b] < K; b--)
            cum += (int)hist[b];
        s_t = (unsigned)b;
        s_above = cum;
    }
    __syncthreads();
    const unsigned hi = s_t;
    hist[threadIdx.x] = 0;
    __syncthreads();
    for (long long j = threadIdx.x; j < n; j += THREADS) {
        const unsigned k = key(j);
        if (k >> 8 == hi)
            atomicAdd(&hist[k & 255], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int cum = s_above, b = 255;
        for (; b > 0 && cum + (int)hist[b] < K; b--)
            cum += (int)hist[b];
        s_t = hi << 8 | (unsigned)b;
        s_above = cum;
    }
    __syncthreads();
    *t = s_t;
    *above = s_above;
    __syncthreads();
}

// Block-wide: sorts v[0 .. THREADS) descending (bitonic; one element per thread).
static __device__ void sort_desc(unsigned long long *v) {
    for (int size = 2; size <= THREADS; size *= 2)
        for (int stride = size / 2; stride > 0; stride /= 2) {
            __syncthreads();
            const int i = threadIdx.x, j = i ^ stride;
            if (j > i) {
                const bool desc = (i & size) == 0;
                const unsigned long long a = v[i], b = v[j];
                if (desc ? a < b : a > b) {
                    v[i] = b;
                    v[j] = a;
                }
            }
        }
    __syncthreads();
}

// Block-wide: picks the top K of key(0 .. n-1) into sel (sorted descending: (key + 1) << 32 |
// index, zero past K); every key above the K-th, then the first `need` of its ties to arrive.
// Returns t; the ties left out call spill(e, j) with e = 0, 1, ... and *n_spill their number.
template <class F, class G>
static __device__ unsigned select_top(F key, long long n, int K, unsigned long long *sel, G spill,
                                      int *n_spill) {
    __shared__ int n_above, n_eq;
    unsigned t;
    int above;
    kth_key(key, n, K, &t, &above);
    sel[threadIdx.x] = 0;
    if (threadIdx.x == 0)
        n_above = n_eq = 0;
    __syncthreads();
    const int need = K - above;
    for (long long j = threadIdx.x; j < n; j += THREADS) {
        const unsigned k = key(j);
        if (k > t) {
            const int s = atomicAdd(&n_above, 1);
            sel[s] = (unsigned long long)(k + 1) << 32 | (unsigned long long)j;
        } else if (k == t) {
            const int e = atomicAdd(&n_eq, 1);
            if (e < need)
                sel[above + e] = (unsigned long long)(k + 1) << 32 | (unsigned long long)j;
            else
                spill(e - need, j);
        }
    }
    __syncthreads();
    *n_spill = n_eq - need;
    sort_desc(sel);
    return t;
}

// One block per row of S (W Q rows: owner o's query i is row o Q + i; T sims each): this rank's
// top K, into the send buffers at the same row (sims, labels), and the labels of the K-th's
// ties left out (ex: [count, TIE_R labels] per row; the count may exceed TIE_R).
__global__ void __launch_bounds__(THREADS)
    local_topk(const bf16 *S, long long T, const int64_t *labels, int K, bf16 *c_sims,
               int64_t *c_labels, int64_t *ex) {
    __shared__ unsigned long long sel[THREADS];
    const long long row = blockIdx.x;
    const bf16 *s = S + row * T;
    int64_t *e = ex + row * (1 + TIE_R);
    int n_spill;
    select_top([&](long long j) { return key_of(s[j]); }, T, K, sel,
               [&](int x, long long j) {
                   if (x < TIE_R)
                       e[1 + x] = labels[j];
               },
               &n_spill);
    if (threadIdx.x < K) {
        const long long j = (long long)(sel[threadIdx.x] & 0xffffffffu);
        c_sims[row * K + threadIdx.x] = s[j];
        c_labels[row * K + threadIdx.x] = labels[j];
    }
    if (threadIdx.x == 0)
        e[0] = n_spill;
}

// One block per own query i: the top K of the W K candidates received (rank p's at [p][i]),
// and the tie record: the labels of every candidate equal to the K-th, plus the extras of each
// rank whose own K-th equals it (count -1 if one overflowed).
__global__ void __launch_bounds__(THREADS)
    merge_topk(const bf16 *r_sims, const int64_t *r_labels, const int64_t *r_ex, int W, long long Q,
               int K, bf16 *out_sims, int64_t *out_labels, int64_t *ties, long long tie_stride) {
    __shared__ unsigned long long sel[THREADS];
    __shared__ int n_tie, overflow;
    const long long i = blockIdx.x;
    auto at = [&](long long j) { return ((j / K) * Q + i) * K + j % K; };
    int n_spill;
    const unsigned t = select_top([&](long long j) { return key_of(r_sims[at(j)]); },
                                  (long long)W * K, K, sel, [](int, long long) {}, &n_spill);
    if (threadIdx.x < K) {
        const long long j = at((long long)(sel[threadIdx.x] & 0xffffffffu));
        out_sims[i * K + threadIdx.x] = r_sims[j];
        out_labels[i * K + threadIdx.x] = r_labels[j];
    }
    if (threadIdx.x == 0)
        n_tie = overflow = 0;
    __syncthreads();
    int64_t *rec = ties + i * tie_stride;
    for (long long j = threadIdx.x; j < (long long)W * K; j += THREADS)
        if (key_of(r_sims[at(j)]) == t)
            rec[1 + atomicAdd(&n_tie, 1)] = r_labels[at(j)];
    __syncthreads();
    for (int p = 0; p < W; p++) {
        const int64_t *e = r_ex + (p * Q + i) * (1 + TIE_R);
        if (key_of(r_sims[(p * Q + i) * K + K - 1]) != t)
            continue;
        const int64_t c = e[0];
        if (c > TIE_R)
            overflow = 1;
        for (int x = threadIdx.x; x < c && x < TIE_R; x += THREADS)
            rec[1 + n_tie + x] = e[1 + x];
        __syncthreads();
        if (threadIdx.x == 0)
            n_tie += (int)(c < TIE_R ? c : TIE_R);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        rec[0] = overflow ? -1 : n_tie;
}

// Baseline, PKB's steps with NCCL's collectives: PKB's W broadcasts of the owners' queries as
// one all-gather; one cuBLAS GEMM of every rank's queries against this rank's shard (bf16 tensor
// cores, fp32 accumulation, bf16 out: PyTorch's matmul); this rank's top K of each row (radix
// select); PKB's W gathers as one group of send/recv (each owner gets its queries' candidates
// from every rank), and each owner's top K of the W K candidates. The tie record (the K-th's
// ties each rank left out of its candidates, TIE_R labels per row) travels with them: it is
// what check() needs, and costs (1 + TIE_R) 8 bytes per row on top of PKB's K (2 + 8).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long Q = call->dims[0], T = call->dims[1], D = call->dims[2];
    const int K = (int)call->dims[3];
    const bf16 *test = static_cast<const bf16 *>(call->args[0]);
    const bf16 *train = static_cast<const bf16 *>(call->args[1]);
    const int64_t *labels = static_cast<const int64_t *>(call->args[2]);
    bf16 *out_sims = static_cast<bf16 *>(call->args[3]);
    int64_t *out_labels = static_cast<int64_t *>(call->args[4]);
    cudaStream_t s = ctx->stream;
    if (K < 1 || K > KMAX || T < K)
        return 3000;
    int rc = blas_on(s);
    const long long WQ = W * Q;
    const size_t o_q = 0, o_ss = o_q + align256(WQ * D * sizeof(bf16)),
                 o_sl = o_ss + align256(WQ * K * sizeof(bf16)),
                 o_se = o_sl + align256(WQ * K * sizeof(int64_t)),
                 o_rs = o_se + align256(WQ * (1 + TIE_R) * sizeof(int64_t)),
                 o_rl = o_rs + align256(WQ * K * sizeof(bf16)),
                 o_re = o_rl + align256(WQ * K * sizeof(int64_t)),
                 nbytes = o_re + align256(WQ * (1 + TIE_R) * sizeof(int64_t));
    const long long tie_stride = 1 + (long long)W * (K + TIE_R);
    const size_t p_ties = align256(WQ * T * sizeof(bf16)),
                 pbytes = p_ties + align256(Q * tie_stride * sizeof(int64_t));
    if (!rc && g_ref.nccl_bytes < nbytes) {
        if (g_ref.nccl) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.nccl);
            g_ref.nccl = NULL;
            g_ref.nccl_bytes = 0;
        }
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.nccl, nbytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.nccl, nbytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.nccl_bytes = nbytes;
    }
    if (!rc && g_ref.plain_bytes < pbytes) {
        cudaFree(g_ref.plain);
        g_ref.plain = NULL;
        g_ref.plain_bytes = 0;
        rc = cuda_code(cudaMalloc((void **)&g_ref.plain, pbytes));
        if (!rc)
            g_ref.plain_bytes = pbytes;
    }
    if (rc)
        return rc;
    g_ref.ties = reinterpret_cast<int64_t *>(g_ref.plain + p_ties);
    g_ref.tie_stride = tie_stride;
    g_ref.tie_rows = Q;
    bf16 *qall = reinterpret_cast<bf16 *>(g_ref.nccl + o_q);
    bf16 *ss = reinterpret_cast<bf16 *>(g_ref.nccl + o_ss);
    int64_t *sl = reinterpret_cast<int64_t *>(g_ref.nccl + o_sl);
    int64_t *se = reinterpret_cast<int64_t *>(g_ref.nccl + o_se);
    bf16 *rs = reinterpret_cast<bf16 *>(g_ref.nccl + o_rs);
    int64_t *rl = reinterpret_cast<int64_t *>(g_ref.nccl + o_rl);
    int64_t *re = reinterpret_cast<int64_t *>(g_ref.nccl + o_re);
    bf16 *S = reinterpret_cast<bf16 *>(g_ref.plain);
    rc = nccl_code(ncclAllGather(test, qall, (size_t)(Q * D), ncclBfloat16, ctx->comm, s));
    if (rc)
        return rc;
    // row-major S (W Q x T) = qall (W Q x D) train (D x T): column-major S^T = train^T qall^T
    const float one = 1.f, zero = 0.f;
    rc = blas_code(cublasGemmEx(g_ref.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)T, (int)WQ, (int)D, &one,
                                train, CUDA_R_16BF, (int)T, qall, CUDA_R_16BF, (int)D, &zero, S,
                                CUDA_R_16BF, (int)T, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT_TENSOR_OP));
    if (rc)
        return rc;
    local_topk<<<(unsigned)WQ, THREADS, 0, s>>>(S, T, labels, K, ss, sl, se);
    rc = cuda_code(cudaGetLastError());
    const size_t nk = (size_t)(Q * K), ne = (size_t)(Q * (1 + TIE_R));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(rs + r * nk, ss + r * nk, nk * sizeof(bf16),
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(rl + r * nk, sl + r * nk, nk * sizeof(int64_t),
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(re + r * ne, se + r * ne, ne * sizeof(int64_t),
                                       cudaMemcpyDeviceToDevice, s));
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int k = 1; k < W && !rc; k++) {
        const int p = (r + k) % W;
        rc = nccl_code(ncclSend(ss + p * nk, nk, ncclBfloat16, p, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclSend(sl + p * nk, nk, ncclInt64, p, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclSend(se + p * ne, ne, ncclInt64, p, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(rs + p * nk, nk, ncclBfloat16, p, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(rl + p * nk, nk, ncclInt64, p, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(re + p * ne, ne, ncclInt64, p, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    merge_topk<<<(unsigned)Q, THREADS, 0, s>>>(rs, rl, re, W, Q, K, out_sims, out_labels,
                                               g_ref.ties, tie_stride);
    return cuda_code(cudaGetLastError());
}

// One thread per query: bad = the first place (row i K + j) where, in a run of equal sims (the
// reference's) above the K-th, got's labels are not want's (as multisets), or, in the K-th's
// run, a label occurs more often than in the tie record; ~1 on a record overflow. got's sims
// are not read: topk_sims has its own (exact) check, and in verified timed calls the runner
// keeps only samples of it (a custom output is kept whole).
__global__ void check_rows(const bf16 *ws, const int64_t *wl, const int64_t *gl, long long Q, int K,
                           const int64_t *ties, long long tie_stride, unsigned long long *bad) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= Q)
        return;
    const bf16 *a = ws + i * K;
    const int64_t *la = wl + i * K, *lb = gl + i * K, *rec = ties + i * tie_stride;
    const unsigned last = key_of(a[K - 1]);
    for (int j0 = 0; j0 < K;) {
        int j1 = j0 + 1;
        while (j1 < K && key_of(a[j1]) == key_of(a[j0]))
            j1++;
        const bool tail = key_of(a[j0]) == last;
        for (int j = j0; j < j1; j++) {
            int in_got = 0, in_want = 0;
            for (int x = j0; x < j1; x++)
                in_got += lb[x] == lb[j];
            if (tail) {
                if (rec[0] < 0) {
                    atomicMin(bad, ~1ull); // the record overflowed: check() reports an error
                    return;
                }
                for (long long x = 0; x < rec[0]; x++)
                    in_want += rec[1 + x] == lb[j];
            } else {
                for (int x = j0; x < j1; x++)
                    in_want += la[x] == lb[j];
            }
            if (tail ? in_got > in_want : in_got != in_want) {
                atomicMin(bad, (unsigned long long)(i * K + j));
                return;
            }
        }
        j0 = j1;
    }
}

// check(): topk_labels against the tie record the reference just made (the runner calls check()
// right after the reference on the same inputs, in trials and for every verified timed call).
// topk_sims is checked exactly by the generic checker.
static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    if (arg != 4)
        return -1;
    const long long Q = want->dims[0];
    const int K = (int)want->dims[3];
    if (!g_ref.ties || g_ref.tie_rows != Q)
        return 3001;
    cudaStream_t s = got->ctx->stream;
    unsigned long long bad = ~0ull;
    int rc = cuda_code(cudaMemsetAsync(g_ref.bad, 0xff, sizeof *g_ref.bad, s));
    if (rc)
        return rc;
    check_rows<<<(unsigned)((Q + 127) / 128), 128, 0, s>>>(
        static_cast<const bf16 *>(want->args[3]), static_cast<const int64_t *>(want->args[4]),
        static_cast<const int64_t *>(got->args[4]), Q, K, g_ref.ties, g_ref.tie_stride, g_ref.bad);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(&bad, g_ref.bad, sizeof bad, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    if (bad == ~1ull)
        return 3002; // more than TIE_R ties left out on one rank: the record is incomplete
    out->passed = bad == ~0ull;
    out->bad_index = out->passed ? -1 : (long long)bad;
    out->expected = out->got = out->max_abs = out->max_rel = 0;
    if (!out->passed) {
        int64_t w = 0, g = 0;
        rc = cuda_code(cudaMemcpy(&w, static_cast<const int64_t *>(want->args[4]) + bad, sizeof w,
                                  cudaMemcpyDeviceToHost));
        if (!rc)
            rc = cuda_code(cudaMemcpy(&g, static_cast<const int64_t *>(got->args[4]) + bad,
                                      sizeof g, cudaMemcpyDeviceToHost));
        out->expected = (double)w; // the reference's label there (one admissible choice)
        out->got = (double)g;
        out->max_abs = fabs(out->got - out->expected);
    }
    return rc;
}

// generate(): the features on the grid m 2^-9, |m| <= 127 (exact similarities, above), from the
// generic N(0, 1) draw x: m = rint(512 (a c + b x) / sqrt(D)), a row of norm ~1 (PKB normalises
// its randn rows). Even call keys: a = 0, b = 1 (PKB's i.i.d. features). Odd keys: clustered,
// as real embeddings are: 64 cluster centres c (N(0, 1), from the call's key, the same on every
// rank), a = 0.6, b = 0.8; each query draws its cluster uniformly, each training item of rank p
// draws, with probability 0.8, one of the clusters homed on p (cluster % W == p), else any. A
// query's nearest neighbours then sit mostly on one rank: a kernel that keeps a rank's share
// of K / W candidates, or its own shard only, fails. Labels: PKB's (r T + j) % 1000. From
// (seed, key, rank, index) and the generic draw alone: the harness can regenerate it.
static __device__ float normal_at(uint64_t h) {
    const double u1 = pk_splitmix_unit(h), u2 = pk_splitmix_unit(h ^ 0x9e3779b97f4a7c15ull);
    return (float)(sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2));
}

static __device__ bf16 on_grid(float v, long long D) {
    float m = rintf(v * 512.f / sqrtf((float)D));
    m = m > 127.f ? 127.f : m < -127.f ? -127.f : m;
    return __float2bfloat16(m / 512.f);
}

// train: row-major D x T (item j is column j); cl = the item's cluster (or -1: i.i.d.).
__global__ void gen_features(bf16 *x, long long rows, long long cols, int items_are_cols,
                             long long D, uint64_t kc, uint64_t ki, int W, int rank,
                             int clustered) {
    const long long n = rows * cols;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long item = items_are_cols ? e % cols : e / cols,
                        d = items_are_cols ? e / cols : e % cols;
        float v = __bfloat162float(x[e]);
        if (clustered) {
            const uint64_t h = pk_splitmix64(ki + (uint64_t)item);
            uint64_t c;
            if (!items_are_cols)
                c = h % 64;
            else if ((h >> 32) % 10 < 8)
                c = (uint64_t)W * (h % (uint64_t)(64 / W)) + (uint64_t)rank;
            else
                c = (h >> 8) % 64;
            v = 0.6f * normal_at(kc + c * (uint64_t)D + (uint64_t)d) + 0.8f * v;
        }
        x[e] = on_grid(v, D);
    }
}

__global__ void gen_labels(int64_t *lab, long long T, int rank) {
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < T;
         j += (long long)gridDim.x * blockDim.x)
        lab[j] = ((long long)rank * T + j) % 1000;
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int r = ctx->rank, W = ctx->world_size, clustered = key % 2 != 0;
    const long long Q = call->dims[0], T = call->dims[1], D = call->dims[2];
    const uint64_t k0 = pk_splitmix64(seed ^ pk_splitmix64(0x79c1ull << 32 ^ (uint64_t)key));
    const uint64_t kc = pk_splitmix64(k0 + 1);
    cudaStream_t s = ctx->stream;
    gen_features<<<1024, 256, 0, s>>>(static_cast<bf16 *>(call->args[0]), Q, D, 0, D, kc,
                                      pk_splitmix64(k0 + 2 + (uint64_t)r), W, r, clustered);
    gen_features<<<1024, 256, 0, s>>>(static_cast<bf16 *>(call->args[1]), D, T, 1, D, kc,
                                      pk_splitmix64(k0 + 100 + (uint64_t)r), W, r, clustered);
    gen_labels<<<64, 256, 0, s>>>(static_cast<int64_t *>(call->args[2]), T, r);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 5 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<bf16 *>(c->args[3]),
        static_cast<int64_t *>(c->args[4]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, check};
    return &module;
}
