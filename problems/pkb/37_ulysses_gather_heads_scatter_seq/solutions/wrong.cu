// Subtly wrong: the correct solution, but the gathered heads are interleaved (head h of rank q
// at q + W h of y's W H heads, as if the heads were dealt round-robin) instead of concatenated
// in rank order (q H + h, PKB's torch.cat(dim=2)). Same bytes, same count, same padding, wrong
// head order: right only where H = 1, so at these dims it fails on every rank in the first
// trial (y's head 1 is rank 1's head 0 instead of rank 0's head 1). Expected: incorrect.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Items: 16-byte vectors of y in its own order, o = ((b * tw + s) * W + q) * row_vecs + v.
__global__ void __launch_bounds__(THREADS)
    pull_seq(ncclDevComm comm, ncclWindow_t win, size_t x_off, uint4 *y, int rank, int world,
             size_t B, size_t seq, size_t tw, size_t row_vecs, size_t dvecs) {
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
                // the bug: output head hh of this position is rank hh % W's head hh / W
                const size_t e = o % (W * row_vecs), bs = o / (W * row_vecs), hh = e / dvecs,
                             q = hh % W, c = hh / W * dvecs + e % dvecs;
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
    // PKB pads the sequence with zeros to a multiple of W: Tw positions per rank.
    const size_t tw = (seq + W - 1) / W;
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
                                                seq, tw, H * D / 8, D / 8);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
