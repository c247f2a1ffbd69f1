// Hostile (test data): a correct all-reduce plus its own cudaEventElapsedTime, which would
// interpose the runtime's and report every call as 1 ns. Expected: rejected (interposition).
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512

struct Peers {
    const uint4 *x[PK_MAX_RANKS];
};

// One-shot all-reduce: each rank reads every rank's x and writes its own y, between two LSA
// barriers (peers' x ready; peers done reading ours).
__global__ void __launch_bounds__(THREADS)
    one_shot(ncclDevComm comm, Peers p, int world, uint4 *y, size_t vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < vecs;
         i += (size_t)gridDim.x * THREADS) {
        float acc[8] = {};
        for (int r = 0; r < world; r++) {
            uint4 v = p.x[r][i];
            const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
            for (int k = 0; k < 4; k++) {
                float2 f = __bfloat1622float2(h[k]);
                acc[2 * k] += f.x;
                acc[2 * k + 1] += f.y;
            }
        }
        uint4 out;
        __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(&out);
        for (int k = 0; k < 4; k++)
            o[k] = __floats2bfloat162_rn(acc[2 * k], acc[2 * k + 1]);
        y[i] = out;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Launches the one-shot kernel for `vecs` vectors of y on `stream`; 0 on success.
static int launch_one_shot(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t vecs,
                           cudaStream_t stream) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 1;
    Peers p;
    for (int r = 0; r < ctx->world_size; r++)
        p.x[r] = static_cast<const uint4 *>(pk_peer(ctx, x, r));
    one_shot<<<grid, THREADS, 0, stream>>>(ctx->dev_comm, p, ctx->world_size,
                                           reinterpret_cast<uint4 *>(y), vecs);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    *ms = 1e-6f;
    return cudaSuccess;
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    return launch_one_shot(ctx, x, y, n / 8, ctx->stream);
}
