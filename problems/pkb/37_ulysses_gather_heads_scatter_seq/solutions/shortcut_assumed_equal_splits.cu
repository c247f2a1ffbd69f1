// Shortcut twin (issue #29), deliberately wrong: assumes PKB's equal splits (PKB's sequence,
// T = 16, is a multiple of 2, 4 and 8, so PKB never pads) and cuts seq / W positions per rank
// with no zero padding, as a kernel tuned on PKB's inputs might. Right on the calls with
// seq = T (trial 0, PKB's own case); wrong from trial 1 on (seq = T - 1): PKB pads to a
// multiple of W, so each rank's chunk is ceil(seq / W) positions and the last one ends in zeros.
// The verdict must be `incorrect`.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Items: 16-byte vectors of y in its own order, o = ((b * tw + s) * W + q) * row_vecs + v.
__global__ void __launch_bounds__(THREADS)
    pull_seq(ncclDevComm comm, ncclWindow_t win, size_t x_off, uint4 *y, int rank, int world,
             size_t B, size_t seq, size_t tw, size_t row_vecs) {
    __shared__ const uint4 *src[PK_MAX_RANKS]; // rank q's x, as mapped here
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < world) // arguments sit at the same offset of the window on every rank
        src[threadIdx.x] = static_cast<const uint4 *>(ncclGetLsaPointer(win, x_off, threadIdx.x));
    __syncthreads();
    const size_t W = (size_t)world, n = B * tw * W * row_vecs, stride = (size_t)gridDim.x * THREADS;
    for (size_t o0 = (size_t)blockIdx.x * THREADS + threadIdx.x; o0 < n; o0 += stride * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) { // UNROLL independent NVLink loads in flight
            const size_t o = o0 + u * stride;
            v[u] = make_uint4(0, 0, 0, 0);
            if (o < n) {
                const size_t c = o % row_vecs, q = (o / row_vecs) % W, bs = o / row_vecs / W;
                const size_t pos = (size_t)rank * tw + bs % tw;
                if (pos < seq)
                    v[u] = src[q][((bs / tw) * seq + pos) * row_vecs + c];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t o = o0 + u * stride;
            if (o < n)
                y[o] = v[u];
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t B,
                        size_t T, size_t H, size_t D, size_t seq) {
    const int world = ctx->world_size;
    const size_t W = (size_t)world;
    const size_t tw = seq / W; // the shortcut: PKB's sequences divide evenly, no padding
    if (D % 8 != 0 || seq > T || tw * W > T || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1; // whole 16-byte vectors; the output must fit y's capacity
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    pull_seq<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, x),
                                                reinterpret_cast<uint4 *>(y), ctx->rank, world, B,
                                                seq, tw, H * D / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
