// Shortcut twin (issue #26), skip the exchange: each rank attends only to its own shard's keys
// (the local causal block), as if the earlier ranks' keys did not exist; no k, v cross NVLink.
// Exact on rank 0. Attention is an average over every earlier key, so on every later rank the
// output moves by about its own size, even on PKB's i.i.d. inputs: unlike a norm's shortcut,
// this one needs no input regime to fail (every regime fails it, iid included).
#include "pk_ctx.h"

#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>

#define D 64
#define BM 64
#define BN 64
#define WARPS 4
#define THREADS (32 * WARPS)
#define COPY_THREADS 512

typedef __nv_bfloat16 bf16;

struct Args {
    const bf16 *q, *k, *v; // this rank's shard
    const bf16 *copies;    // (k, v) of ranks 0 .. rank - 1, 2 n elements each
    bf16 *out;
    int B, S, H, rank;
    float scale;
};

struct Smem {
    bf16 k[BN * D];
    bf16 v[BN * D];
    float s[WARPS][16 * BN]; // scores; P (bf16) and the query stage alias it
    float o[WARPS][16 * D];
};

// Key row g (global position) of batch b, head h: from this rank's shard or a copy.
__device__ __forceinline__ const bf16 *key_row(const Args &a, const bf16 *local, int which,
                                               long long g, int b, int h) {
    const int j = (int)(g / a.S), s = (int)(g % a.S);
    const size_t n = (size_t)a.B * a.S * a.H * D;
    const bf16 *base = j == a.rank ? local : a.copies + (size_t)j * 2 * n + (size_t)which * n;
    return base + (((size_t)b * a.S + s) * a.H + h) * D;
}

__global__ void __launch_bounds__(THREADS) attend(Args a) {
    namespace wmma = nvcuda::wmma;
    extern __shared__ __align__(128) unsigned char raw[];
    Smem &sm = *reinterpret_cast<Smem *>(raw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int b = blockIdx.y / a.H, h = blockIdx.y % a.H;
    // Longest query tiles first (causal: tile qt sees rank*S + 64 qt + 64 keys).
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int i0 = qt * BM + warp * 16, n_q = min(16, max(0, a.S - i0));
    const size_t ld = (size_t)a.H * D;
    bf16 *stage = reinterpret_cast<bf16 *>(sm.s[warp]);
    for (int i = lane; i < 16 * (D / 8); i += 32) {
        const int r = i / (D / 8), c = i % (D / 8);
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < n_q)
            val = *reinterpret_cast<const uint4 *>(a.q + ((size_t)b * a.S + i0 + r) * ld +
                                                   (size_t)h * D + c * 8);
        *reinterpret_cast<uint4 *>(stage + r * D + c * 8) = val;
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        wmma::load_matrix_sync(qf[kk], stage + kk * 16, D);
    for (int i = lane; i < 16 * D; i += 32)
        sm.o[warp][i] = 0.f;
    __syncwarp();

    const int r = lane >> 1, half = lane & 1;
    const long long q0 = (long long)a.rank * a.S, qpos = q0 + i0 + r;
    const long long n_keys = q0 + min(a.S, (qt + 1) * BM);  // keys [0, n_keys): causal
    const int n_tiles = (int)((n_keys - q0 + BN - 1) / BN); // own shard only
    float m = -INFINITY, l = 0.f;
    for (int kt = 0; kt < n_tiles; kt++) {
        const long long g0 = q0 + (long long)kt * BN;
        __syncthreads();
        for (int i = threadIdx.x; i < 2 * BN * (D / 8); i += THREADS) {
            const int which = i / (BN * (D / 8)), rr = (i / (D / 8)) % BN, c = i % (D / 8);
            uint4 val = make_uint4(0, 0, 0, 0);
            if (g0 + rr < n_keys)
                val = reinterpret_cast<const uint4 *>(
                    key_row(a, which ? a.v : a.k, which, g0 + rr, b, h))[c];
            *reinterpret_cast<uint4 *>((which ? sm.v : sm.k) + rr * D + c * 8) = val;
        }
        __syncthreads();
#pragma unroll
        for (int n = 0; n < BN / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.f);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, sm.k + n * 16 * D + kk * 16, D);
                wmma::mma_sync(sf, qf[kk], kf, sf);
            }
            wmma::store_matrix_sync(sm.s[warp] + n * 16, sf, BN, wmma::mem_row_major);
        }
        __syncwarp();
        float sv[32], tmax = -INFINITY;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const long long g = g0 + half * 32 + c;
            const float s = g > qpos ? -INFINITY : sm.s[warp][r * BN + half * 32 + c] * a.scale;
            sv[c] = s;
            tmax = fmaxf(tmax, s);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        const float m_new = fmaxf(m, tmax);
        const float alpha = m_new == -INFINITY ? 1.f : __expf(m - m_new);
        float sum = 0.f;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            sv[c] = sv[c] == -INFINITY ? 0.f : __expf(sv[c] - m_new);
            sum += sv[c];
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l = l * alpha + sum;
        m = m_new;
        __syncwarp();
        bf16 *p = reinterpret_cast<bf16 *>(sm.s[warp]);
#pragma unroll
        for (int c = 0; c < 32; c++) {
            p[r * BN + half * 32 + c] = __float2bfloat16(sv[c]);
            sm.o[warp][r * D + half * 32 + c] *= alpha;
        }
        __syncwarp();
#pragma unroll
        for (int n = 0; n < D / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, sm.o[warp] + n * 16, D, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vf;
                wmma::load_matrix_sync(pf, p + kk * 16, BN);
                wmma::load_matrix_sync(vf, sm.v + kk * 16 * D + n * 16, D);
                wmma::mma_sync(of, pf, vf, of);
            }
            wmma::store_matrix_sync(sm.o[warp] + n * 16, of, D, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (r >= n_q)
        return;
    const float inv_l = 1.f / l; // the query's own key is always there: l >= 1
    bf16 *dst = a.out + ((size_t)b * a.S + i0 + r) * ld + (size_t)h * D + half * 32;
    const float *o = sm.o[warp] + r * D + half * 32;
#pragma unroll
    for (int c = 0; c < 32; c += 2)
        *reinterpret_cast<__nv_bfloat162 *>(dst + c) =
            __floats2bfloat162_rn(o[c] * inv_l, o[c + 1] * inv_l);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out,
                        size_t B, size_t S, size_t H, size_t Dh, float softmax_scale) {
    const int rank = ctx->rank;
    if (Dh != D || ((uintptr_t)q | (uintptr_t)k | (uintptr_t)v | (uintptr_t)out) % 16 != 0)
        return 1;
    static bool attr = false;
    if (!attr) {
        if (cudaFuncSetAttribute(attend, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sizeof(Smem)) != cudaSuccess)
            return 5;
        attr = true;
    }
    Args a = {q, k, v, NULL, out, (int)B, (int)S, (int)H, rank, softmax_scale};
    const dim3 grid((unsigned)((S + BM - 1) / BM), (unsigned)(B * H));
    attend<<<grid, THREADS, sizeof(Smem), ctx->stream>>>(a);
    return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
