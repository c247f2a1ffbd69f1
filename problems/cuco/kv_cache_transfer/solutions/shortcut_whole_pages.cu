// Shortcut (incorrect): copies every page whole, BS slots of 16-byte rows with no test of the
// sequence's end (what a page-granular copy engine or DMA descriptor does, and faster). The
// unused tail of a ragged last page then gets the next sequence's rows (or rows beyond the
// total) instead of keeping its old value. On equal page-aligned lengths (trial 0) it is right;
// every ragged length breaks it. Otherwise solutions/correct.cu.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 512
#define BMAX 64

#define BLAS_WS_BYTES ((size_t)32 << 20)
static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;

static int set_blas_stream(cudaStream_t s) {
    if (g_blas_stream == s)
        return 0;
    if (cublasSetStream(g_blas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g_blas, g_blas_ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS)
        return 1;
    g_blas_stream = s;
    return 0;
}

extern "C" int solution_init(const pk_ctx *ctx) {
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&g_blas_ws, BLAS_WS_BYTES) != cudaSuccess)
        return 1;
    return set_blas_stream(ctx->stream);
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    (void)ctx;
    cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
    return 0;
}

// Row-major C[M x N] = A[M x K] B[K x N], fp32 accumulation; cuBLAS computes C^T = B^T A^T.
static int gemm_rm(size_t M, size_t N, size_t K, const bf16 *A, const bf16 *B, bf16 *C) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
                        CUDA_R_16BF, (int)N, A, CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}

__global__ void __launch_bounds__(THREADS)
    pull_pages(ncclDevComm comm, ncclWindow_t win, size_t staged_off, int partner,
               const int64_t *lens, const int32_t *table, uint4 *k_cache, uint4 *v_cache, int B,
               long long T, long long MB, long long BS, long long NB, long long vecs) {
    __shared__ long long start[BMAX + 1], pre[BMAX + 1]; // rows and pages before sequence b
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    if (threadIdx.x == 0) {
        start[0] = 0;
        for (int b = 0; b < B; b++)
            start[b + 1] = start[b] + lens[b];
        pre[0] = 0;
        for (int b = 0; b < B; b++)
            pre[b + 1] = pre[b] + (lens[b] + BS - 1) / BS;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const uint4 *k_rows = static_cast<const uint4 *>(ncclGetLsaPointer(win, staged_off, partner));
    const uint4 *v_rows = k_rows + T * vecs;
    const long long n = pre[B] * BS * vecs; // every page whole: BS slots, no tail test
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const long long g = e / (BS * vecs), slot = e / vecs % BS;
        int lo = 0, hi = B - 1; // the last sequence whose pages start at or before page g
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (pre[mid] <= g)
                lo = mid;
            else
                hi = mid - 1;
        }
        const long long m = g - pre[lo];
        long long row = start[lo] + m * BS + slot;
        row = row < T ? row : T - 1;
        long long page = table[lo * MB + m];
        page = page < 0 ? 0 : page >= NB ? NB - 1 : page;
        const long long dst = (page * BS + slot) * vecs + e % vecs, src = row * vecs + e % vecs;
        const uint4 k = k_rows[src], v = v_rows[src];
        k_cache[dst] = k;
        v_cache[dst] = v;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, const __nv_bfloat16 *w_k,
                        const __nv_bfloat16 *w_v, const int64_t *seq_lens,
                        const int32_t *block_table, const int64_t *peer_seq_lens,
                        const int32_t *peer_block_table, __nv_bfloat16 *k_cache,
                        __nv_bfloat16 *v_cache, size_t T, size_t H, size_t D, size_t B, size_t BS,
                        size_t MB, size_t NB) {
    (void)seq_lens;
    (void)block_table;
    if (D % 8 != 0 || B > BMAX || ((uintptr_t)k_cache | (uintptr_t)v_cache) % 16 != 0)
        return 1;
    if (ctx->scratch_size < 2 * T * D * sizeof(bf16))
        return 2;
    bf16 *staged = static_cast<bf16 *>(ctx->scratch);
    if (set_blas_stream(ctx->stream) || gemm_rm(T, D, H, x, w_k, staged) ||
        gemm_rm(T, D, H, x, w_v, staged + T * D))
        return 3;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 4;
    // Every CTA waits for its twin on the partner: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 5;
    const int partner = (ctx->rank + ctx->world_size / 2) % ctx->world_size;
    pull_pages<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, staged), partner, peer_seq_lens,
        peer_block_table, reinterpret_cast<uint4 *>(k_cache), reinterpret_cast<uint4 *>(v_cache),
        (int)B, (long long)T, (long long)MB, (long long)BS, (long long)NB, (long long)(D / 8));
    return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
