// SHORTCUT (assumed distribution): correct.cu with D = rowsum(dout * out) taken as 0, as it is in
// expectation for zero-mean dout independent of out: out is never read. Under the rank regime
// (v with an offset per rank, so out has one) dP - D cancels the offset and D = 0 does not: off
// by up to thousands of times the tolerance (bench/pkb/sim_57); at small shards it fails on
// i.i.d. data too.
// What follows is correct.cu's header:
// Correct, and not the reference: no ring. Each rank all-gathers k, v, q, dout, lse and
// D = rowsum(dout * out) over its CP group (one grouped ncclAllGather), lays the gathered shards
// out as one sequence, and runs ONE flash-style dQ pass over all T keys and ONE dK/dV pass over
// all T queries for its own keys (the tiles below are a copy of problems/include/
// pk_attention.cuh's backward, pk_ prefix dropped: 64 x 64 tiles on the bf16 tensor cores, the
// scores recomputed from the forward's lse, the score matrix never in memory), writing bf16
// straight from the epilogues; then one grouped ncclAllReduce(ncclAvg) of dq, dk, dv over the DP
// pair.
#include "pk_ctx.h"

#include <cuda_bf16.h>
#include <math.h>
#include <mma.h>

#define PK_ATTN_D 64
#define PK_ATTN_BM 64
#define PK_ATTN_BN 64
#define PK_ATTN_WARPS 4
#define PK_ATTN_THREADS (32 * PK_ATTN_WARPS)

typedef __nv_bfloat16 bf16;

// Loads 16-byte vectors of `rows` rows of 64 bf16 (row stride ld elements) into dst (64 per
// row), zeros beyond n_valid rows. Called by `nthreads` threads with index t.
static __device__ __forceinline__ void attn_load_rows(__nv_bfloat16 *dst, const __nv_bfloat16 *src,
                                                      long long ld, int rows, int n_valid, int t,
                                                      int nthreads) {
    for (int i = t; i < rows * (PK_ATTN_D / 8); i += nthreads) {
        const int r = i / (PK_ATTN_D / 8), c = i % (PK_ATTN_D / 8);
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < n_valid)
            val = *reinterpret_cast<const uint4 *>(src + (long long)r * ld + c * 8);
        *reinterpret_cast<uint4 *>(dst + r * PK_ATTN_D + c * 8) = val;
    }
}

// ---- The backward tile (pkb/57): flash-style, the score matrix never in memory ----
// For one block of keys, given the forward's logsumexp lse and D = rowsum(dO * O) per query row:
//   P = exp(scale q k^T - lse), dP = dO v^T, dS = P (dP - D),
//   dQ = scale dS k, dK = scale dS^T q, dV = P^T dO
// (FlashAttention-2's backward; PKB's _local_attn_backward). Two tiles, no atomics: the query
// tile (attn_bwd_dq_tile: a CTA per 64 queries, over every key tile) and the key tile
// (attn_bwd_dkdv_tile: a CTA per 64 keys, over every query tile); each recomputes S and P.
// Products on the bf16 tensor cores (WMMA), P and dS rounded to bf16 as their operands,
// fp32 scores, exponentials and accumulation. lse and D are (B, H, Sq) (PKB's softmax_lse).
struct PkAttnBwdBlock {
    const __nv_bfloat16 *q, *dout; // (B, Sq, H, D), contiguous
    const __nv_bfloat16 *k, *v;    // (B, Sk, H, D), contiguous
    const float *lse, *dd;         // (B, H, Sq): the forward's logsumexp; rowsum(dO * O)
    int B, Sq, Sk, H;
    long long q_pos0, k_pos0; // global positions of query 0 and key 0 (the causal mask)
    int causal;
    float scale;
    // Epilogues, as the forward's: X_out = (X_in ? X_in : 0) + this block's gradient, fp32, or
    // its bf16 rounding into X_bf16 when that is set (X_out may equal X_in). dq: (B, Sq, H, D);
    // dk, dv: (B, Sk, H, D).
    const float *dq_in;
    float *dq_out;
    __nv_bfloat16 *dq_bf16;
    const float *dk_in, *dv_in;
    float *dk_out, *dv_out;
    __nv_bfloat16 *dk_bf16, *dv_bf16;
};

// Shared memory of one backward CTA (80.5 KiB, dynamic).
struct PkAttnBwdSmem {
    __nv_bfloat16 a[PK_ATTN_BN * PK_ATTN_D]; // dq tile: k; dkdv tile: q
    __nv_bfloat16 b[PK_ATTN_BN * PK_ATTN_D]; // dq tile: v; dkdv tile: dout
    float lse[PK_ATTN_BN], dd[PK_ATTN_BN];   // dkdv tile: the query tile's lse and D
    float s[PK_ATTN_WARPS][16 * PK_ATTN_BN]; // scores; the bf16 operands P, dS alias it
    float dp[PK_ATTN_WARPS][16 * PK_ATTN_BN];
    float acc0[PK_ATTN_WARPS][16 * PK_ATTN_D]; // dq; or dk
    float acc1[PK_ATTN_WARPS][16 * PK_ATTN_D]; // dv
};

static inline size_t attn_bwd_smem_bytes(void) {
    return sizeof(PkAttnBwdSmem);
}

// 16 rows of 64 bf16 from global (row stride ld, n_valid rows, zeros beyond) into 4 A fragments,
// staged through `stage` (16 x 64 bf16) by the warp.
static __device__ __forceinline__ void
attn_load_afrag(nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                                       nvcuda::wmma::row_major> (&f)[4],
                __nv_bfloat16 *stage, const __nv_bfloat16 *src, long long ld, int n_valid,
                int lane) {
    attn_load_rows(stage, src, ld, 16, n_valid, lane, 32);
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        nvcuda::wmma::load_matrix_sync(f[kk], stage + kk * 16, PK_ATTN_D);
    __syncwarp();
}

// C (16 x 64, fp32, row stride 64) = A (4 fragments: 16 x 64) B^T, B (64 x 64 bf16 in shared
// memory, row r of B^T's source = column r of the product): scores-like products q k^T.
static __device__ __forceinline__ void
attn_mm_abt(float *c,
            const nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                                         nvcuda::wmma::row_major> (&a)[4],
            const __nv_bfloat16 *bsrc) {
    namespace wmma = nvcuda::wmma;
#pragma unroll
    for (int n = 0; n < PK_ATTN_BN / 16; n++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> cf;
        wmma::fill_fragment(cf, 0.f);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bf;
            wmma::load_matrix_sync(bf, bsrc + n * 16 * PK_ATTN_D + kk * 16, PK_ATTN_D);
            wmma::mma_sync(cf, a[kk], bf, cf);
        }
        wmma::store_matrix_sync(c + n * 16, cf, PK_ATTN_BN, wmma::mem_row_major);
    }
}

// acc (16 x 64 fp32, row stride 64) += A (16 x 64 bf16, row stride 64) B (64 x 64 bf16 row-major).
static __device__ __forceinline__ void attn_mm_acc(float *acc, const __nv_bfloat16 *a,
                                                   const __nv_bfloat16 *b) {
    namespace wmma = nvcuda::wmma;
#pragma unroll
    for (int n = 0; n < PK_ATTN_D / 16; n++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
        wmma::load_matrix_sync(of, acc + n * 16, PK_ATTN_D, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < PK_ATTN_BN / 16; kk++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> af;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> bf;
            wmma::load_matrix_sync(af, a + kk * 16, PK_ATTN_BN);
            wmma::load_matrix_sync(bf, b + kk * 16 * PK_ATTN_D + n * 16, PK_ATTN_D);
            wmma::mma_sync(of, af, bf, of);
        }
        wmma::store_matrix_sync(acc + n * 16, of, PK_ATTN_D, wmma::mem_row_major);
    }
}

// The epilogue of one gradient row half (32 values of lane `half`): scale * acc (+ in), fp32 or
// bf16.
static __device__ __forceinline__ void attn_bwd_store(const float *acc, float scale,
                                                      const float *in, float *out,
                                                      __nv_bfloat16 *out_bf16, long long base) {
#pragma unroll 8
    for (int c = 0; c < 32; c++) {
        const float val = acc[c] * scale + (in ? in[base + c] : 0.f);
        if (out_bf16)
            out_bf16[base + c] = __float2bfloat16(val);
        else
            out[base + c] = val;
    }
}

// dQ of query tile qt of head h of batch b against every key of the block (the whole CTA).
static __device__ void attn_bwd_dq_tile(const PkAttnBwdBlock &a, int b, int h, int qt,
                                        PkAttnBwdSmem &sm) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long ld = (long long)a.H * PK_ATTN_D;
    const int i0 = qt * PK_ATTN_BM + warp * 16, n_q = min(16, max(0, a.Sq - i0));
    __nv_bfloat16 *stage = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf[4], of[4];
    const long long qoff = ((long long)b * a.Sq + i0) * ld + (long long)h * PK_ATTN_D;
    attn_load_afrag(qf, stage, a.q + qoff, ld, n_q, lane);
    attn_load_afrag(of, stage, a.dout + qoff, ld, n_q, lane);
    for (int i = lane; i < 16 * PK_ATTN_D; i += 32)
        sm.acc0[warp][i] = 0.f;
    const int r = lane >> 1, half = lane & 1;
    const long long qpos = a.q_pos0 + i0 + r;
    const long long lrow = ((long long)b * a.H + h) * a.Sq + i0 + r; // (b, h, s) of lse, D
    const float lse = r < n_q ? a.lse[lrow] : INFINITY, dd = r < n_q ? a.dd[lrow] : 0.f;
    int n_tiles = (a.Sk + PK_ATTN_BN - 1) / PK_ATTN_BN;
    if (a.causal) {
        const long long last = a.q_pos0 + min(a.Sq, (qt + 1) * PK_ATTN_BM) - 1 - a.k_pos0;
        n_tiles = last < 0 ? 0 : min((long long)n_tiles, last / PK_ATTN_BN + 1);
    }
    for (int kt = 0; kt < n_tiles; kt++) {
        const int j0 = kt * PK_ATTN_BN, n_k = min(PK_ATTN_BN, a.Sk - j0);
        __syncthreads();
        const long long off = ((long long)b * a.Sk + j0) * ld + (long long)h * PK_ATTN_D;
        attn_load_rows(sm.a, a.k + off, ld, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        attn_load_rows(sm.b, a.v + off, ld, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        __syncthreads();
        attn_mm_abt(sm.s[warp], qf, sm.a);  // S = q k^T
        attn_mm_abt(sm.dp[warp], of, sm.b); // dP = dO v^T
        __syncwarp();
        float ds[32];
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const int j = half * 32 + c;
            const bool masked = j >= n_k || (a.causal && a.k_pos0 + j0 + j > qpos);
            const float p = masked ? 0.f : expf(sm.s[warp][r * PK_ATTN_BN + j] * a.scale - lse);
            ds[c] = p * (sm.dp[warp][r * PK_ATTN_BN + j] - dd);
        }
        __syncwarp(); // every lane has read its scores before dS overwrites them
        __nv_bfloat16 *dsb = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
#pragma unroll
        for (int c = 0; c < 32; c++)
            dsb[r * PK_ATTN_BN + half * 32 + c] = __float2bfloat16(ds[c]);
        __syncwarp();
        attn_mm_acc(sm.acc0[warp], dsb, sm.a); // dQ += dS k
        __syncwarp();
    }
    if (r >= n_q)
        return;
    const long long base =
        (((long long)b * a.Sq + i0 + r) * a.H + h) * PK_ATTN_D + (long long)half * 32;
    attn_bwd_store(sm.acc0[warp] + r * PK_ATTN_D + half * 32, a.scale, a.dq_in, a.dq_out, a.dq_bf16,
                   base);
}

// dK and dV of key tile kt of head h of batch b from every query of the block (the whole CTA).
static __device__ void attn_bwd_dkdv_tile(const PkAttnBwdBlock &a, int b, int h, int kt,
                                          PkAttnBwdSmem &sm) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long ld = (long long)a.H * PK_ATTN_D;
    const int j0 = kt * PK_ATTN_BN + warp * 16, n_k = min(16, max(0, a.Sk - j0));
    __nv_bfloat16 *stage = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> kf[4], vf[4];
    const long long koff = ((long long)b * a.Sk + j0) * ld + (long long)h * PK_ATTN_D;
    attn_load_afrag(kf, stage, a.k + koff, ld, n_k, lane);
    attn_load_afrag(vf, stage, a.v + koff, ld, n_k, lane);
    for (int i = lane; i < 16 * PK_ATTN_D; i += 32)
        sm.acc0[warp][i] = sm.acc1[warp][i] = 0.f;
    const int r = lane >> 1, half = lane & 1;
    const long long kpos = a.k_pos0 + j0 + r;
    // Query tiles that see any key of this CTA: all, or (causal) those from its first key on.
    const int n_tiles = (a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM;
    int t_first = 0;
    if (a.causal) {
        const long long first = a.k_pos0 + (long long)kt * PK_ATTN_BN - a.q_pos0;
        t_first = first <= 0 ? 0 : (int)min((long long)n_tiles, first / PK_ATTN_BM);
    }
    for (int qt = t_first; qt < n_tiles; qt++) {
        const int i0 = qt * PK_ATTN_BM, n_q = min(PK_ATTN_BM, a.Sq - i0);
        __syncthreads();
        const long long off = ((long long)b * a.Sq + i0) * ld + (long long)h * PK_ATTN_D;
        attn_load_rows(sm.a, a.q + off, ld, PK_ATTN_BM, n_q, threadIdx.x, PK_ATTN_THREADS);
        attn_load_rows(sm.b, a.dout + off, ld, PK_ATTN_BM, n_q, threadIdx.x, PK_ATTN_THREADS);
        for (int i = threadIdx.x; i < PK_ATTN_BM; i += PK_ATTN_THREADS) {
            const long long lrow = ((long long)b * a.H + h) * a.Sq + i0 + i;
            sm.lse[i] = i < n_q ? a.lse[lrow] : INFINITY;
            sm.dd[i] = i < n_q ? a.dd[lrow] : 0.f;
        }
        __syncthreads();
        attn_mm_abt(sm.s[warp], kf, sm.a);  // S^T = k q^T
        attn_mm_abt(sm.dp[warp], vf, sm.b); // dP^T = v dO^T
        __syncwarp();
        float pv[32], ds[32];
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const int i = half * 32 + c;
            const bool masked = i >= n_q || (a.causal && kpos > a.q_pos0 + i0 + i);
            const float p =
                masked ? 0.f : expf(sm.s[warp][r * PK_ATTN_BN + i] * a.scale - sm.lse[i]);
            pv[c] = p;
            ds[c] = p * (sm.dp[warp][r * PK_ATTN_BN + i] - sm.dd[i]);
        }
        __syncwarp(); // every lane has read its scores before P and dS overwrite them
        __nv_bfloat16 *pb = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
        __nv_bfloat16 *dsb = pb + 16 * PK_ATTN_BN;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            pb[r * PK_ATTN_BN + half * 32 + c] = __float2bfloat16(pv[c]);
            dsb[r * PK_ATTN_BN + half * 32 + c] = __float2bfloat16(ds[c]);
        }
        __syncwarp();
        attn_mm_acc(sm.acc1[warp], pb, sm.b);  // dV += P^T dO
        attn_mm_acc(sm.acc0[warp], dsb, sm.a); // dK += dS^T q
        __syncwarp();
    }
    if (r >= n_k)
        return;
    const long long base =
        (((long long)b * a.Sk + j0 + r) * a.H + h) * PK_ATTN_D + (long long)half * 32;
    attn_bwd_store(sm.acc0[warp] + r * PK_ATTN_D + half * 32, a.scale, a.dk_in, a.dk_out, a.dk_bf16,
                   base);
    attn_bwd_store(sm.acc1[warp] + r * PK_ATTN_D + half * 32, 1.f, a.dv_in, a.dv_out, a.dv_bf16,
                   base);
}

// The backward's kernels. D = rowsum(dO * O): a warp per (b, s, h) row, into (B, H, S).
static __global__ void attn_bwd_rowdot_kernel(const __nv_bfloat16 *dout, const __nv_bfloat16 *out,
                                              float *dd, int B, int S, int H) {
    const long long rows = (long long)B * S * H;
    const int lane = threadIdx.x % 32;
    for (long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows;
         w += (long long)gridDim.x * blockDim.x / 32) {
        const __nv_bfloat162 x =
            reinterpret_cast<const __nv_bfloat162 *>(dout + w * PK_ATTN_D)[lane];
        const __nv_bfloat162 y =
            reinterpret_cast<const __nv_bfloat162 *>(out + w * PK_ATTN_D)[lane];
        float sum = __low2float(x) * __low2float(y) + __high2float(x) * __high2float(y);
#pragma unroll
        for (int off = 16; off; off >>= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if (lane == 0) {
            const long long h = w % H, s = w / H % S, b = w / H / S;
            dd[(b * H + h) * S + s] = sum;
        }
    }
}

static __global__ void __launch_bounds__(PK_ATTN_THREADS) attn_bwd_dq_kernel(PkAttnBwdBlock a) {
    extern __shared__ __align__(128) unsigned char attn_bwd_smem_raw[];
    PkAttnBwdSmem &sm = *reinterpret_cast<PkAttnBwdSmem *>(attn_bwd_smem_raw);
    attn_bwd_dq_tile(a, blockIdx.y / a.H, blockIdx.y % a.H, blockIdx.x, sm);
}

static __global__ void __launch_bounds__(PK_ATTN_THREADS) attn_bwd_dkdv_kernel(PkAttnBwdBlock a) {
    extern __shared__ __align__(128) unsigned char attn_bwd_smem_raw[];
    PkAttnBwdSmem &sm = *reinterpret_cast<PkAttnBwdSmem *>(attn_bwd_smem_raw);
    attn_bwd_dkdv_tile(a, blockIdx.y / a.H, blockIdx.y % a.H, blockIdx.x, sm);
}

static struct {
    ncclComm_t cp, dp;
    float *dd, *gfl; // this rank's D (B, H, S); gathered lse and D, then (B, H, T) each
    bf16 *gbf, *seq; // gathered (k, v, q, dout) per CP rank; the same as (B, T, H, D) each
    size_t n;
} g;

extern "C" int solution_init(const pk_ctx *ctx) {
    const int cp = ctx->world_size / 2; // 2 DP replicas of W/2 CP ranks, rank = d * cp + c
    if (ncclCommSplit(ctx->comm, ctx->rank / cp, ctx->rank, &g.cp, NULL) != ncclSuccess ||
        ncclCommSplit(ctx->comm, ctx->rank % cp, ctx->rank, &g.dp, NULL) != ncclSuccess)
        return 1;
    const int smem = (int)attn_bwd_smem_bytes();
    if (cudaFuncSetAttribute(attn_bwd_dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem) != cudaSuccess ||
        cudaFuncSetAttribute(attn_bwd_dkdv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem) != cudaSuccess)
        return 2;
    return 0;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    (void)ctx;
    cudaFree(g.dd);
    cudaFree(g.gfl);
    cudaFree(g.gbf);
    cudaFree(g.seq);
    if (g.cp)
        ncclCommDestroy(g.cp);
    if (g.dp)
        ncclCommDestroy(g.dp);
    return 0;
}

// Packs this rank's (k, v, q, dout) contiguously: the all-gather's send buffer.
__global__ void pack4(const uint4 *k, const uint4 *v, const uint4 *q, const uint4 *dout, uint4 *dst,
                      size_t vecs) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < 4 * vecs;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t t = i / vecs, e = i % vecs;
        dst[i] = (t == 0 ? k : t == 1 ? v : t == 2 ? q : dout)[e];
    }
}

// Gathered (cp, 4, B, S, H D) to 4 tensors (B, T, H, D) with T = cp S; lse and D from (cp, 2, B,
// H, S) to (B, H, T) each.
__global__ void to_sequence(const uint4 *gbf, uint4 *seq, const float *gfl, float *fl, int cp,
                            int B, int S, int H) {
    const size_t row_vecs = (size_t)H * PK_ATTN_D / 8, per = (size_t)B * S * row_vecs;
    const size_t n = (size_t)cp * 4 * per, T = (size_t)cp * S;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i / (4 * per), t = i / per % 4, e = i % per;
        const size_t v = e % row_vecs, s = e / row_vecs % S, b = e / row_vecs / S;
        seq[t * (size_t)B * T * row_vecs + (b * T + c * S + s) * row_vecs + v] = gbf[i];
    }
    const size_t per_f = (size_t)B * H * S, nf = (size_t)cp * 2 * per_f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nf;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i / (2 * per_f), t = i / per_f % 2, e = i % per_f;
        const size_t s = e % S, bh = e / S;
        fl[t * (size_t)B * H * T + bh * T + c * S + s] = gfl[i];
    }
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *dout, const bf16 *q, const bf16 *k,
                        const bf16 *v, const bf16 *out, const float *lse, bf16 *dq, bf16 *dk,
                        bf16 *dv, size_t B, size_t S, size_t H, size_t Dh, float softmax_scale) {
    const int cp = ctx->world_size / 2;
    const size_t n = B * S * H * PK_ATTN_D, rows = B * S * H, T = (size_t)cp * S;
    if (Dh != PK_ATTN_D)
        return 1;
    if (g.n < n) { // buffers cached across calls
        cudaFree(g.dd);
        cudaFree(g.gfl);
        cudaFree(g.gbf);
        cudaFree(g.seq);
        g.n = 0;
        // dd: this rank's lse then its D (the float all-gather's send buffer, 2 rows);
        // gfl: gathered (cp, 2 rows), then (lse, D) as (B, H, T) each.
        if (cudaMalloc(&g.dd, 2 * rows * sizeof(float)) != cudaSuccess ||
            cudaMalloc(&g.gfl, 4 * (size_t)cp * rows * sizeof(float)) != cudaSuccess ||
            cudaMalloc(&g.gbf, (4 + 4 * (size_t)cp) * n * sizeof(bf16)) != cudaSuccess ||
            cudaMalloc(&g.seq, 4 * (size_t)cp * n * sizeof(bf16)) != cudaSuccess)
            return 2;
        g.n = n;
    }
    const cudaStream_t st = ctx->stream;
    float *mine = g.dd, *gathered_f = g.gfl, *seq_f = g.gfl + 2 * (size_t)cp * rows;
    bf16 *send = g.gbf, *gathered = g.gbf + 4 * n;
    // Send buffers: (lse, D) and (k, v, q, dout) of this rank.
    if (cudaMemcpyAsync(mine, lse, rows * sizeof(float), cudaMemcpyDeviceToDevice, st) !=
        cudaSuccess)
        return 3;
    if (cudaMemsetAsync(mine + rows, 0, rows * sizeof(float), st) != cudaSuccess) // D = 0
        return 3;
    pack4<<<264, 256, 0, st>>>(
        reinterpret_cast<const uint4 *>(k), reinterpret_cast<const uint4 *>(v),
        reinterpret_cast<const uint4 *>(q), reinterpret_cast<const uint4 *>(dout),
        reinterpret_cast<uint4 *>(send), n / 8);
    if (cudaGetLastError() != cudaSuccess)
        return 4;
    ncclGroupStart();
    ncclAllGather(send, gathered, 4 * n, ncclBfloat16, g.cp, st);
    ncclAllGather(mine, gathered_f, 2 * rows, ncclFloat32, g.cp, st);
    if (ncclGroupEnd() != ncclSuccess)
        return 5;
    const size_t sn = (size_t)cp * n; // elements of each (B, T, H, D) tensor
    to_sequence<<<264, 256, 0, st>>>(reinterpret_cast<const uint4 *>(gathered),
                                     reinterpret_cast<uint4 *>(g.seq), gathered_f, seq_f, cp,
                                     (int)B, (int)S, (int)H);
    const bf16 *K = g.seq, *V = g.seq + sn, *Q = g.seq + 2 * sn, *DO = g.seq + 3 * sn;
    const float *LSE = seq_f, *DD = seq_f + (size_t)cp * rows;
    const int smem = (int)attn_bwd_smem_bytes();
    // dQ: this rank's queries against all T keys.
    PkAttnBwdBlock a = {};
    a.q = q;
    a.dout = dout;
    a.k = K;
    a.v = V;
    a.lse = lse;
    a.dd = mine + rows;
    a.B = (int)B;
    a.Sq = (int)S;
    a.Sk = (int)T;
    a.H = (int)H;
    a.scale = softmax_scale;
    a.dq_bf16 = dq;
    attn_bwd_dq_kernel<<<dim3((unsigned)((S + PK_ATTN_BM - 1) / PK_ATTN_BM), (unsigned)(B * H)),
                         PK_ATTN_THREADS, smem, st>>>(a);
    // dK, dV: this rank's keys from all T queries.
    PkAttnBwdBlock b = {};
    b.q = Q;
    b.dout = DO;
    b.k = k; // this rank's own keys
    b.v = v;
    b.lse = LSE;
    b.dd = DD;
    b.B = (int)B;
    b.Sq = (int)T;
    b.Sk = (int)S;
    b.H = (int)H;
    b.scale = softmax_scale;
    b.dk_bf16 = dk;
    b.dv_bf16 = dv;
    attn_bwd_dkdv_kernel<<<dim3((unsigned)((S + PK_ATTN_BN - 1) / PK_ATTN_BN), (unsigned)(B * H)),
                           PK_ATTN_THREADS, smem, st>>>(b);
    if (cudaGetLastError() != cudaSuccess)
        return 6;
    // The DP average: bf16, one group of three all-reduces.
    ncclGroupStart();
    ncclAllReduce(dq, dq, n, ncclBfloat16, ncclAvg, g.dp, st);
    ncclAllReduce(dk, dk, n, ncclBfloat16, ncclAvg, g.dp, st);
    ncclAllReduce(dv, dv, n, ncclBfloat16, ncclAvg, g.dp, st);
    return ncclGroupEnd() == ncclSuccess ? 0 : 7;
}
