// Correct, and not the reference: the gather of A^T overlaps the GEMM. The gathered matrix is
// A^T (K x M, in scratch), as in PKB's reference, so the rows of C in a chunk need the columns
// [c*Mc, (c+1)*Mc) of G = A^T, a 2D block with wide rows:
//   `gather` stream: a tiled transpose writes this rank's block of G (rows r*K/W..) from A_r; a
//   barrier (every peer's block is written); then for each chunk c the copy engines fetch the
//   chunk's columns of every peer's block from the peer's G into ours (2D cudaMemcpyAsync from
//   pk_peer pointers); a final barrier (every peer is done reading our block, so the next call
//   may overwrite it).
//   ctx->stream: the GEMM of chunk c (C rows c*Mc.. = G[:, chunk]^T B, cuBLAS reading G
//   transposed) starts as soon as chunk c has arrived, while the next chunks are fetched.
// Copy engines move the bytes, so the GEMMs keep the SMs; the all-gather's latency hides behind
// all but the first chunk's GEMM. The launches and copies of one call are captured once per
// buffer set into a CUDA graph and replayed.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>
#include <string.h>

typedef __nv_bfloat16 bf16;

#define MAX_CHUNKS 8
#define MIN_CHUNK_ROWS 128

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

static int blas_init(const pk_ctx *ctx) {
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&g_blas_ws, BLAS_WS_BYTES) != cudaSuccess || set_blas_stream(ctx->stream))
        return 1;
    // fp32 all the way inside the GEMM, also if cuBLAS splits K for a small chunk.
    cublasSetMathMode(g_blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    return 0;
}

static void blas_fini(void) {
    cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
}

// Row-major C[M x N] = op(A)[M x K] op(B)[K x N], fp32 accumulation (lda, ldb, ldc: row
// strides; ta: A stored as K x M). cuBLAS (column-major) computes C^T = op(B)^T op(A)^T.
static int gemm_rm(bool ta, size_t M, size_t N, size_t K, const bf16 *A, size_t lda, const bf16 *B,
                   size_t ldb, bf16 *C, size_t ldc) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g_blas, CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K,
                        &one, B, CUDA_R_16BF, (int)ldb, A, CUDA_R_16BF, (int)lda, &zero, C,
                        CUDA_R_16BF, (int)ldc, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}

// One CTA, LSA barrier 0: waits until every rank's stream has reached this point.
__global__ void rank_barrier(ncclDevComm comm) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Side streams at the highest priority, so their kernels get SMs ahead of queued GEMM tiles.
static int make_streams(cudaStream_t *s, int n) {
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    for (int i = 0; i < n; i++)
        if (cudaStreamCreateWithPriority(&s[i], cudaStreamNonBlocking, greatest) != cudaSuccess)
            return 1;
    return 0;
}

static int make_events(cudaEvent_t *e, int n) {
    for (int i = 0; i < n; i++)
        if (cudaEventCreateWithFlags(&e[i], cudaEventDisableTiming) != cudaSuccess)
            return 1;
    return 0;
}

// dst (cols x rows, row stride ldd) = src^T for src rows x cols (row stride lds): 32 x 32 tiles
// through shared memory, so reads and writes are both coalesced.
__global__ void transpose_tiles(const bf16 *src, size_t lds, bf16 *dst, size_t ldd, size_t rows,
                                size_t cols) {
    __shared__ bf16 tile[32][33];
    const size_t r0 = (size_t)blockIdx.y * 32, c0 = (size_t)blockIdx.x * 32;
    for (int i = threadIdx.y; i < 32; i += blockDim.y)
        if (r0 + i < rows && c0 + threadIdx.x < cols)
            tile[i][threadIdx.x] = src[(r0 + i) * lds + c0 + threadIdx.x];
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y)
        if (c0 + i < cols && r0 + threadIdx.x < rows)
            dst[(c0 + i) * ldd + r0 + threadIdx.x] = tile[threadIdx.x][i];
}

static void transpose_on(cudaStream_t s, const bf16 *src, size_t lds, bf16 *dst, size_t ldd,
                         size_t rows, size_t cols) {
    const dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + 31) / 32)), block(32, 8);
    transpose_tiles<<<grid, block, 0, s>>>(src, lds, dst, ldd, rows, cols);
}

static struct {
    int ready;
    cudaStream_t gather;
    cudaEvent_t start, done, fetched[MAX_CHUNKS];
} g;

static void destroy_graphs(void);

extern "C" int solution_init(const pk_ctx *ctx) {
    if (g.ready)
        return 0;
    if (blas_init(ctx) || make_streams(&g.gather, 1) || make_events(&g.start, 1) ||
        make_events(&g.done, 1) || make_events(g.fetched, MAX_CHUNKS))
        return 1;
    g.ready = 1;
    return 0;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (!g.ready)
        return 0;
    cudaStreamSynchronize(ctx->stream);
    destroy_graphs();
    cudaStreamDestroy(g.gather);
    cudaEventDestroy(g.start);
    cudaEventDestroy(g.done);
    for (int c = 0; c < MAX_CHUNKS; c++)
        cudaEventDestroy(g.fetched[c]);
    blas_fini();
    g.ready = 0;
    return 0;
}

// CUDA graphs of one call's work, one per distinct call (its buffers and sizes: the harness
// rotates a few buffer sets). A call seen for the first time runs directly (that loads the
// kernels and warms cuBLAS's heuristics); the second time it is captured and from then on
// replayed, one launch per call. If capture fails, every call runs directly: the same work in
// the same order, so ranks that differ in this still meet at the same barriers.
#define KEY_WORDS 8
#define MAX_GRAPHS 32
struct GraphKey {
    uintptr_t w[KEY_WORDS];
};
static struct {
    GraphKey key;
    cudaGraphExec_t exec;
} graphs[MAX_GRAPHS];
static int n_graphs, graphs_off;

static void destroy_graphs(void) {
    for (int i = 0; i < n_graphs; i++)
        if (graphs[i].exec)
            cudaGraphExecDestroy(graphs[i].exec);
    n_graphs = 0;
}

template <typename Enqueue>
static int run_cached(cudaStream_t stream, const GraphKey &key, Enqueue enqueue) {
    int i = 0;
    while (i < n_graphs && memcmp(&graphs[i].key, &key, sizeof key) != 0)
        i++;
    if (i < n_graphs && graphs[i].exec)
        return cudaGraphLaunch(graphs[i].exec, stream) != cudaSuccess;
    if (graphs_off || (i == n_graphs && n_graphs == MAX_GRAPHS))
        return enqueue();
    if (i == n_graphs) { // first sight
        graphs[n_graphs].key = key;
        graphs[n_graphs++].exec = NULL;
        return enqueue();
    }
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        graphs_off = 1;
        return enqueue();
    }
    const int rc = enqueue();
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    const cudaError_t e = cudaStreamEndCapture(stream, &graph);
    if (rc || e != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        cudaGetLastError();
        graphs_off = 1;
        return enqueue();
    }
    cudaGraphDestroy(graph);
    graphs[i].exec = exec;
    return cudaGraphLaunch(exec, stream) != cudaSuccess;
}

// Row chunks of C (at most MAX_CHUNKS, at least MIN_CHUNK_ROWS rows each), dividing M.
static int pick_chunks(size_t M) {
    size_t n = M / MIN_CHUNK_ROWS;
    n = n < 1 ? 1 : n > MAX_CHUNKS ? MAX_CHUNKS : n;
    while (M % n != 0)
        n--;
    return (int)n;
}

// The whole pipeline of one call, enqueued on ctx->stream (forking to and joining `gather`).
static int enqueue(const pk_ctx *ctx, const bf16 *A_local, const bf16 *B, bf16 *C, size_t M,
                   size_t N, size_t K) {
    const int W = ctx->world_size, r = ctx->rank;
    const size_t Kl = K / W;
    const int nch = pick_chunks(M);
    const size_t Mc = M / nch;
    bf16 *G = static_cast<bf16 *>(ctx->scratch); // A^T, K x M; rank q's block at rows q*Kl..

    cudaEventRecord(g.start, ctx->stream);
    cudaStreamWaitEvent(g.gather, g.start, 0);
    transpose_on(g.gather, A_local, Kl, G + r * Kl * M, M, M, Kl);
    rank_barrier<<<1, 32, 0, g.gather>>>(ctx->dev_comm); // every peer's block of G is written
    for (int c = 0; c < nch; c++) {
        for (int j = 1; j < W; j++) { // staggered, so ranks do not all read one peer first
            const int q = (r + j) % W;
            bf16 *dst = G + q * Kl * M + c * Mc;
            cudaMemcpy2DAsync(dst, M * sizeof(bf16), pk_peer(ctx, dst, q), M * sizeof(bf16),
                              Mc * sizeof(bf16), Kl, cudaMemcpyDeviceToDevice, g.gather);
        }
        cudaEventRecord(g.fetched[c], g.gather);
    }
    rank_barrier<<<1, 32, 0, g.gather>>>(ctx->dev_comm); // every peer is done reading our block
    cudaEventRecord(g.done, g.gather);

    for (int c = 0; c < nch; c++) {
        cudaStreamWaitEvent(ctx->stream, g.fetched[c], 0);
        if (gemm_rm(true, Mc, N, K, G + c * Mc, M, B, N, C + c * Mc * N, N))
            return 11;
    }
    cudaStreamWaitEvent(ctx->stream, g.done, 0);
    return cudaGetLastError() == cudaSuccess ? 0 : 12;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *A_local, const bf16 *B, bf16 *C, size_t M,
                        size_t N, size_t K) {
    if (solution_init(ctx) || set_blas_stream(ctx->stream))
        return 10;
    if (K % ctx->world_size != 0 || K * M * sizeof(bf16) > ctx->scratch_size)
        return 2;
    const GraphKey key = {{(uintptr_t)A_local, (uintptr_t)B, (uintptr_t)C, M, N, K}};
    return run_cached(ctx->stream, key, [&] { return enqueue(ctx, A_local, B, C, M, N, K); });
}
