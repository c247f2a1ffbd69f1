// Correct, and not the reference: no NCCL call and no logits in memory.
//   1. gather_texts: after an LSA barrier (every rank is in this call, so its texts are this
//      call's), every rank copies all ranks' texts over NVLink into its scratch (rank order),
//      then a second barrier (no rank returns, handing its texts back to the harness, before
//      every peer has read them);
//   2. siglip_tiles: one CTA per 128 x 128 tile of the B x batch logits, bf16 WMMA with fp32
//      accumulation, and an epilogue that takes z = scale * dot + bias and -logsigmoid(+-z) in
//      fp32 (+ on the diagonal of this rank's own block) and sums the tile;
//   3. finish: the tiles' sums in a fixed order, / B, one rounding to bf16.
// fp32 throughout where PKB rounds to bf16 after every op: closer to the exact loss than the
// reference (bench/pkb/sim_58_siglip_loss.c: within 3.8e-3 of fp64, the reference 1.6e-2).
#include "pk_ctx.h"

#include <cuda/atomic>
#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>

using namespace nvcuda;
typedef __nv_bfloat16 bf16;

#define THREADS 256
#define BM 128
#define BN 128
#define BK 32
#define LDS (BK + 8) // shared-memory row stride (bf16): 80 bytes, rows off the same banks

struct Peers {
    const bf16 *txt[PK_MAX_RANKS]; // each rank's text_features, as mapped here
};

__global__ void __launch_bounds__(THREADS)
    gather_texts(ncclDevComm comm, Peers peers, bf16 *all, long long per, int world) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const long long vec = per / 8;
    for (int q = 0; q < world; q++) {
        const uint4 *src = reinterpret_cast<const uint4 *>(peers.txt[q]);
        uint4 *dst = reinterpret_cast<uint4 *>(all + (long long)q * per);
        for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < vec;
             i += (long long)gridDim.x * THREADS)
            dst[i] = src[i];
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

__device__ __forceinline__ float neg_logsigmoid(float x) {
    return -(fminf(x, 0.f) - log1pf(expf(-fabsf(x))));
}

__device__ float block_sum(float v) {
    __shared__ float part[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.f;
    for (int w = 0; w < THREADS / 32; w++)
        s += part[w];
    return s;
}

// Tile (blockIdx.y, blockIdx.x): image rows [128 y, +128) against gathered text rows
// [128 x, +128); the positive pairs are image b and text diag + b. 8 warps as 2 x 4, each 64 x 32
// (4 x 2 WMMA fragments). The next k-slice is loaded into registers while the current one is
// multiplied.
__global__ void __launch_bounds__(THREADS)
    siglip_tiles(const bf16 *img, const bf16 *all, long long D, long long diag, float scale,
                 float bias, float *part) {
    __shared__ __align__(32) bf16 As[BM * LDS];
    __shared__ __align__(32) bf16 Bs[BN * LDS];
    __shared__ __align__(32) float stage[THREADS / 32][16 * 16];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / 4, wn = warp % 4;
    const long long row0 = (long long)blockIdx.y * BM, col0 = (long long)blockIdx.x * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(acc[i][j], 0.f);
    // Each thread moves 2 x 16 bytes of each tile per k-slice (128 rows x 32 columns).
    uint4 ra[2], rb[2];
    auto load = [&](long long k0) {
#pragma unroll
        for (int v = 0; v < 2; v++) {
            const int e = threadIdx.x + v * THREADS, r = e / (BK / 8), c = (e % (BK / 8)) * 8;
            ra[v] = *reinterpret_cast<const uint4 *>(img + (row0 + r) * D + k0 + c);
            rb[v] = *reinterpret_cast<const uint4 *>(all + (col0 + r) * D + k0 + c);
        }
    };
    load(0);
    for (long long k0 = 0; k0 < D; k0 += BK) {
#pragma unroll
        for (int v = 0; v < 2; v++) {
            const int e = threadIdx.x + v * THREADS, r = e / (BK / 8), c = (e % (BK / 8)) * 8;
            *reinterpret_cast<uint4 *>(As + r * LDS + c) = ra[v];
            *reinterpret_cast<uint4 *>(Bs + r * LDS + c) = rb[v];
        }
        __syncthreads();
        if (k0 + BK < D)
            load(k0 + BK);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 4; i++)
                wmma::load_matrix_sync(a[i], As + (wm * 64 + i * 16) * LDS + kk, LDS);
#pragma unroll
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(b[j], Bs + (wn * 32 + j * 16) * LDS + kk, LDS);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    // Epilogue: the tile's terms, in fp32.
    float sum = 0.f;
    float *st = stage[warp];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const long long b = row0 + wm * 64 + i * 16 + e / 16,
                                jg = col0 + wn * 32 + j * 16 + e % 16;
                const float z = scale * st[e] + bias;
                sum += neg_logsigmoid(jg == diag + b ? z : -z);
            }
            __syncwarp();
        }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        part[(long long)blockIdx.y * gridDim.x + blockIdx.x] = sum;
}

__global__ void finish(const float *part, long long n, long long B, bf16 *loss) {
    float s = 0.f;
    for (long long i = threadIdx.x; i < n; i += THREADS)
        s += part[i];
    s = block_sum(s);
    if (threadIdx.x == 0)
        loss[0] = __float2bfloat16_rn(s / (float)B);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *image_features, const bf16 *text_features,
                        bf16 *loss, size_t batch, size_t D, float logit_scale, float logit_bias) {
    const int W = ctx->world_size;
    const long long B = (long long)batch / W, N = (long long)batch, d = (long long)D;
    const long long tiles = (N / BN) * (B / BM);
    bf16 *all = static_cast<bf16 *>(ctx->scratch);
    float *part = reinterpret_cast<float *>(all + N * d);
    if (ctx->scratch_size < (size_t)(N * d) * sizeof(bf16) + (size_t)tiles * sizeof(float))
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA of gather_texts waits for its twin on each peer: all must be resident.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    Peers peers;
    for (int q = 0; q < W; q++)
        peers.txt[q] = static_cast<const bf16 *>(pk_peer(ctx, text_features, q));
    cudaStream_t s = ctx->stream;
    gather_texts<<<grid, THREADS, 0, s>>>(ctx->dev_comm, peers, all, B * d, W);
    siglip_tiles<<<dim3((unsigned)(N / BN), (unsigned)(B / BM)), THREADS, 0, s>>>(
        image_features, all, d, (long long)ctx->rank * B, logit_scale, logit_bias, part);
    finish<<<1, THREADS, 0, s>>>(part, tiles, B, loss);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
