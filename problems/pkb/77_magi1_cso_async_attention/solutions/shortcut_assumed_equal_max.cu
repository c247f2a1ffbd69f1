// SHORTCUT TWIN (issue 26), incorrect: the per-source merge with the segments' maxima assumed
// equal. correct.cu's structure (one partial result per source rank's segment of keys, merged
// into the running one), but the merge weighs each segment by its sum of exp(s - m_seg), taken
// relative to its OWN max, as if every segment had the same max (lse = log l instead of
// m + log l). The segments' maxima differ by a few tenths on i.i.d. inputs and by far more under
// the rank regime (a scale per rank: one rank's keys dominate) and the row, heavy and peaked
// regimes, so a segment's share of the softmax is off by exp(m_a - m_b).
#include "pk_ctx.h"

#include <cuda/atomic>
#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>
#include <string.h>

#define D 128
#define BM 64
#define BN 64
#define WARPS 4
#define THREADS (32 * WARPS)
#define COPY_THREADS 512

typedef __nv_bfloat16 bf16;

struct Geo {
    int W, rank, R, HQ, HKV, HL, KL;
    long long SPB, CLIP, T;
};

// Keys rank s contributes to each range: its SPB tokens, less what the clip drops.
__host__ __device__ inline long long seg_keys(const Geo &g, int s) {
    const long long n = g.CLIP - (long long)s * g.SPB;
    return n < 0 ? 0 : n > g.SPB ? g.SPB : n;
}

// qloc[i][s SPB + t][h] = query_s[i SPB + t][rank HL + h]; kvloc[s][i][t][kh] =
// key_value_s[i SPB + t][rank KL + kh] for t < seg_keys(s). 16-byte vectors.
__global__ void __launch_bounds__(COPY_THREADS)
    pull(ncclDevComm comm, ncclWindow_t win, size_t q_off, size_t kv_off, uint4 *qloc, uint4 *kvloc,
         Geo g) {
    __shared__ const uint4 *qs[PK_MAX_RANKS], *kvs[PK_MAX_RANKS];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel); // every peer is in this call
    if (threadIdx.x < g.W) {
        qs[threadIdx.x] = static_cast<const uint4 *>(ncclGetLsaPointer(win, q_off, threadIdx.x));
        kvs[threadIdx.x] = static_cast<const uint4 *>(ncclGetLsaPointer(win, kv_off, threadIdx.x));
    }
    __syncthreads();
    const size_t stride = (size_t)gridDim.x * COPY_THREADS;
    const int qv = D / 8, kvv = 2 * D / 8; // vectors per head row
    const size_t nq = (size_t)g.R * g.W * g.SPB * g.HL * qv;
    for (size_t o = (size_t)blockIdx.x * COPY_THREADS + threadIdx.x; o < nq; o += stride) {
        const size_t c = o % qv, h = o / qv % g.HL,
                     row = o / qv / g.HL; // row = i W SPB + s SPB + t
        const size_t t = row % g.SPB, s = row / g.SPB % g.W, i = row / g.SPB / g.W;
        qloc[o] = qs[s][(((i * g.SPB + t) * g.HQ) + (size_t)g.rank * g.HL + h) * qv + c];
    }
    const size_t nkv = (size_t)g.W * g.R * g.SPB * g.KL * kvv;
    for (size_t o = (size_t)blockIdx.x * COPY_THREADS + threadIdx.x; o < nkv; o += stride) {
        const size_t c = o % kvv, kh = o / kvv % g.KL, row = o / kvv / g.KL; // (s R + i) SPB + t
        const size_t t = row % g.SPB, i = row / g.SPB % g.R, s = row / g.SPB / g.R;
        if ((long long)t < seg_keys(g, (int)s))
            kvloc[o] = kvs[s][(((i * g.SPB + t) * g.HKV) + (size_t)g.rank * g.KL + kh) * kvv + c];
    }
}

// The last barrier: every peer has stored its rows into our out and finished reading our inputs.
__global__ void finish(ncclDevComm comm) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

struct Smem {
    bf16 k[BN * D];
    bf16 v[BN * D];
    float s[WARPS][16 * BN]; // a warp's scores; its P (bf16) and the query stage alias it
    float o[WARPS][16 * D];  // a warp's output accumulator
};

struct Blk {
    const bf16 *q;  // qloc: (R, W SPB, HL, D)
    const bf16 *kv; // source s's keys: (R, SPB, KL, 2D), seg_keys(s) valid per range
    int nk;         // keys of this source per range
    int first;      // no running result yet
    int last;       // store the final bf16 output to the queries' ranks
    float *acc;     // (R, W SPB, HL, D) fp32
    float *lse;     // (R, W SPB, HL)
    ncclWindow_t win;
    size_t out_off; // out's offset in the window
    Geo g;
    float scale;
};

// CTA (qt, i HL + h): 64 queries of range i, head h, against source s's keys of range i.
__global__ void __launch_bounds__(THREADS) attend(Blk a) {
    namespace wmma = nvcuda::wmma;
    extern __shared__ __align__(128) unsigned char raw[];
    Smem &sm = *reinterpret_cast<Smem *>(raw);
    const Geo &g = a.g;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.y / g.HL, h = blockIdx.y % g.HL, kh = h / (g.HL / g.KL);
    const int Sq = (int)(g.W * g.SPB);
    const int i0 = blockIdx.x * BM + warp * 16, n_q = min(16, max(0, Sq - i0));
    const size_t ldq = (size_t)g.HL * D, ldkv = (size_t)g.KL * 2 * D;
    bf16 *stage = reinterpret_cast<bf16 *>(sm.s[warp]);
    const bf16 *qrow = a.q + ((size_t)i * Sq + i0) * ldq + (size_t)h * D;
    for (int x = lane; x < 16 * (D / 8); x += 32) {
        const int r = x / (D / 8), c = x % (D / 8);
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < n_q)
            val = *reinterpret_cast<const uint4 *>(qrow + r * ldq + c * 8);
        *reinterpret_cast<uint4 *>(stage + r * D + c * 8) = val;
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[D / 16];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        wmma::load_matrix_sync(qf[kk], stage + kk * 16, D);
    for (int x = lane; x < 16 * D; x += 32)
        sm.o[warp][x] = 0.f;
    __syncwarp();

    const int r = lane >> 1, half = lane & 1; // lanes 2r, 2r + 1: row r
    float m = -INFINITY, l = 0.f;
    const bf16 *kbase = a.kv + (size_t)i * g.SPB * ldkv + (size_t)kh * 2 * D;
    const int n_tiles = (a.nk + BN - 1) / BN;
    for (int kt = 0; kt < n_tiles; kt++) {
        const int j0 = kt * BN, n_k = min(BN, a.nk - j0);
        __syncthreads();
        for (int x = threadIdx.x; x < 2 * BN * (D / 8); x += THREADS) {
            const int which = x / (BN * (D / 8)), rr = x / (D / 8) % BN, c = x % (D / 8);
            uint4 val = make_uint4(0, 0, 0, 0);
            if (rr < n_k)
                val = *reinterpret_cast<const uint4 *>(kbase + (size_t)(j0 + rr) * ldkv +
                                                       which * D + c * 8);
            *reinterpret_cast<uint4 *>((which ? sm.v : sm.k) + rr * D + c * 8) = val;
        }
        __syncthreads();
#pragma unroll
        for (int n = 0; n < BN / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.f);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
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
            const int j = half * 32 + c;
            const float s = j < n_k ? sm.s[warp][r * BN + j] * a.scale : -INFINITY;
            sv[c] = s;
            tmax = fmaxf(tmax, s);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        const float m_new = fmaxf(m, tmax); // finite: every tile has a valid key
        const float alpha = __expf(m - m_new);
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
        for (int c = 0; c < 32; c++)
            p[r * BN + half * 32 + c] = __float2bfloat16(sv[c]);
#pragma unroll
        for (int c = 0; c < D / 2; c++)
            sm.o[warp][r * D + half * (D / 2) + c] *= alpha;
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
    // Epilogue: this segment's normalised result (o / l, lse = m + log l) merged into the
    // running one: out = out_a + w (out_b - out_a), w = sigmoid(lse_b - lse_a). Both lanes of a
    // row read the running lse before lane 0 overwrites it.
    const int q = i0 + r;
    const size_t rid = ((size_t)i * Sq + q) * g.HL + h;
    float lse_a = -INFINITY;
    if (r < n_q && !a.first)
        lse_a = a.lse[rid];
    __syncwarp();
    if (r >= n_q)
        return;
    const float lse_b = logf(l), inv_l = 1.f / l; // the segment's own max dropped
    float w = 1.f, lse = lse_b;
    if (!a.first) {
        w = 1.f / (1.f + __expf(lse_a - lse_b));
        lse = fmaxf(lse_a, lse_b) + log1pf(__expf(-fabsf(lse_a - lse_b)));
    }
    const float *o = sm.o[warp] + r * D + half * (D / 2);
    float *acc = a.acc + rid * D + half * (D / 2);
    if (a.last) {
        // Query q of range i is token i SPB + t of rank p; its head is rank HL + h there.
        const int p = (int)(q / g.SPB);
        const long long t = q % g.SPB;
        bf16 *dst = static_cast<bf16 *>(ncclGetLsaPointer(a.win, a.out_off, p)) +
                    (((size_t)i * g.SPB + t) * g.HQ + (size_t)g.rank * g.HL + h) * D +
                    half * (D / 2);
#pragma unroll 4
        for (int c = 0; c < D / 2; c += 8) {
            __align__(16) __nv_bfloat162 v2[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x0 = o[c + 2 * e] * inv_l, x1 = o[c + 2 * e + 1] * inv_l;
                if (!a.first) {
                    x0 = acc[c + 2 * e] + w * (x0 - acc[c + 2 * e]);
                    x1 = acc[c + 2 * e + 1] + w * (x1 - acc[c + 2 * e + 1]);
                }
                v2[e] = __floats2bfloat162_rn(x0, x1);
            }
            uint4 u; // 8 bf16 in one 16-byte NVLink store (memcpy: no type-punned load)
            memcpy(&u, v2, sizeof u);
            *reinterpret_cast<uint4 *>(dst + c) = u;
        }
        __threadfence_system();
        return;
    }
#pragma unroll 8
    for (int c = 0; c < D / 2; c++) {
        const float ob = o[c] * inv_l;
        acc[c] = a.first ? ob : acc[c] + w * (ob - acc[c]);
    }
    if (half == 0)
        a.lse[rid] = lse;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *query, const bf16 *key_value,
                        const int64_t *k_ranges, bf16 *out, size_t tokens, size_t q_heads,
                        size_t kv_heads, size_t head_dim, size_t cp_shuffle_num,
                        size_t clip_token_nums) {
    (void)k_ranges; // [i CLIP, (i + 1) CLIP): the contract's
    Geo g;
    g.W = ctx->world_size;
    g.rank = ctx->rank;
    g.R = (int)cp_shuffle_num;
    g.HQ = (int)q_heads;
    g.HKV = (int)kv_heads;
    if (head_dim != D || g.W < 2 || g.HQ % g.W || g.HKV % g.W || tokens % cp_shuffle_num)
        return 1;
    g.HL = g.HQ / g.W;
    g.KL = g.HKV / g.W;
    g.T = (long long)tokens;
    g.SPB = g.T / g.R;
    g.CLIP = (long long)clip_token_nums;
    if (g.CLIP < 1 || g.CLIP > g.W * g.SPB || g.HL % g.KL)
        return 1;
    // Scratch: qloc (T HQ D bf16), kvloc (T HKV 2D bf16), acc (R W SPB HL D fp32), lse.
    const size_t nq = (size_t)g.T * g.HQ * D, nkv = (size_t)g.T * g.HKV * 2 * D;
    const size_t rows = (size_t)g.R * g.W * g.SPB * g.HL;
    if ((nq + nkv) * sizeof(bf16) + rows * (D + 1) * sizeof(float) > ctx->scratch_size)
        return 2;
    bf16 *qloc = static_cast<bf16 *>(ctx->scratch), *kvloc = qloc + nq;
    float *acc = reinterpret_cast<float *>(kvloc + nkv), *lse = acc + rows * D;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 3;
    // Every CTA of the pull meets its twin on each peer: all resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 4;
    pull<<<grid, COPY_THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, ctx->window, pk_sym_offset(ctx, query), pk_sym_offset(ctx, key_value),
        reinterpret_cast<uint4 *>(qloc), reinterpret_cast<uint4 *>(kvloc), g);
    static bool attr = false;
    if (!attr) {
        if (cudaFuncSetAttribute(attend, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)sizeof(Smem)) != cudaSuccess)
            return 5;
        attr = true;
    }
    // Sources in the order rank, rank + 1, ...: those the clip leaves keys of.
    int src[PK_MAX_RANKS], n_src = 0;
    for (int k = 0; k < g.W; k++) {
        const int s = (g.rank + k) % g.W;
        if (seg_keys(g, s) > 0)
            src[n_src++] = s;
    }
    const dim3 agrid((unsigned)((g.W * g.SPB + BM - 1) / BM), (unsigned)(g.R * g.HL));
    for (int k = 0; k < n_src; k++) {
        Blk a;
        a.q = qloc;
        a.kv = kvloc + (size_t)src[k] * g.R * g.SPB * g.KL * 2 * D;
        a.nk = (int)seg_keys(g, src[k]);
        a.first = k == 0;
        a.last = k == n_src - 1;
        a.acc = acc;
        a.lse = lse;
        a.win = ctx->window;
        a.out_off = pk_sym_offset(ctx, out);
        a.g = g;
        a.scale = (float)(1.0 / sqrt((double)D));
        attend<<<agrid, THREADS, sizeof(Smem), ctx->stream>>>(a);
    }
    finish<<<1, 32, 0, ctx->stream>>>(ctx->dev_comm);
    return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
