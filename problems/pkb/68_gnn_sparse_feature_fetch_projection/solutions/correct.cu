// Correct, and not the reference: no sort, no host sync, no NCCL call and no id exchange. After
// an LSA barrier (every peer is in this call: its shard is ready) the grid pulls each query's row
// straight from its owner's shard over NVLink (ncclGetLsaPointer into the arena's window;
// 16-byte loads; rows of our own shard from local memory) into scratch, already in query order;
// a last LSA barrier (every peer has finished reading our shard) ends the kernel; then one cuBLAS
// GEMM projects the rows (bf16 tensor cores, fp32 accumulation).
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 512
#define BLAS_WS_BYTES ((size_t)32 << 20)

static struct {
    cublasHandle_t blas;
    void *ws;
    cudaStream_t stream;
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
    g.blas = NULL;
    g.ws = NULL;
    g.stream = NULL;
    return 0;
}

__global__ void __launch_bounds__(THREADS)
    pull_rows(ncclDevComm comm, ncclWindow_t win, size_t shard_off, const int64_t *ids, uint4 *emb,
              int world, long long S, long long Q, long long vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < Q * vecs;
         e += (long long)gridDim.x * THREADS) {
        const long long id = ids[e / vecs];
        long long o = id / S;
        o = o < 0 ? 0 : o > world - 1 ? world - 1 : o;
        long long row = id - o * S;
        row = row < 0 ? 0 : row >= S ? S - 1 : row;
        const uint4 *shard = static_cast<const uint4 *>(ncclGetLsaPointer(win, shard_off, (int)o));
        emb[e] = shard[row * vecs + e % vecs];
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *local_embedding_shard,
                        const int64_t *input_node_ids, const bf16 *proj_matrix, bf16 *out, size_t N,
                        size_t E, size_t O, size_t Q) {
    if (E % 8 != 0 || (uintptr_t)local_embedding_shard % 16 != 0 ||
        Q * E * sizeof(bf16) > ctx->scratch_size)
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1 || blas_on(ctx->stream))
        return 3;
    bf16 *emb = static_cast<bf16 *>(ctx->scratch);
    pull_rows<<<grid, THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, local_embedding_shard), input_node_ids,
        reinterpret_cast<uint4 *>(emb), ctx->world_size, (long long)(N / ctx->world_size),
        (long long)Q, (long long)(E / 8));
    if (cudaGetLastError() != cudaSuccess)
        return 4;
    const float one = 1.f,
                zero = 0.f; // row-major out = emb proj: column-major out^T = proj^T emb^T
    return cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)O, (int)Q, (int)E, &one, proj_matrix,
                        CUDA_R_16BF, (int)O, emb, CUDA_R_16BF, (int)E, &zero, out, CUDA_R_16BF,
                        (int)O, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT_TENSOR_OP) == CUBLAS_STATUS_SUCCESS
               ? 0
               : 5;
}
