// Hostile (test data): a correct all-reduce that also writes one element past the end of y.
// Expected: incorrect (memory.guard_zones names y, after its end, byte +0).
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512
#define UNROLL 4

// Sums n_src blocks of `vecs` 16-byte vectors (8 bf16 each) in fp32 and stores the sum to
// n_dst blocks. Pointers may be local or a peer's (NVLink load/store).
struct Blocks {
    const uint4 *src[PK_MAX_RANKS];
    uint4 *dst[PK_MAX_RANKS];
    int n_src, n_dst;
};

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

// The barrier before: every peer has entered this call, so its x is ready and its output
// may be written. The barrier after: every peer is done reading our x and writing our
// output, so the caller may reuse both once our stream passes this kernel.
__global__ void __launch_bounds__(THREADS) reduce_blocks(ncclDevComm comm, Blocks b, size_t vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);

    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t i0 = (size_t)blockIdx.x * THREADS + threadIdx.x; i0 < vecs; i0 += stride * UNROLL) {
        float acc[UNROLL][8] = {};
        for (int s = 0; s < b.n_src; s++) {
            uint4 v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const size_t i = i0 + u * stride;
                v[u] = i < vecs ? b.src[s][i] : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                add_bf16x8(acc[u], v[u]);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const size_t i = i0 + u * stride;
            if (i >= vecs)
                break;
            const uint4 out = pack_bf16x8(acc[u]);
            for (int d = 0; d < b.n_dst; d++)
                b.dst[d][i] = out;
        }
    }

    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Every CTA waits on the CTA with the same index on each peer, so all CTAs must be resident
// at once (at most one per SM) and each needs its own LSA barrier.
static int grid_size(const pk_ctx *ctx) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 0;
    return sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
}

// The correct two-shot all-reduce, on the first `part` vectors of every chunk.
static int all_reduce(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n,
                      size_t part) {
    const int rank = ctx->rank;
    const int world = ctx->world_size;
    if (n % (8 * (size_t)world) != 0 || ((uintptr_t)x | (uintptr_t)y) % 16 != 0)
        return 1;
    const int grid = grid_size(ctx);
    if (grid < 1)
        return 2;
    const uint4 *xv = reinterpret_cast<const uint4 *>(x);
    uint4 *yv = reinterpret_cast<uint4 *>(y);
    Blocks b = {};
    const size_t vecs = n / 8 / world;
    for (int q = 0; q < world; q++) {
        const int peer = (rank + q) % world;
        b.src[q] = static_cast<const uint4 *>(pk_peer(ctx, xv + rank * vecs, peer));
        b.dst[q] = static_cast<uint4 *>(pk_peer(ctx, yv + rank * vecs, peer));
    }
    b.n_src = b.n_dst = world;
    reduce_blocks<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, b, part < vecs ? part : vecs);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}

static size_t whole(size_t n, int world) {
    return n / 8 / world;
}

// The complement of the 2 guard bytes there, so that both change: a fixed value would match
// the secret guard bytes now and then (1 in 256 per byte), and a later first byte be named.
__global__ void stray(unsigned char *p) {
    for (int i = 0; i < 2; i++)
        p[i] = (unsigned char)~p[i];
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    int rc = all_reduce(ctx, x, y, n, whole(n, ctx->world_size));
    stray<<<1, 1, 0, ctx->stream>>>(reinterpret_cast<unsigned char *>(y + n));
    return rc ? rc : cudaGetLastError() == cudaSuccess ? 0 : 4;
}
