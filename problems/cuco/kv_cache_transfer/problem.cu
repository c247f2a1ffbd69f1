// cuco/kv_cache_transfer (CUCo's KV-cache transfer workload, arXiv CUCo section 4: "KV-Cache
// Transfer", disaggregated prefill-decode serving, hidden dimension 4096, NVLink), in the paged
// layout of a serving engine's KV cache (vLLM's: blocks of BS token slots, a block table per
// sequence). Rank r is the prefill rank of its own B sequences and the decode rank of its
// partner's: p = (r + W/2) % W (W/2 prefill-decode pairs, both directions used).
// Rank r holds x (T x H, bf16: its sequences' prompt tokens, packed: sequence b is rows
// [start_b, start_b + seq_lens[b]), start_b = seq_lens[0] + ... + seq_lens[b-1], rows beyond the
// total unused), the projections w_k, w_v (H x D, the same on every rank), seq_lens (B) and
// block_table (B x MB: page m of sequence b is block block_table[b][m] of the partner's cache),
// and the partner's peer_seq_lens and peer_block_table (the same numbers the partner holds).
//   K = bf16(x w_k), V = bf16(x w_v)                              (fp32 accumulation)
//   for the partner's token i < peer_seq_lens[b] of its sequence b, page =
//   peer_block_table[b][i/BS]:
//     k_cache_r[page][i % BS][:] = K_p[start_b + i][:],   v_cache_r likewise
//   every other slot of k_cache_r and v_cache_r keeps its value (other requests' KV).
// The lengths are ragged (zero-length sequences, ragged last pages, one long sequence, a rank
// with nothing to send) and the pages are scattered over the cache; generate() draws them.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;

#define KV_BMAX 64                // constraint B <= 64
#define KEY_POST_TIMING (1 << 20) // problems/runner/pk_runner.h: the call checked after timing
#define KEY_TIMED_BASE (1 << 21)  // ... and the first timed call's key

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const int64_t *,
                        const int32_t *, const int64_t *, const int32_t *, bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// ---------------------------------------------------------------------------------------------
// Lengths and block tables of one call, the same on every rank (a function of seed and key).
// ---------------------------------------------------------------------------------------------

static uint64_t draw(uint64_t base, uint64_t i) {
    return pk_splitmix64(base + i);
}
static double unit(uint64_t base, uint64_t i) {
    return pk_splitmix_unit(base + i);
}

static void apportion(long long total, const double *w, int n, long long *out) {
    double sum = 0;
    int big = 0;
    for (int j = 0; j < n; j++) {
        sum += w[j];
        big = w[j] > w[big] ? j : big;
    }
    long long used = 0;
    for (int j = 0; j < n; j++) {
        out[j] = (long long)floor((double)total * (w[j] / sum));
        used += out[j];
    }
    out[big] += total - used;
}

struct Lens {
    long long len[KV_BMAX];
};

// Rank q's B sequence lengths for call `key`. Trials by key % 4 (the call after timing: 1):
// 0 equal, T / B each (the remainder to the last): whole pages when T / B is a multiple of BS;
// 1 ragged: weights 1..e^3, a quarter of them zero (zero-length sequences, ragged last pages);
// 2 one long sequence: the others 0..2 BS - 1 tokens (30% zero), the long one the rest;
// 3 one rank (drawn) sends nothing, the others ragged with a total in [T/2, T].
// Modes 0-2 fill the T rows exactly. Timed calls: mode (key + q) % 3, every rank T tokens, so
// every timed call moves the same bytes (the roofline counts them).
static void kv_lens(uint64_t seed, int key, int q, int W, long long B, long long T, long long BS,
                    Lens *out) {
    const uint64_t base =
        pk_splitmix64(seed ^ pk_splitmix64(0x6b766300ULL + (uint64_t)(unsigned)key));
    const uint64_t rb = pk_splitmix64(base ^ (0x100ULL + (uint64_t)q));
    long long *len = out->len, total = T;
    int mode;
    if (key >= KEY_TIMED_BASE)
        mode = (int)(((long long)key + q) % 3);
    else
        mode = key == KEY_POST_TIMING ? 1 : ((key % 4) + 4) % 4;
    for (int b = 0; b < KV_BMAX; b++)
        len[b] = 0;
    if (mode == 3) {
        if (q == (int)(draw(base, 1) % (uint64_t)W))
            return; // the empty rank
        total = T / 2 + (long long)(draw(rb, 2) % (uint64_t)(T / 2 + 1));
        mode = 1;
    }
    if (mode == 0) {
        for (int b = 0; b < B; b++)
            len[b] = total / B;
        len[B - 1] += total % B;
    } else if (mode == 1) {
        double w[KV_BMAX];
        for (int b = 0; b < B; b++)
            w[b] = unit(rb, 10 + (uint64_t)b) < 0.25 ? 0.0 : exp(3.0 * unit(rb, 100 + (uint64_t)b));
        w[draw(rb, 3) % (uint64_t)B] += 1.0; // some weight is > 0
        apportion(total, w, (int)B, len);
    } else {
        const int big = (int)(draw(rb, 4) % (uint64_t)B);
        long long rest = 0;
        for (int b = 0; b < B; b++) {
            if (b == big)
                continue;
            len[b] = unit(rb, 200 + (uint64_t)b) < 0.3
                         ? 0
                         : (long long)(draw(rb, 300 + (uint64_t)b) % (uint64_t)(2 * BS));
            rest += len[b];
        }
        len[big] = total - rest; // constraint T >= 2 BS B: >= 0
    }
}

// The pages of rank q's sequences in the partner's cache: page j (pages numbered sequence by
// sequence) is block (a j + c) mod NB, a bijection (a coprime to NB), so the pages land
// scattered over the cache; a table entry beyond a sequence's pages names another block no
// sequence uses (a kernel that reads one entry too far writes a slot it must leave alone).
struct Perm {
    unsigned long long a, c;
};

static unsigned long long gcd_u(unsigned long long x, unsigned long long y) {
    while (y) {
        const unsigned long long t = x % y;
        x = y;
        y = t;
    }
    return x;
}

static Perm kv_perm(uint64_t seed, int key, int q, long long NB) {
    const uint64_t base =
        pk_splitmix64(seed ^ pk_splitmix64(0x6b767400ULL + (uint64_t)(unsigned)key));
    const uint64_t rb = pk_splitmix64(base ^ (0x100ULL + (uint64_t)q));
    Perm p;
    p.a = 1 + draw(rb, 1) % (unsigned long long)NB;
    while (gcd_u(p.a, (unsigned long long)NB) != 1)
        p.a = p.a % (unsigned long long)NB + 1;
    p.c = draw(rb, 2) % (unsigned long long)NB;
    return p;
}

__global__ void table_kernel(Lens L, Perm pm, int B, long long MB, long long BS, long long NB,
                             int64_t *lens, int32_t *table) {
    __shared__ long long pre[KV_BMAX + 1]; // pages before sequence b; [B]: every page
    if (threadIdx.x == 0) {
        pre[0] = 0;
        for (int b = 0; b < B; b++)
            pre[b + 1] = pre[b] + (L.len[b] + BS - 1) / BS;
    }
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x < B)
        lens[threadIdx.x] = L.len[threadIdx.x];
    const long long P = pre[B];
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < B * MB;
         e += (long long)gridDim.x * blockDim.x) {
        const int b = (int)(e / MB);
        const long long m = e % MB;
        const long long j = m < pre[b + 1] - pre[b] ? pre[b] + m : P + e % (NB - P);
        table[e] = (int32_t)((pm.a % (unsigned long long)NB * (unsigned long long)j + pm.c) %
                             (unsigned long long)NB);
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank, p = (r + W / 2) % W;
    const long long T = call->dims[0], B = call->dims[3], BS = call->dims[4], MB = call->dims[5],
                    NB = call->dims[6];
    for (int side = 0; side < 2; side++) { // 0: this rank's sequences, 1: the partner's
        const int q = side ? p : r;
        Lens L;
        kv_lens(seed, key, q, W, B, T, BS, &L);
        table_kernel<<<64, 256, 0, ctx->stream>>>(L, kv_perm(seed, key, q, NB), (int)B, MB, BS, NB,
                                                  static_cast<int64_t *>(call->args[3 + 2 * side]),
                                                  static_cast<int32_t *>(call->args[4 + 2 * side]));
    }
    return cuda_code(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// The reference: CUCo's host-driven baseline. Lengths to the host (a stream synchronisation),
// two cuBLAS GEMMs (K, then V) of the used rows into staging buffers, one NCCL group sending
// them to the partner and receiving the partner's, then a kernel that scatters the received
// rows into this rank's paged cache by the partner's block table. No overlap.
// ---------------------------------------------------------------------------------------------

#define BLAS_WS_BYTES ((size_t)32 << 20)
static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;
static int64_t *g_host; // pinned: [0, B) seq_lens, [B, 2B) peer_seq_lens

static int blas_on(cudaStream_t stream) {
    if (g_blas_stream == stream)
        return 0;
    int rc = blas_code(cublasSetStream(g_blas, stream));
    if (!rc)
        rc = blas_code(cublasSetWorkspace(g_blas, g_blas_ws, BLAS_WS_BYTES));
    g_blas_stream = rc ? NULL : stream;
    return rc;
}

static int init(const pk_ctx *ctx) {
    int rc = 0;
    if (!g_host)
        rc = cuda_code(cudaMallocHost((void **)&g_host, 2 * KV_BMAX * sizeof(int64_t)));
    if (!rc && !g_blas) {
        rc = blas_code(cublasCreate(&g_blas));
        if (!rc)
            rc = cuda_code(cudaMalloc(&g_blas_ws, BLAS_WS_BYTES));
    }
    return rc ? rc : blas_on(ctx->stream);
}

// Staging buffers (ncclMemAlloc'ed and registered as NCCL windows, as the harness makes its own
// outputs: NCCL 2.28 can hang between registered and plain memory): [0] K and V of this rank's
// rows, [1] the partner's received. Made in the first reference call (a correctness trial:
// registration is collective, every rank in the same order).
static struct {
    void *p;
    size_t bytes;
    ncclWindow_t win;
} g_bufs[2];

static int ref_buffer(const pk_ctx *ctx, int i, size_t bytes, bf16 **out) {
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
    *out = static_cast<bf16 *>(g_bufs[i].p);
    return 0;
}

static void fini(const pk_ctx *ctx) {
    for (int i = 0; i < 2; i++)
        if (g_bufs[i].p) {
            ncclCommWindowDeregister(ctx->comm, g_bufs[i].win);
            ncclMemFree(g_bufs[i].p);
            g_bufs[i].p = NULL;
            g_bufs[i].bytes = 0;
        }
    if (g_blas)
        cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    if (g_host)
        cudaFreeHost(g_host);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
    g_host = NULL;
}

// Row-major C[M x N] = A[M x K] B[K x N], bf16 in and out, fp32 accumulation on the tensor cores
// (torch.matmul's). cuBLAS is column-major: it computes C^T = B^T A^T.
static int gemm_rm(int M, int N, int K, const bf16 *A, const bf16 *B, bf16 *C) {
    const float one = 1.f, zero = 0.f;
    return blas_code(cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF,
                                  N, A, CUDA_R_16BF, K, &zero, C, CUDA_R_16BF, N,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
}

// Received row t (of the partner's packed rows) to its slot: sequence b with start_b <= t <
// start_{b+1}, token i = t - start_b, block peer_table[b][i / BS], slot i % BS. V is a 16-byte
// vector where D % 8 == 0, else one bf16.
template <typename V>
__global__ void scatter_pages(const V *k_rows, const V *v_rows, const int64_t *lens,
                              const int32_t *table, V *k_cache, V *v_cache, int B, long long MB,
                              long long BS, long long NB, long long vecs) {
    __shared__ long long start[KV_BMAX + 1];
    if (threadIdx.x == 0) {
        start[0] = 0;
        for (int b = 0; b < B; b++)
            start[b + 1] = start[b] + lens[b];
    }
    __syncthreads();
    const long long n = start[B] * vecs;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long t = e / vecs, v = e % vecs;
        int lo = 0, hi = B - 1; // the last b with start[b] <= t: an empty sequence is skipped
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (start[mid] <= t)
                lo = mid;
            else
                hi = mid - 1;
        }
        const long long i = t - start[lo];
        long long page = table[lo * MB + i / BS];
        page = page < 0 ? 0 : page >= NB ? NB - 1 : page; // the generator writes valid blocks
        const long long dst = (page * BS + i % BS) * vecs + v;
        k_cache[dst] = k_rows[e];
        v_cache[dst] = v_rows[e];
    }
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, p = (ctx->rank + W / 2) % W;
    const long long T = call->dims[0], H = call->dims[1], D = call->dims[2], B = call->dims[3],
                    BS = call->dims[4], MB = call->dims[5], NB = call->dims[6];
    const bf16 *x = static_cast<const bf16 *>(call->args[0]);
    const bf16 *w_k = static_cast<const bf16 *>(call->args[1]);
    const bf16 *w_v = static_cast<const bf16 *>(call->args[2]);
    const int64_t *peer_lens = static_cast<const int64_t *>(call->args[5]);
    const int32_t *peer_table = static_cast<const int32_t *>(call->args[6]);
    bf16 *k_cache = static_cast<bf16 *>(call->args[7]),
         *v_cache = static_cast<bf16 *>(call->args[8]);
    cudaStream_t s = ctx->stream;
    bf16 *mine = NULL, *theirs = NULL;
    int rc = init(ctx);
    if (!rc)
        rc = ref_buffer(ctx, 0, (size_t)(2 * T * D) * sizeof(bf16), &mine);
    if (!rc)
        rc = ref_buffer(ctx, 1, (size_t)(2 * T * D) * sizeof(bf16), &theirs);
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(g_host, call->args[3], B * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(g_host + B, peer_lens, B * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    long long n = 0, m = 0;
    for (int b = 0; b < B; b++) {
        if (g_host[b] < 0 || g_host[B + b] < 0 || g_host[b] > MB * BS || g_host[B + b] > MB * BS)
            return 3000;
        n += g_host[b];
        m += g_host[B + b];
    }
    if (n > T || m > T)
        return 3001; // not this problem's inputs
    // K rows then V rows, each T x D: the partner's staging has the same layout.
    if (n > 0)
        rc = gemm_rm((int)n, (int)D, (int)H, x, w_k, mine);
    if (!rc && n > 0)
        rc = gemm_rm((int)n, (int)D, (int)H, x, w_v, mine + T * D);
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    if (!rc && n > 0)
        rc = nccl_code(ncclSend(mine, (size_t)(n * D), ncclBfloat16, p, ctx->comm, s));
    if (!rc && n > 0)
        rc = nccl_code(ncclSend(mine + T * D, (size_t)(n * D), ncclBfloat16, p, ctx->comm, s));
    if (!rc && m > 0)
        rc = nccl_code(ncclRecv(theirs, (size_t)(m * D), ncclBfloat16, p, ctx->comm, s));
    if (!rc && m > 0)
        rc = nccl_code(ncclRecv(theirs + T * D, (size_t)(m * D), ncclBfloat16, p, ctx->comm, s));
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end || m == 0)
        return rc ? rc : end;
    const unsigned grid = 4 * 132;
    if (D % 8 == 0)
        scatter_pages<<<grid, 256, 0, s>>>(
            reinterpret_cast<const uint4 *>(theirs),
            reinterpret_cast<const uint4 *>(theirs + T * D), peer_lens, peer_table,
            reinterpret_cast<uint4 *>(k_cache), reinterpret_cast<uint4 *>(v_cache), (int)B, MB, BS,
            NB, D / 8);
    else
        scatter_pages<<<grid, 256, 0, s>>>(theirs, theirs + T * D, peer_lens, peer_table, k_cache,
                                           v_cache, (int)B, MB, BS, NB, D);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 9 || c->n_dims < 7)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const int64_t *>(c->args[3]),
        static_cast<const int32_t *>(c->args[4]), static_cast<const int64_t *>(c->args[5]),
        static_cast<const int32_t *>(c->args[6]), static_cast<bf16 *>(c->args[7]),
        static_cast<bf16 *>(c->args[8]), (size_t)c->dims[0], (size_t)c->dims[1], (size_t)c->dims[2],
        (size_t)c->dims[3], (size_t)c->dims[4], (size_t)c->dims[5], (size_t)c->dims[6]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
