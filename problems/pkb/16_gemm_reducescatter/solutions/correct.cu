// Correct, and not the reference: the GEMM runs in chunks on ctx->stream, and the
// reduce-scatter of each finished chunk overlaps the GEMMs of the chunks after it. Chunk j holds,
// for every destination rank d, rows [d*Mr + j*Ms, d*Mr + (j+1)*Ms) of the M x N partial product
// (Mr = M/W rows per rank, Ms = Mr/nch): one strided-batched GEMM over d computes it.
//   1. `rs` stream: once chunk j is in scratch, the copy engines send every peer q its rows, into
//      q's receive buffer (cudaMemcpyAsync to pk_peer pointers);
//   2. `red` stream: a kernel waits (LSA barrier) until every peer has sent this rank its rows of
//      chunk j, sums the W partials in fp32 in rank order and rounds once into the output.
// Copy engines move the bytes, so the GEMMs keep the SMs. Per direction each rank sends and
// receives (W-1)/W of the partial product, the reduce-scatter minimum. The launches and copies
// of one call are captured once per buffer set into a CUDA graph and replayed.
//
// Numerics: the partials are rounded to bf16 as in the reference (bf16(A_s B_s)), then summed in
// fp32 and rounded once: at W = 2 exactly NCCL's bf16(P_0 + P_1), at W > 2 more accurate.
//
// Cross-rank safety: a peer's receive buffer is written only by this call's copies, after the
// peer's previous call passed its final barrier, which needs this rank to have finished reading
// its own receive buffer; the final barrier of this call does the same for the next.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>
#include <string.h>

typedef __nv_bfloat16 bf16;

#define MAX_CHUNKS 8
#define CHUNK_BYTES ((size_t)4 << 20) /* target size of one chunk of C */
#define RED_THREADS 512
#define RED_CTAS 64
#define UNROLL 4
#define BLAS_WS_BYTES ((size_t)32 << 20)

static struct {
    int ready;
    cublasHandle_t blas;
    void *blas_ws;
    cudaStream_t blas_stream;
    cudaStream_t rs, red;
    cudaEvent_t start, gemm[MAX_CHUNKS], sent[MAX_CHUNKS], done;
    int red_ctas;
} g;

static int set_blas_stream(cudaStream_t s) {
    if (g.blas_stream == s)
        return 0;
    if (cublasSetStream(g.blas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g.blas, g.blas_ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS)
        return 1;
    g.blas_stream = s;
    return 0;
}

extern "C" int solution_init(const pk_ctx *ctx) {
    if (g.ready)
        return 0;
    if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&g.blas_ws, BLAS_WS_BYTES) != cudaSuccess || set_blas_stream(ctx->stream))
        return 1;
    // fp32 all the way inside the GEMM, also if cuBLAS splits K for a small chunk.
    cublasSetMathMode(g.blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    cudaStream_t *streams[2] = {&g.rs, &g.red};
    for (int i = 0; i < 2; i++)
        if (cudaStreamCreateWithPriority(streams[i], cudaStreamNonBlocking, greatest) !=
            cudaSuccess)
            return 2;
    cudaEvent_t *events[2 + 2 * MAX_CHUNKS];
    int n = 0;
    events[n++] = &g.start;
    events[n++] = &g.done;
    for (int c = 0; c < MAX_CHUNKS; c++) {
        events[n++] = &g.gemm[c];
        events[n++] = &g.sent[c];
    }
    for (int i = 0; i < n; i++)
        if (cudaEventCreateWithFlags(events[i], cudaEventDisableTiming) != cudaSuccess)
            return 3;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    g.red_ctas = RED_CTAS < sms ? RED_CTAS : sms;
    if (g.red_ctas > ctx->lsa_barrier_count)
        g.red_ctas = ctx->lsa_barrier_count;
    g.ready = g.red_ctas > 0;
    return g.ready ? 0 : 4;
}

static void destroy_graphs(void);

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (!g.ready)
        return 0;
    cudaStreamSynchronize(ctx->stream);
    destroy_graphs();
    cudaStreamDestroy(g.rs);
    cudaStreamDestroy(g.red);
    cudaEventDestroy(g.start);
    cudaEventDestroy(g.done);
    for (int c = 0; c < MAX_CHUNKS; c++) {
        cudaEventDestroy(g.gemm[c]);
        cudaEventDestroy(g.sent[c]);
    }
    cublasDestroy(g.blas);
    cudaFree(g.blas_ws);
    g.ready = 0;
    return 0;
}

// Row-major C[M x N] = A[M x K] B[K x N]: cuBLAS (column-major) computes C^T = B^T A^T.
static int gemm_rm(size_t M, size_t N, size_t K, const bf16 *A, const bf16 *B, bf16 *C) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
                        CUDA_R_16BF, (int)N, A, CUDA_R_16BF, (int)K, &zero, C, CUDA_R_16BF, (int)N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}

// `batch` such products with A and C advanced by a_stride and c_stride elements, B shared.
static int gemm_rm_batched(size_t M, size_t N, size_t K, const bf16 *A, size_t a_stride,
                           const bf16 *B, bf16 *C, size_t c_stride, int batch) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmStridedBatchedEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K,
                                      &one, B, CUDA_R_16BF, (int)N, 0, A, CUDA_R_16BF, (int)K,
                                      (long long)a_stride, &zero, C, CUDA_R_16BF, (int)N,
                                      (long long)c_stride, batch, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}

__device__ __forceinline__ void add_bf16x8(float acc[8], uint4 v) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 f = __bfloat1622float2(h[k]);
        acc[2 * k] += f.x;
        acc[2 * k + 1] += f.y;
    }
}

__device__ __forceinline__ uint4 pack_bf16x8(const float acc[8]) {
    uint4 out;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&out);
#pragma unroll
    for (int k = 0; k < 4; k++)
        h[k] = __floats2bfloat162_rn(acc[2 * k], acc[2 * k + 1]);
    return out;
}

// Slice r of one chunk (`vecs` 16-byte vectors): out = sum over ranks s, in rank order, of
// slice r of rank s's partial: ours is `own`, peer s's has arrived at recv + s * recv_stride. The
// barrier comes first: a peer enters it only once its copies into our recv are complete.
// Loads bypass L1 (__ldcg): the data was written by copy engines and other kernels.
__global__ void __launch_bounds__(RED_THREADS)
    reduce_slice(ncclDevComm comm, const uint4 *own, const uint4 *recv, size_t recv_stride,
                 int rank, int world, size_t vecs, uint4 *out) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const size_t stride = (size_t)gridDim.x * RED_THREADS;
    for (size_t i0 = (size_t)blockIdx.x * RED_THREADS + threadIdx.x; i0 < vecs;
         i0 += stride * UNROLL) {
        float acc[UNROLL][8] = {};
        for (int s = 0; s < world; s++) {
            const uint4 *src = s == rank ? own : recv + (size_t)s * recv_stride;
            uint4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const size_t i = i0 + u * stride;
                v[u] = i < vecs ? __ldcg(src + i) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                add_bf16x8(acc[u], v[u]);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t i = i0 + u * stride;
            if (i < vecs)
                out[i] = pack_bf16x8(acc[u]);
        }
    }
}

// One CTA, barrier 0: every rank has finished its copies into our buffers.
__global__ void final_barrier(ncclDevComm comm) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Chunks of at least CHUNK_BYTES of partial product (at most MAX_CHUNKS), each a whole number
// of rows of every destination's block, made of whole 16-byte vectors; 0 if none fits.
static int pick_chunks(size_t M, size_t N, int W) {
    const size_t Mr = M / W;
    size_t n = M * N * sizeof(bf16) / CHUNK_BYTES;
    n = n < 1 ? 1 : n > MAX_CHUNKS ? MAX_CHUNKS : n;
    for (; n >= 1; n--)
        if (Mr % n == 0 && (Mr / n * N) % 8 == 0)
            return (int)n;
    return 0;
}

// Shapes the pipeline does not take: the GEMM into scratch, then NCCL's reduce-scatter.
static int plain(const pk_ctx *ctx, const bf16 *A, const bf16 *B, bf16 *out, size_t M, size_t N,
                 size_t Kl) {
    bf16 *P = static_cast<bf16 *>(ctx->scratch);
    if (M * N * sizeof(bf16) > ctx->scratch_size || gemm_rm(M, N, Kl, A, B, P))
        return 20;
    return ncclReduceScatter(P, out, M / ctx->world_size * N, ncclBfloat16, ncclSum, ctx->comm,
                             ctx->stream) != ncclSuccess;
}

struct Call {
    const bf16 *A, *B;
    bf16 *out;
    size_t M, N, Kl;
};

// The whole pipeline of one call, enqueued on ctx->stream (forking to and joining the side
// streams).
static int enqueue(const pk_ctx *ctx, const Call &a, int nch) {
    const int W = ctx->world_size, r = ctx->rank;
    const size_t M = a.M, N = a.N, Kl = a.Kl, Mr = M / W, Ms = Mr / nch;
    bf16 *P = static_cast<bf16 *>(ctx->scratch); // this rank's partial product, M x N
    bf16 *R = P + M * N;                         // sender s's rows for us: R + s*Mr*N, Mr x N
    const size_t bytes = Ms * N * sizeof(bf16);

    cudaEventRecord(g.start, ctx->stream);
    cudaStreamWaitEvent(g.rs, g.start, 0);
    cudaStreamWaitEvent(g.red, g.start, 0);
    for (int j = 0; j < nch; j++) {
        const size_t row0 = j * Ms; // first row of chunk j inside every destination's block
        if (gemm_rm_batched(Ms, N, Kl, a.A + row0 * Kl, Mr * Kl, a.B, P + row0 * N, Mr * N, W))
            return 11;
        cudaEventRecord(g.gemm[j], ctx->stream);

        cudaStreamWaitEvent(g.rs, g.gemm[j], 0);
        for (int i = 1; i < W; i++) { // staggered, so ranks do not all send to one peer first
            const int q = (r + i) % W;
            cudaMemcpyAsync(pk_peer(ctx, R + (r * Mr + row0) * N, q), P + (q * Mr + row0) * N,
                            bytes, cudaMemcpyDeviceToDevice, g.rs);
        }
        cudaEventRecord(g.sent[j], g.rs);

        cudaStreamWaitEvent(g.red, g.sent[j], 0);
        reduce_slice<<<g.red_ctas, RED_THREADS, 0, g.red>>>(
            ctx->dev_comm, reinterpret_cast<const uint4 *>(P + (r * Mr + row0) * N),
            reinterpret_cast<const uint4 *>(R + row0 * N), Mr * N / 8, r, W, Ms * N / 8,
            reinterpret_cast<uint4 *>(a.out + row0 * N));
    }
    final_barrier<<<1, 32, 0, g.red>>>(ctx->dev_comm);
    cudaEventRecord(g.done, g.red);
    cudaStreamWaitEvent(ctx->stream, g.done, 0);
    return cudaGetLastError() == cudaSuccess ? 0 : 12;
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

extern "C" int solution(const pk_ctx *ctx, const bf16 *A, const bf16 *B, bf16 *out, size_t M,
                        size_t N, size_t K) {
    if (solution_init(ctx) || set_blas_stream(ctx->stream))
        return 10;
    const int W = ctx->world_size;
    const size_t Kl = K / W;
    const int nch = pick_chunks(M, N, W);
    if (nch == 0 || W < 2 || M % W != 0 || K % W != 0 ||
        2 * M * N * sizeof(bf16) > ctx->scratch_size ||
        ((uintptr_t)out | (uintptr_t)ctx->scratch) % 16 != 0)
        return plain(ctx, A, B, out, M, N, Kl);
    const Call a = {A, B, out, M, N, Kl};
    const GraphKey key = {{(uintptr_t)A, (uintptr_t)B, (uintptr_t)out, M, N, K}};
    return run_cached(ctx->stream, key, [&] { return enqueue(ctx, a, nch); });
}
