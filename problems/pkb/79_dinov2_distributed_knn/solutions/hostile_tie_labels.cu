// Hostile (must be incorrect): correct.cu with exact sims, but the run of the K-th similarity
// gets the label of the best item just below it (a neighbour that did not make the top K).
// A checker of the sims alone, or of the labels above the K-th only, accepts it; problem.cu's
// check() finds a label outside the recorded tie set (or one too many times) in every call.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 256 // top-k blocks; THREADS >= K (the bitonic sort holds K candidates)
#define BLAS_WS_BYTES ((size_t)32 << 20)

static struct {
    cublasHandle_t blas;
    void *ws;
    cudaStream_t stream;
    bf16 *qall, *S;
    size_t bytes;
} g;

static int blas_on(cudaStream_t s) {
    if (g.stream == s)
        return 0;
    if (cublasSetStream(g.blas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g.blas, g.ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS)
        return 1;
    g.stream = s;
    return 0;
}

extern "C" int solution_init(const pk_ctx *ctx) {
    if (g.blas)
        return 0;
    if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS || cudaMalloc(&g.ws, BLAS_WS_BYTES))
        return 1;
    return blas_on(ctx->stream);
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    (void)ctx;
    if (g.blas)
        cublasDestroy(g.blas);
    cudaFree(g.ws);
    cudaFree(g.qall);
    g = {};
    return 0;
}

static __device__ __forceinline__ unsigned key_of(bf16 v) {
    unsigned short u = __bfloat16_as_ushort(v);
    if (u == 0x8000u)
        u = 0;
    return (u & 0x8000u) ? (~u & 0xffffu) : (u | 0x8000u);
}

// The K-th largest key t of key(0 .. n-1) and the count above it: two 8-bit histogram passes.
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

// The top K of key(0 .. n-1) into sel, sorted descending ((key + 1) << 32 | index; 0 past K).
template <class F>
static __device__ unsigned top_k(F key, long long n, int K, unsigned long long *sel) {
    __shared__ int n_above, n_eq;
    unsigned t;
    int above;
    kth_key(key, n, K, &t, &above);
    sel[threadIdx.x] = 0;
    if (threadIdx.x == 0)
        n_above = n_eq = 0;
    __syncthreads();
    for (long long j = threadIdx.x; j < n; j += THREADS) {
        const unsigned k = key(j);
        if (k > t) {
            sel[atomicAdd(&n_above, 1)] = (unsigned long long)(k + 1) << 32 | (unsigned long long)j;
        } else if (k == t) {
            const int e = atomicAdd(&n_eq, 1);
            if (e < K - above)
                sel[above + e] = (unsigned long long)(k + 1) << 32 | (unsigned long long)j;
        }
    }
    for (int size = 2; size <= THREADS; size *= 2)
        for (int stride = size / 2; stride > 0; stride /= 2) {
            __syncthreads();
            const int i = threadIdx.x, j = i ^ stride;
            if (j > i) {
                const bool desc = (i & size) == 0;
                const unsigned long long a = sel[i], b = sel[j];
                if (desc ? a < b : a > b) {
                    sel[i] = b;
                    sel[j] = a;
                }
            }
        }
    __syncthreads();
    return t;
}

// qall[o Q + i] = owner o's query i, read from its test_features.
__global__ void __launch_bounds__(THREADS)
    pull_queries(ncclDevComm comm, ncclWindow_t win, size_t test_off, uint4 *qall, int world,
                 long long per_rank) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < world * per_rank;
         e += (long long)gridDim.x * THREADS) {
        const int o = (int)(e / per_rank);
        qall[e] = static_cast<const uint4 *>(ncclGetLsaPointer(win, test_off, o))[e % per_rank];
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Row o Q + i of S: this rank's top K, stored into owner o's scratch at [rank][i].
__global__ void __launch_bounds__(THREADS)
    local_topk(ncclWindow_t win, size_t sims_off, size_t labels_off, const bf16 *S, long long T,
               const int64_t *labels, long long Q, int K, int rank) {
    __shared__ unsigned long long sel[THREADS];
    const long long row = blockIdx.x, o = row / Q, i = row % Q;
    const bf16 *s = S + row * T;
    top_k([&](long long j) { return key_of(s[j]); }, T, K, sel);
    if (threadIdx.x < K) {
        const long long j = (long long)(sel[threadIdx.x] & 0xffffffffu),
                        at = ((long long)rank * Q + i) * K + threadIdx.x;
        static_cast<bf16 *>(ncclGetLsaPointer(win, sims_off, (int)o))[at] = s[j];
        static_cast<int64_t *>(ncclGetLsaPointer(win, labels_off, (int)o))[at] = labels[j];
    }
}

// After the barrier (every rank's candidates are in our scratch): query i's top K of W K.
__global__ void __launch_bounds__(THREADS)
    merge(ncclDevComm comm, const bf16 *c_sims, const int64_t *c_labels, int world, long long Q,
          int K, bf16 *out_sims, int64_t *out_labels) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    __shared__ unsigned long long sel[THREADS];
    for (long long i = blockIdx.x; i < Q; i += gridDim.x) {
        auto at = [&](long long j) { return ((j / K) * Q + i) * K + j % K; };
        const unsigned t =
            top_k([&](long long j) { return key_of(c_sims[at(j)]); }, (long long)world * K, K, sel);
        __shared__ unsigned long long below; // the best candidate under the K-th value
        if (threadIdx.x == 0)
            below = 0;
        __syncthreads();
        for (long long j = threadIdx.x; j < (long long)world * K; j += THREADS) {
            const unsigned k = key_of(c_sims[at(j)]);
            if (k < t)
                atomicMax(&below, (unsigned long long)(k + 1) << 32 | (unsigned long long)j);
        }
        __syncthreads();
        if (threadIdx.x < K) {
            const unsigned long long e = sel[threadIdx.x];
            const long long j = at((long long)(e & 0xffffffffu));
            out_sims[i * K + threadIdx.x] = c_sims[j];
            out_labels[i * K + threadIdx.x] = (e >> 32) == t + 1 && below
                                                  ? c_labels[at((long long)(below & 0xffffffffu))]
                                                  : c_labels[j];
        }
        __syncthreads();
    }
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *test_features, const bf16 *train_features_T,
                        const int64_t *train_labels, bf16 *topk_sims, int64_t *topk_labels,
                        size_t Q, size_t T, size_t D, size_t K) {
    const int W = ctx->world_size;
    const size_t WQ = (size_t)W * Q, sims_bytes = (WQ * K * sizeof(bf16) + 255) / 256 * 256;
    if (K < 1 || K > THREADS || T < K || D % 8 != 0 ||
        sims_bytes + WQ * K * sizeof(int64_t) > ctx->scratch_size)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA of the barrier kernels waits for its twin on each peer: all must be resident.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1 || blas_on(ctx->stream))
        return 3;
    const size_t qbytes = (WQ * D * sizeof(bf16) + 255) / 256 * 256,
                 need = qbytes + WQ * T * sizeof(bf16);
    if (g.bytes < need) { // cached across calls
        cudaFree(g.qall);
        g.qall = NULL;
        g.bytes = 0;
        if (cudaMalloc(&g.qall, need) != cudaSuccess)
            return 4;
        g.S = reinterpret_cast<bf16 *>(reinterpret_cast<char *>(g.qall) + qbytes);
        g.bytes = need;
    }
    cudaStream_t s = ctx->stream;
    bf16 *c_sims = static_cast<bf16 *>(ctx->scratch);
    int64_t *c_labels = reinterpret_cast<int64_t *>(static_cast<char *>(ctx->scratch) + sims_bytes);
    pull_queries<<<grid, THREADS, 0, s>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, test_features),
        reinterpret_cast<uint4 *>(g.qall), W, (long long)(Q * D / 8));
    const float one = 1.f, zero = 0.f; // column-major S^T (T x W Q) = train^T qall^T
    if (cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)T, (int)WQ, (int)D, &one,
                     train_features_T, CUDA_R_16BF, (int)T, g.qall, CUDA_R_16BF, (int)D, &zero, g.S,
                     CUDA_R_16BF, (int)T, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
        return 5;
    local_topk<<<(unsigned)WQ, THREADS, 0, s>>>(ctx->window, pk_sym_offset(ctx, c_sims),
                                                pk_sym_offset(ctx, c_labels), g.S, (long long)T,
                                                train_labels, (long long)Q, (int)K, ctx->rank);
    merge<<<grid, THREADS, 0, s>>>(ctx->dev_comm, c_sims, c_labels, W, (long long)Q, (int)K,
                                   topk_sims, topk_labels);
    return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
