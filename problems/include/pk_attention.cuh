// pk_attention.cuh: attention building blocks of the ring-attention references (pkb/54; meant
// for 55-57 too, issue #29).
//
// Prompt: flash-attention tiles: one CTA per 64 query rows, 64-key tiles, bf16 tensor cores
// (mma.sync), fp32 accumulation, online softmax, logsumexp merge of partial results; forward (head
// dim 64 or 128, causal or not, grouped-query) and backward.
//
// Two layers:
//   - scalar math, host and device (tested on the host: tests/problems/test_attention.c):
//     the online softmax of one row (running max m and sum l of exp(s - m), the factor that
//     rescales an accumulator when the max grows) and the logsumexp merge of two partial
//     results, PKB's _update_out_and_lse in a form that stays finite where a side is empty;
//   - under nvcc, a flash-style tile (pk_attn_fwd_tile<D>, head dim D = 64 or 128, causal or
//     not, grouped-query through PkAttnBlock::Hkv): one CTA attends 64 query rows of one
//     (batch, head) to a block of keys, tile by tile (64 keys at a time, bf16 tensor cores,
//     fp32 accumulation, online softmax), and never writes the score matrix to memory
//     (FlashAttention-2's forward: mma.sync, scores and output in registers, cp.async). Its
//     epilogue either stores the block's partial result (fp32 out, lse), merges it into a
//     running one (ring steps), or writes the final bf16 output;
//   - under nvcc, PKB's ring (pk_attn_ring_forward): the tile per step and host-driven NCCL
//     send/recv of k, v on a given communicator (the context-parallel group of 54-56);
//   - the backward (pkb/57): two flash-style tiles (pk_attn_bwd_dq_tile, a CTA per 64 queries;
//     pk_attn_bwd_dkdv_tile, a CTA per 64 keys) that recompute the scores from the forward's
//     logsumexp, and PKB's ring backward (pk_attn_ring_backward: k, v and the running dK, dV
//     passed to rank r + 1 each step). Both tiles also run under the host warp emulation.
// Layout: q, k, v and the output are (B, S, H, D) row-major, as PKB's (batch, seq, heads,
// head_dim); the row of (b, s, h) starts at ((b * S + s) * H + h) * D; D is 64 but in the
// forward tile (templated on D; pkb/77 uses 128), and k, v may have Hkv heads.
#ifndef PK_ATTENTION_CUH
#define PK_ATTENTION_CUH

#include <math.h>

#ifdef __CUDACC__
#define PK_ATTN_HD __host__ __device__
#else
#define PK_ATTN_HD
#endif

// Online softmax of one row: m the largest score so far, l = sum of exp(s - m).
struct PkSoftmaxRow {
    float m, l;
};

static inline PK_ATTN_HD PkSoftmaxRow pk_softmax_row_init(void) {
    PkSoftmaxRow r = {-INFINITY, 0.f};
    return r;
}

// Takes in a tile whose largest score is tile_max; returns the factor by which the row's
// accumulator (and l, done here) must be scaled before the tile's exp(s - m) are added. A row
// that has seen no finite score yet keeps m = -inf and a factor of 1 (nothing to rescale).
static inline PK_ATTN_HD float pk_softmax_row_rescale(PkSoftmaxRow *r, float tile_max) {
    const float m = fmaxf(r->m, tile_max);
    if (m == -INFINITY)
        return 1.f;
    const float alpha = expf(r->m - m); // exp(-inf) = 0: the first finite tile
    r->l *= alpha;
    r->m = m;
    return alpha;
}

// The unnormalised probability of score s under the row's current max (0 for a masked score).
static inline PK_ATTN_HD float pk_softmax_row_p(const PkSoftmaxRow *r, float s) {
    return s == -INFINITY ? 0.f : expf(s - r->m);
}

// log(sum of exp(s)) of the row: -inf when it has no key.
static inline PK_ATTN_HD float pk_softmax_row_lse(const PkSoftmaxRow *r) {
    return r->l > 0.f ? r->m + logf(r->l) : -INFINITY;
}

// Merge of two partial results of one row over disjoint key sets, each normalised over its
// own keys: (out_a, lse_a) and (out_b, lse_b). PKB's _update_out_and_lse:
//   out = out_a - sigmoid(lse_b - lse_a) * (out_a - out_b)
//   lse = lse_a - logsigmoid(lse_a - lse_b) = max + log1p(exp(-|lse_a - lse_b|))
// pk_lse_merge_weight is b's share sigmoid(lse_b - lse_a) (0 when b is empty, 1 when a is);
// out = out_a + w * (out_b - out_a).
static inline PK_ATTN_HD float pk_lse_merge_weight(float lse_a, float lse_b) {
    if (lse_b == -INFINITY)
        return 0.f;
    if (lse_a == -INFINITY)
        return 1.f;
    return 1.f / (1.f + expf(lse_a - lse_b));
}

static inline PK_ATTN_HD float pk_lse_merge(float lse_a, float lse_b) {
    const float hi = fmaxf(lse_a, lse_b), lo = fminf(lse_a, lse_b);
    if (lo == -INFINITY)
        return hi;
    return hi + log1pf(expf(lo - hi));
}

static inline PK_ATTN_HD float pk_lse_merge_out(float out_a, float out_b, float w_b) {
    return out_a + w_b * (out_b - out_a);
}

// The tile. PK_ATTN_EMULATE: compiled for the host against a warp emulation (the test's
// tests/problems/attention_emul.h supplies the CUDA names), so the tile itself is tested on the
// host too.
#if defined(__CUDACC__) || defined(PK_ATTN_EMULATE)
#ifndef PK_ATTN_EMULATE
#include <cuda_bf16.h>
#include <mma.h>
#include <nccl.h>
#endif
#include <stdint.h>

#define PK_ATTN_D 64
#define PK_ATTN_BM 64 // query rows per CTA (16 per warp)
#define PK_ATTN_BN 64 // keys per tile
#define PK_ATTN_WARPS 4
#define PK_ATTN_THREADS (32 * PK_ATTN_WARPS)

// The forward tile's precision of P in the P V product (its template argument PM): bf16, as
// PyTorch's SDPA (flash) kernels (the default); or split, P = P_hi + P_lo with P_hi = bf16(P) and
// P_lo = bf16(P - P_hi), two products (1.5x the tile's flops, P to ~16 bits), for references
// whose attention runs in fp32.
enum { PK_ATTN_P_BF16 = 0, PK_ATTN_P_SPLIT = 1 };

// Shared memory of one forward CTA for head dim D (64 or 128): 40.5 KiB at D = 64, 80.5 KiB at
// D = 128 (two CTAs per SM), given as dynamic shared memory (pk_attn_fwd_smem_bytes<D>()): the
// CTA's 64 queries and two stages of a K and a V tile (the next key tile loads, cp.async, while
// the current one is computed). Rows are 16-byte chunks stored XOR-swizzled (pk_attn_swz: chunk c
// of row r at c ^ (r & 7)), so that ldmatrix's 8-row reads and the 16-byte writes avoid bank
// conflicts. After the key loop the warps' fp32 outputs (o) alias the stages, and m, l hold the
// rows' running max (natural units) and sum of exp(s - m), for the epilogue.
template <int D> struct PkAttnSmemD {
    static_assert(D == 64 || D == 128, "head dim: 64 or 128");
    __nv_bfloat16 q[PK_ATTN_BM * D];
    union {
        __nv_bfloat16 kv[2][2][PK_ATTN_BN * D]; // [stage][0: k, 1: v]
        float o[PK_ATTN_WARPS][16 * D];         // after the key loop: a warp's output
    };
    float m[PK_ATTN_WARPS][16], l[PK_ATTN_WARPS][16];
};
typedef PkAttnSmemD<PK_ATTN_D> PkAttnSmem; // the D = 64 tile of pkb/54-57

template <int D = PK_ATTN_D> static inline size_t pk_attn_fwd_smem_bytes(void) {
    typedef PkAttnSmemD<D> Smem;
    return sizeof(Smem);
}

// One attention block: queries of one rank's shard against one block of keys.
struct PkAttnBlock {
    const __nv_bfloat16 *q, *k, *v; // (B, Sq, H, D) and (B, Sk, Hkv, D)
    int B, Sq, Sk, H;
    // Elements between consecutive positions of q and of k, v (0: H * D and Hkv * D,
    // contiguous): views of a fused QKV projection, (B, S, 3, H, D), have 3 H D. The output is
    // always contiguous.
    long long ld_q, ld_kv;
    long long q_pos0, k_pos0; // global positions of query 0 and key 0 (the causal mask)
    int causal;               // mask key positions above the query's
    float scale;              // softmax scale, applied to the fp32 scores
    // Epilogue: acc_in NULL: this block is the first (its result is the running one);
    // otherwise merge into (acc_in, lse_in). Then out_bf16 != NULL: write the final output
    // there (bf16); else store the running result to (acc_out, lse_out) (may equal acc_in).
    const float *acc_in, *lse_in;
    float *acc_out, *lse_out; // (B, Sq, H, D) fp32 and (B, Sq, H)
    __nv_bfloat16 *out_bf16;
    // Key/value heads (grouped-query attention): 0 means H; else H % Hkv == 0 and query head h
    // reads key/value head h / (H / Hkv) (PKB's repeat_interleave of k, v over the heads).
    int Hkv;
    // Elements between consecutive heads of k, v (0: D): PKB's key_value, cat([k, v], -1) of
    // (S, Hkv, D) tensors, has 2 D (with ld_kv = 2 Hkv D and v = k + D).
    long long hs_kv;
};

// Loads 16-byte vectors of `rows` rows of D bf16 (row stride ld elements) into dst (D per row),
// zeros beyond n_valid rows. Called by `nthreads` threads with index t.
template <int D = PK_ATTN_D>
static __device__ __forceinline__ void
pk_attn_load_rows(__nv_bfloat16 *dst, const __nv_bfloat16 *src, long long ld, int rows, int n_valid,
                  int t, int nthreads) {
    for (int i = t; i < rows * (D / 8); i += nthreads) {
        const int r = i / (D / 8), c = i % (D / 8);
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < n_valid)
            val = *reinterpret_cast<const uint4 *>(src + (long long)r * ld + c * 8);
        *reinterpret_cast<uint4 *>(dst + r * D + c * 8) = val;
    }
}

// The forward tile's primitives: cp.async of 16 bytes (zeros when !valid; src must still be a
// valid address), its groups, ldmatrix (.x4: lanes 8 j .. 8 j + 7 give the row addresses of 8 x 8
// matrix j, register j of lane i gets row i / 4, columns 2 (i % 4), +1; .trans: rows 2 (i % 4),
// +1 of column i / 4) and mma.sync m16n8k16 (bf16 in, fp32 accumulators in place). Under
// PK_ATTN_EMULATE, attention_emul.h supplies them with the same per-lane semantics.
#ifndef PK_ATTN_EMULATE
static __device__ __forceinline__ void pk_attn_cp_async16(void *dst, const void *src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
static __device__ __forceinline__ void pk_attn_cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void pk_attn_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void pk_attn_ldmatrix_x4(uint32_t (&r)[4], const void *p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ void pk_attn_ldmatrix_x4_trans(uint32_t (&r)[4], const void *p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
// c += a b: a the 16 x 16 A fragment (rows g, g + 8 of lane (g, t) = (lane / 4, lane % 4):
// a0 row g, columns 2 t, +1; a1 row g + 8; a2, a3 columns + 8), b0, b1 the 16 x 8 B fragment
// (rows 2 t, +1 and 2 t + 8, +9 of column g), c rows g (c0, c1) and g + 8 (c2, c3), columns 2 t,
// +1.
static __device__ __forceinline__ void pk_attn_mma_bf16(float (&c)[4], const uint32_t (&a)[4],
                                                        uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Two floats rounded to bf16 (nearest even), lo in the low half.
static __device__ __forceinline__ uint32_t pk_attn_pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}
#endif
// The low and high bf16 of a packed pair, as floats (exact).
static __device__ __forceinline__ float pk_attn_bf16_lo(uint32_t x) {
    return __uint_as_float(x << 16);
}
static __device__ __forceinline__ float pk_attn_bf16_hi(uint32_t x) {
    return __uint_as_float(x & 0xffff0000u);
}

// Offset (elements) of chunk c (8 bf16) of row r in a swizzled tile of D-element rows.
template <int D> static __device__ __forceinline__ int pk_attn_swz(int r, int c) {
    return r * D + ((c ^ (r & 7)) << 3);
}

// cp.async of 64 rows of D bf16 (row stride ld elements) into a swizzled tile, zeros beyond
// n_valid (>= 1) rows; by the whole CTA.
template <int D>
static __device__ __forceinline__ void
pk_attn_load_tile_async(__nv_bfloat16 *dst, const __nv_bfloat16 *src, long long ld, int n_valid) {
    constexpr int CH = D / 8; // chunks per row
    static_assert(PK_ATTN_BN * CH % PK_ATTN_THREADS == 0, "whole chunks per thread");
#pragma unroll
    for (int it = 0; it < PK_ATTN_BN * CH / PK_ATTN_THREADS; it++) {
        const int i = (int)threadIdx.x + it * PK_ATTN_THREADS, r = i / CH, c = i % CH;
        const bool ok = r < n_valid;
        pk_attn_cp_async16(dst + pk_attn_swz<D>(r, c), src + (long long)(ok ? r : 0) * ld + c * 8,
                           ok);
    }
}

// The whole CTA (PK_ATTN_THREADS threads) attends query tile `qt` (rows [64 qt, 64 qt + 64) of
// the shard) of head h of batch b to every key of the block (of head h / (H / Hkv)), and runs
// the epilogue. D (the head dim) is deduced from the shared memory's type. FlashAttention-2's
// forward: each warp holds its 16 query rows as mma.sync A fragments for the whole key loop, and
// its scores S, probabilities P and output accumulator O in registers; lane (g, t) = (lane / 4,
// lane % 4) owns rows g and g + 8 (columns 2 t, +1 of every 8). Per 64-key tile: S = Q K^T
// (fp32), scaled, masked (-inf), in log2 units (scale log2(e)); the row max over the quad
// (__shfl_xor_sync), the factor exp2(m_old - m) applied to O and l; P = exp2(s - m) rounded to
// bf16 as the A fragments of O += P V (l sums the fp32 P). A row that has seen no key keeps
// m = -inf, l = 0 and O = 0.
template <int D, int PM = PK_ATTN_P_BF16>
static __device__ void pk_attn_fwd_tile(const PkAttnBlock &a, int b, int h, int qt,
                                        PkAttnSmemD<D> &sm) {
    constexpr int DH = D / 2;          // output columns per lane in the epilogue (two per row)
    constexpr int NS = PK_ATTN_BN / 8; // score fragments (8 keys each) per row pair
    const float log2e = 1.4426950408889634f, ln2 = 0.6931471805599453f;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hkv_n = a.Hkv ? a.Hkv : a.H, hkv = h / (a.H / hkv_n);
    const long long ld = (long long)a.H * D; // the output's position stride
    const long long ldq = a.ld_q ? a.ld_q : ld, ldkv = a.ld_kv ? a.ld_kv : (long long)hkv_n * D;
    const long long hs = a.hs_kv ? a.hs_kv : D;
    const int q0 = qt * PK_ATTN_BM;             // the CTA's first query row
    const int i0 = q0 + warp * 16;              // this warp's first query row
    const int n_q = min(16, max(0, a.Sq - i0)); // its valid rows
    // Key tiles this CTA needs: all of them, or (causal) those up to its last query's position.
    int n_tiles = (a.Sk + PK_ATTN_BN - 1) / PK_ATTN_BN;
    if (a.causal) {
        const long long last = a.q_pos0 + min(a.Sq, (qt + 1) * PK_ATTN_BM) - 1 - a.k_pos0;
        n_tiles = last < 0 ? 0 : min((long long)n_tiles, last / PK_ATTN_BN + 1);
    }
    const int g = lane >> 2, t = lane & 3;
    float acc[D / 8][4]; // O: fragment n holds columns 8 n + 2 t, +1
#pragma unroll
    for (int n = 0; n < D / 8; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}; // rows g, g + 8: running max (log2 units)
    float l_run[2] = {0.f, 0.f};             // and this lane's share of the sum
    const float scale2 = a.scale * log2e;
    const __nv_bfloat16 *kb = a.k + (long long)b * a.Sk * ldkv + (long long)hkv * hs;
    const __nv_bfloat16 *vb = a.v + (long long)b * a.Sk * ldkv + (long long)hkv * hs;
    if (n_tiles > 0) { // the queries and the first K, V tile: one cp.async group
        pk_attn_load_tile_async<D>(sm.q, a.q + ((long long)b * a.Sq + q0) * ldq + (long long)h * D,
                                   ldq, min(PK_ATTN_BM, a.Sq - q0));
        pk_attn_load_tile_async<D>(sm.kv[0][0], kb, ldkv, min(PK_ATTN_BN, a.Sk));
        pk_attn_load_tile_async<D>(sm.kv[0][1], vb, ldkv, min(PK_ATTN_BN, a.Sk));
        pk_attn_cp_async_commit();
    }
    uint32_t qf[D / 16][4]; // Q: A fragment kk holds columns [16 kk, 16 kk + 16)
    for (int kt = 0; kt < n_tiles; kt++) {
        const int j0 = kt * PK_ATTN_BN, n_k = min(PK_ATTN_BN, a.Sk - j0), st = kt & 1;
        if (kt + 1 < n_tiles) { // the next tile into the other stage (free: the loop's barrier)
            const long long off = (long long)(j0 + PK_ATTN_BN) * ldkv;
            const int n_next = min(PK_ATTN_BN, a.Sk - j0 - PK_ATTN_BN);
            pk_attn_load_tile_async<D>(sm.kv[st ^ 1][0], kb + off, ldkv, n_next);
            pk_attn_load_tile_async<D>(sm.kv[st ^ 1][1], vb + off, ldkv, n_next);
            pk_attn_cp_async_commit();
            pk_attn_cp_async_wait<1>(); // this tile's group (and the queries) landed
        } else {
            pk_attn_cp_async_wait<0>();
        }
        __syncthreads(); // every thread's copies of this tile are visible
        if (kt == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
                pk_attn_ldmatrix_x4(
                    qf[kk], sm.q + pk_attn_swz<D>(warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                  kk * 2 + (lane >> 4)));
        }
        const __nv_bfloat16 *sk = sm.kv[st][0], *sv = sm.kv[st][1];
        // S = Q K^T: fragment n holds keys 8 n + 2 t, +1. One ldmatrix.x4 gives the B fragments
        // of key groups n and n + 1 (K's rows are B's columns).
        float s[NS][4];
#pragma unroll
        for (int n = 0; n < NS; n++)
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
            for (int n = 0; n < NS; n += 2) {
                uint32_t kf[4];
                pk_attn_ldmatrix_x4(kf, sk + pk_attn_swz<D>(n * 8 + (lane & 7) + (lane >> 4) * 8,
                                                            kk * 2 + ((lane >> 3) & 1)));
                pk_attn_mma_bf16(s[n], qf[kk], kf[0], kf[1]);
                pk_attn_mma_bf16(s[n + 1], qf[kk], kf[2], kf[3]);
            }
#pragma unroll
        for (int n = 0; n < NS; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[n][e] *= scale2;
        // Masks: keys beyond Sk, and (causal) key positions above the query's. Row i of the
        // warp sees key column j iff j < n_k and (causal) j <= i + dpos.
        if (n_k < PK_ATTN_BN || (a.causal && a.k_pos0 + j0 + PK_ATTN_BN - 1 > a.q_pos0 + i0)) {
            const long long dpos = a.q_pos0 + i0 - a.k_pos0 - j0;
            const int d0 = (int)max(-2LL * PK_ATTN_BN, min(2LL * PK_ATTN_BN, dpos));
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int lim = a.causal ? min(n_k, d0 + g + 8 * hr + 1) : n_k;
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        if (n * 8 + 2 * t + e >= lim)
                            s[n][2 * hr + e] = -INFINITY;
            }
        }
        // Online softmax of the tile.
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < NS; n++) {
            mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
        }
        float alpha[2], msub[2];
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 1));
            mx[hr] = fmaxf(mx[hr], __shfl_xor_sync(0xffffffffu, mx[hr], 2));
            const float m = fmaxf(m_run[hr], mx[hr]);
            // No finite score yet: nothing to rescale, and every P is exp2(-inf) = 0.
            alpha[hr] = m == -INFINITY ? 1.f : exp2f(m_run[hr] - m);
            msub[hr] = m == -INFINITY ? 0.f : m;
            m_run[hr] = m;
            l_run[hr] *= alpha[hr];
        }
#pragma unroll
        for (int n = 0; n < D / 8; n++) {
            acc[n][0] *= alpha[0];
            acc[n][1] *= alpha[0];
            acc[n][2] *= alpha[1];
            acc[n][3] *= alpha[1];
        }
        // P = exp2(s - m), rounded to bf16 as the A fragments of O += P V, 16 keys at a time:
        // keys [16 j, 16 j + 16) are score fragments 2 j and 2 j + 1. One ldmatrix.x4.trans gives
        // the B fragments of output column groups 2 d and 2 d + 1 (V's rows are B's rows).
        // PK_ATTN_P_SPLIT: P = P_hi + P_lo, both bf16 (P_lo = bf16(P - P_hi)), two products.
#pragma unroll
        for (int j = 0; j < PK_ATTN_BN / 16; j++) {
            float p[2][4];
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    p[u][e] = exp2f(s[2 * j + u][e] - msub[e >> 1]);
                    l_run[e >> 1] += p[u][e];
                }
            uint32_t pf[4], pl[4];
#pragma unroll
            for (int i = 0; i < 4;
                 i++) // A register i: score fragment 2 j + (i >> 1), row g + 8 (i & 1)
                pf[i] = pk_attn_pack_bf16(p[i >> 1][2 * (i & 1)], p[i >> 1][2 * (i & 1) + 1]);
            if (PM == PK_ATTN_P_SPLIT)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float *x = &p[i >> 1][2 * (i & 1)];
                    pl[i] = pk_attn_pack_bf16(x[0] - pk_attn_bf16_lo(pf[i]),
                                              x[1] - pk_attn_bf16_hi(pf[i]));
                }
#pragma unroll
            for (int d = 0; d < D / 16; d++) {
                uint32_t vf[4];
                pk_attn_ldmatrix_x4_trans(
                    vf, sv + pk_attn_swz<D>(j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                            d * 2 + (lane >> 4)));
                pk_attn_mma_bf16(acc[2 * d], pf, vf[0], vf[1]);
                pk_attn_mma_bf16(acc[2 * d + 1], pf, vf[2], vf[3]);
                if (PM == PK_ATTN_P_SPLIT) {
                    pk_attn_mma_bf16(acc[2 * d], pl, vf[0], vf[1]);
                    pk_attn_mma_bf16(acc[2 * d + 1], pl, vf[2], vf[3]);
                }
            }
        }
        __syncthreads(); // every warp is done with this stage before it is refilled
    }
    // The warp's O and row statistics into shared memory (o aliases the stages, free after the
    // loop's last barrier; no copy is pending), for the epilogue.
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        l_run[hr] += __shfl_xor_sync(0xffffffffu, l_run[hr], 1);
        l_run[hr] += __shfl_xor_sync(0xffffffffu, l_run[hr], 2);
    }
    float *ow = sm.o[warp];
#pragma unroll
    for (int n = 0; n < D / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            ow[(g + 8 * (e >> 1)) * D + n * 8 + 2 * t + (e & 1)] = acc[n][e];
    if (t == 0)
        for (int hr = 0; hr < 2; hr++) {
            sm.m[warp][g + 8 * hr] = m_run[hr] * ln2; // -inf stays -inf
            sm.l[warp][g + 8 * hr] = l_run[hr];
        }
    __syncwarp();
    // Epilogue: lanes 2r and 2r + 1 own row r of the warp's 16, output columns
    // [DH half, DH half + DH). This block's normalised output and lse, merged into the running
    // result. Both lanes of a row read its running lse before lane 0 overwrites it (acc_out may
    // be acc_in).
    const int r = lane >> 1, half = lane & 1;
    PkSoftmaxRow row;
    row.m = sm.m[warp][r];
    row.l = sm.l[warp][r];
    const long long rid = ((long long)b * a.Sq + i0 + r) * a.H + h; // (b, s, h)
    float lse_a = -INFINITY;
    if (r < n_q && a.acc_in)
        lse_a = a.lse_in[rid];
    __syncwarp();
    if (r >= n_q)
        return;
    const float lse_b = pk_softmax_row_lse(&row);
    const float inv_l = row.l > 0.f ? 1.f / row.l : 0.f;
    const float w = a.acc_in ? pk_lse_merge_weight(lse_a, lse_b) : 1.f;
    const float lse = a.acc_in ? pk_lse_merge(lse_a, lse_b) : lse_b;
    const long long base = rid * D + half * DH;
    const float *o = sm.o[warp] + r * D + half * DH;
#pragma unroll 8
    for (int c = 0; c < DH; c++) {
        const float ob = o[c] * inv_l;
        const float val = a.acc_in ? pk_lse_merge_out(a.acc_in[base + c], ob, w) : ob;
        if (a.out_bf16)
            a.out_bf16[base + c] = __float2bfloat16(val);
        else
            a.acc_out[base + c] = val;
    }
    if (!a.out_bf16 && half == 0)
        a.lse_out[rid] = lse;
}

// ---- The backward tile (pkb/57): flash-style, the score matrix never in memory ----
// For one block of keys, given the forward's logsumexp lse and D = rowsum(dO * O) per query row:
//   P = exp(scale q k^T - lse), dP = dO v^T, dS = P (dP - D),
//   dQ = scale dS k, dK = scale dS^T q, dV = P^T dO
// (FlashAttention-2's backward; PKB's _local_attn_backward). Two tiles, no atomics: the query
// tile (pk_attn_bwd_dq_tile: a CTA per 64 queries, over every key tile) and the key tile
// (pk_attn_bwd_dkdv_tile: a CTA per 64 keys, over every query tile); each recomputes S and P.
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

static inline size_t pk_attn_bwd_smem_bytes(void) {
    return sizeof(PkAttnBwdSmem);
}

// 16 rows of 64 bf16 from global (row stride ld, n_valid rows, zeros beyond) into 4 A fragments,
// staged through `stage` (16 x 64 bf16) by the warp.
static __device__ __forceinline__ void
pk_attn_load_afrag(nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                                          nvcuda::wmma::row_major> (&f)[4],
                   __nv_bfloat16 *stage, const __nv_bfloat16 *src, long long ld, int n_valid,
                   int lane) {
    pk_attn_load_rows(stage, src, ld, 16, n_valid, lane, 32);
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        nvcuda::wmma::load_matrix_sync(f[kk], stage + kk * 16, PK_ATTN_D);
    __syncwarp();
}

// C (16 x 64, fp32, row stride 64) = A (4 fragments: 16 x 64) B^T, B (64 x 64 bf16 in shared
// memory, row r of B^T's source = column r of the product): scores-like products q k^T.
static __device__ __forceinline__ void
pk_attn_mm_abt(float *c,
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
static __device__ __forceinline__ void pk_attn_mm_acc(float *acc, const __nv_bfloat16 *a,
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
static __device__ __forceinline__ void pk_attn_bwd_store(const float *acc, float scale,
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
static __device__ void pk_attn_bwd_dq_tile(const PkAttnBwdBlock &a, int b, int h, int qt,
                                           PkAttnBwdSmem &sm) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long ld = (long long)a.H * PK_ATTN_D;
    const int i0 = qt * PK_ATTN_BM + warp * 16, n_q = min(16, max(0, a.Sq - i0));
    __nv_bfloat16 *stage = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf[4], of[4];
    const long long qoff = ((long long)b * a.Sq + i0) * ld + (long long)h * PK_ATTN_D;
    pk_attn_load_afrag(qf, stage, a.q + qoff, ld, n_q, lane);
    pk_attn_load_afrag(of, stage, a.dout + qoff, ld, n_q, lane);
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
        pk_attn_load_rows(sm.a, a.k + off, ld, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        pk_attn_load_rows(sm.b, a.v + off, ld, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        __syncthreads();
        pk_attn_mm_abt(sm.s[warp], qf, sm.a);  // S = q k^T
        pk_attn_mm_abt(sm.dp[warp], of, sm.b); // dP = dO v^T
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
        pk_attn_mm_acc(sm.acc0[warp], dsb, sm.a); // dQ += dS k
        __syncwarp();
    }
    if (r >= n_q)
        return;
    const long long base =
        (((long long)b * a.Sq + i0 + r) * a.H + h) * PK_ATTN_D + (long long)half * 32;
    pk_attn_bwd_store(sm.acc0[warp] + r * PK_ATTN_D + half * 32, a.scale, a.dq_in, a.dq_out,
                      a.dq_bf16, base);
}

// dK and dV of key tile kt of head h of batch b from every query of the block (the whole CTA).
static __device__ void pk_attn_bwd_dkdv_tile(const PkAttnBwdBlock &a, int b, int h, int kt,
                                             PkAttnBwdSmem &sm) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long ld = (long long)a.H * PK_ATTN_D;
    const int j0 = kt * PK_ATTN_BN + warp * 16, n_k = min(16, max(0, a.Sk - j0));
    __nv_bfloat16 *stage = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> kf[4], vf[4];
    const long long koff = ((long long)b * a.Sk + j0) * ld + (long long)h * PK_ATTN_D;
    pk_attn_load_afrag(kf, stage, a.k + koff, ld, n_k, lane);
    pk_attn_load_afrag(vf, stage, a.v + koff, ld, n_k, lane);
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
        pk_attn_load_rows(sm.a, a.q + off, ld, PK_ATTN_BM, n_q, threadIdx.x, PK_ATTN_THREADS);
        pk_attn_load_rows(sm.b, a.dout + off, ld, PK_ATTN_BM, n_q, threadIdx.x, PK_ATTN_THREADS);
        for (int i = threadIdx.x; i < PK_ATTN_BM; i += PK_ATTN_THREADS) {
            const long long lrow = ((long long)b * a.H + h) * a.Sq + i0 + i;
            sm.lse[i] = i < n_q ? a.lse[lrow] : INFINITY;
            sm.dd[i] = i < n_q ? a.dd[lrow] : 0.f;
        }
        __syncthreads();
        pk_attn_mm_abt(sm.s[warp], kf, sm.a);  // S^T = k q^T
        pk_attn_mm_abt(sm.dp[warp], vf, sm.b); // dP^T = v dO^T
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
        pk_attn_mm_acc(sm.acc1[warp], pb, sm.b);  // dV += P^T dO
        pk_attn_mm_acc(sm.acc0[warp], dsb, sm.a); // dK += dS^T q
        __syncwarp();
    }
    if (r >= n_k)
        return;
    const long long base =
        (((long long)b * a.Sk + j0 + r) * a.H + h) * PK_ATTN_D + (long long)half * 32;
    pk_attn_bwd_store(sm.acc0[warp] + r * PK_ATTN_D + half * 32, a.scale, a.dk_in, a.dk_out,
                      a.dk_bf16, base);
    pk_attn_bwd_store(sm.acc1[warp] + r * PK_ATTN_D + half * 32, 1.f, a.dv_in, a.dv_out, a.dv_bf16,
                      base);
}

#ifdef __CUDACC__
// One block: grid (ceil(Sq / 64), B * H), PK_ATTN_THREADS threads, pk_attn_fwd_smem_bytes<D>()
// of dynamic shared memory (above the 48 KiB default: cudaFuncSetAttribute once per process
// and D).
template <int D, int PM = PK_ATTN_P_BF16>
static __global__ void __launch_bounds__(PK_ATTN_THREADS) pk_attn_fwd_kernel(PkAttnBlock a) {
    extern __shared__ __align__(128) unsigned char pk_attn_smem_raw[];
    PkAttnSmemD<D> &sm = *reinterpret_cast<PkAttnSmemD<D> *>(pk_attn_smem_raw);
    const int bh = blockIdx.y;
    // The last query tiles first: under a causal mask they have the most key tiles, and the
    // short ones then fill the end of the grid.
    pk_attn_fwd_tile<D, PM>(a, bh / a.H, bh % a.H, (int)(gridDim.x - 1 - blockIdx.x), sm);
}

template <int D = PK_ATTN_D, int PM = PK_ATTN_P_BF16>
static inline cudaError_t pk_attn_fwd_launch(const PkAttnBlock &a, cudaStream_t stream) {
    static bool attr_set = false;
    if (!attr_set) {
        const cudaError_t e = cudaFuncSetAttribute(pk_attn_fwd_kernel<D, PM>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)pk_attn_fwd_smem_bytes<D>());
        if (e != cudaSuccess)
            return e;
        attr_set = true;
    }
    const dim3 grid((unsigned)((a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM), (unsigned)(a.B * a.H));
    pk_attn_fwd_kernel<D, PM><<<grid, PK_ATTN_THREADS, pk_attn_fwd_smem_bytes<D>(), stream>>>(a);
    return cudaGetLastError();
}

// PKB's _ring_attn_forward (problems 54-56) on one communicator (the context-parallel group),
// steps one after another: at step s, rank r attends to the block of rank r - s (causal: only
// s <= r, the own block masked) and merges it into the running fp32 result in the epilogue (the
// last block writes the bf16 output); then host-driven NCCL passes the current k, v to rank
// r + 1 and receives rank r - 1's (one group). world == 1 is plain local attention.
struct PkAttnRing {
    const __nv_bfloat16 *q; // this rank's queries (B, S, H, D), positions ld_q apart (0: H D)
    long long ld_q;
    const __nv_bfloat16 *k, *v; // this rank's keys and values, contiguous (B, S, H, D)
    __nv_bfloat16 *out;         // (B, S, H, D), contiguous
    int B, S, H, causal;
    float scale;
    ncclComm_t comm; // the ring's group; rank and world within it
    int rank, world;
    __nv_bfloat16 *ring; // 4 B S H D elements: two (k, v) receive buffers
    float *acc;          // B S H (D + 1) floats: the running output, then the lse
};

// Returns 0, 2000 + a CUDA error or 1000 + an NCCL result. PM: the tile's P precision
// (pkb/54-56, whose PKB references are fp32 attention, use PK_ATTN_P_SPLIT).
template <int PM = PK_ATTN_P_BF16>
static inline int pk_attn_ring_forward(const PkAttnRing &r, cudaStream_t stream) {
    const size_t n = (size_t)r.B * r.S * r.H * PK_ATTN_D; // elements of k (and of v)
    float *acc = r.acc, *lse = r.acc + n;
    const __nv_bfloat16 *k = r.k, *v = r.v;
    const int last = r.causal ? r.rank : r.world - 1; // the last block this rank attends to
    for (int step = 0; step < r.world; step++) {
        if (step <= last) {
            PkAttnBlock a = {};
            a.q = r.q;
            a.k = k;
            a.v = v;
            a.B = r.B;
            a.Sq = a.Sk = r.S;
            a.H = r.H;
            a.ld_q = r.ld_q;
            a.q_pos0 = (long long)r.rank * r.S;
            a.k_pos0 = (long long)((r.rank - step + r.world) % r.world) * r.S;
            a.causal = r.causal && step == 0; // earlier ranks' keys all precede the queries
            a.scale = r.scale;
            a.acc_in = step == 0 ? NULL : acc;
            a.lse_in = step == 0 ? NULL : lse;
            a.acc_out = acc;
            a.lse_out = lse;
            a.out_bf16 = step == last ? r.out : NULL;
            const cudaError_t e = pk_attn_fwd_launch<PK_ATTN_D, PM>(a, stream);
            if (e != cudaSuccess)
                return 2000 + (int)e;
        }
        if (step + 1 == r.world)
            break;
        __nv_bfloat16 *next = r.ring + (size_t)(step % 2) * 2 * n; // never where k, v point
        const int to = (r.rank + 1) % r.world, from = (r.rank + r.world - 1) % r.world;
        ncclResult_t rc = ncclGroupStart();
        if (rc == ncclSuccess)
            rc = ncclSend(k, n, ncclBfloat16, to, r.comm, stream);
        if (rc == ncclSuccess)
            rc = ncclSend(v, n, ncclBfloat16, to, r.comm, stream);
        if (rc == ncclSuccess)
            rc = ncclRecv(next, n, ncclBfloat16, from, r.comm, stream);
        if (rc == ncclSuccess)
            rc = ncclRecv(next + n, n, ncclBfloat16, from, r.comm, stream);
        const ncclResult_t end = ncclGroupEnd();
        if (rc != ncclSuccess || end != ncclSuccess)
            return 1000 + (int)(rc != ncclSuccess ? rc : end);
        k = next;
        v = next + n;
    }
    return 0;
}

// dk (n fp32) then dv (n fp32) rounded to bf16.
static __global__ void pk_attn_bwd_round_kernel(const float *src, __nv_bfloat16 *dk,
                                                __nv_bfloat16 *dv, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < 2 * n;
         i += (size_t)gridDim.x * blockDim.x) {
        const __nv_bfloat16 x = __float2bfloat16(src[i]);
        if (i < n)
            dk[i] = x;
        else
            dv[i - n] = x;
    }
}

// The backward's kernels. D = rowsum(dO * O): a warp per (b, s, h) row, into (B, H, S).
static __global__ void pk_attn_bwd_rowdot_kernel(const __nv_bfloat16 *dout,
                                                 const __nv_bfloat16 *out, float *dd, int B, int S,
                                                 int H) {
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

static __global__ void __launch_bounds__(PK_ATTN_THREADS) pk_attn_bwd_dq_kernel(PkAttnBwdBlock a) {
    extern __shared__ __align__(128) unsigned char pk_attn_bwd_smem_raw[];
    PkAttnBwdSmem &sm = *reinterpret_cast<PkAttnBwdSmem *>(pk_attn_bwd_smem_raw);
    pk_attn_bwd_dq_tile(a, blockIdx.y / a.H, blockIdx.y % a.H, blockIdx.x, sm);
}

static __global__ void __launch_bounds__(PK_ATTN_THREADS)
    pk_attn_bwd_dkdv_kernel(PkAttnBwdBlock a) {
    extern __shared__ __align__(128) unsigned char pk_attn_bwd_smem_raw[];
    PkAttnBwdSmem &sm = *reinterpret_cast<PkAttnBwdSmem *>(pk_attn_bwd_smem_raw);
    pk_attn_bwd_dkdv_tile(a, blockIdx.y / a.H, blockIdx.y % a.H, blockIdx.x, sm);
}

static inline cudaError_t pk_attn_bwd_rowdot(const __nv_bfloat16 *dout, const __nv_bfloat16 *out,
                                             float *dd, int B, int S, int H, cudaStream_t stream) {
    pk_attn_bwd_rowdot_kernel<<<4 * 132, 256, 0, stream>>>(dout, out, dd, B, S, H);
    return cudaGetLastError();
}

// Both tiles of one block: dQ (if dq_out or dq_bf16) and dK, dV (if dk_out or dk_bf16).
static inline cudaError_t pk_attn_bwd_launch(const PkAttnBwdBlock &a, cudaStream_t stream) {
    static bool attr_set = false;
    const int smem = (int)pk_attn_bwd_smem_bytes();
    if (!attr_set) {
        cudaError_t e = cudaFuncSetAttribute(pk_attn_bwd_dq_kernel,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(pk_attn_bwd_dkdv_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess)
            return e;
        attr_set = true;
    }
    if (a.dq_out || a.dq_bf16) {
        const dim3 grid((unsigned)((a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM), (unsigned)(a.B * a.H));
        pk_attn_bwd_dq_kernel<<<grid, PK_ATTN_THREADS, smem, stream>>>(a);
    }
    if (a.dk_out || a.dk_bf16) {
        const dim3 grid((unsigned)((a.Sk + PK_ATTN_BN - 1) / PK_ATTN_BN), (unsigned)(a.B * a.H));
        pk_attn_bwd_dkdv_kernel<<<grid, PK_ATTN_THREADS, smem, stream>>>(a);
    }
    return cudaGetLastError();
}

// PKB's _ring_attn_backward (pkb/57) on one communicator, steps one after another: at step s,
// rank r holds the k, v of rank r - s and the running dK, dV of that block (the partial sums of
// ranks r - s .. r - 1, received); it adds its own queries' share (non-causal, or causal with
// s <= r as PKB: later blocks pass through), accumulates dQ in fp32, then host-driven NCCL
// passes k, v (bf16) and the running dK, dV (fp32, as PKB's) to rank r + 1 and receives rank
// r - 1's. After the last step the received dK, dV are this rank's own keys' gradients. dq, dk,
// dv are written bf16. world == 1 is the local backward. k and v must not be in NCCL-windowed
// memory (copy them first: host send/recv between the windowed arena and plain memory hangs in
// NCCL 2.28.3).
struct PkAttnRingBwd {
    const __nv_bfloat16 *q, *k, *v, *dout, *out; // this rank's (B, S, H, D), contiguous
    const float *lse;                            // (B, H, S)
    __nv_bfloat16 *dq, *dk, *dv;                 // (B, S, H, D)
    int B, S, H, causal;
    float scale;
    ncclComm_t comm;
    int rank, world;
    __nv_bfloat16 *ring; // 4 B S H D elements: two (k, v) receive buffers
    float *work;         // B S H (5 D + 1) floats: dq, two (dk, dv) pairs, D
};

// Returns 0, 2000 + a CUDA error or 1000 + an NCCL result.
static inline int pk_attn_ring_backward(const PkAttnRingBwd &r, cudaStream_t stream) {
    const size_t n = (size_t)r.B * r.S * r.H * PK_ATTN_D;
    float *dq = r.work, *dkv[2] = {r.work + n, r.work + 3 * n}, *dd = r.work + 5 * n;
    cudaError_t e = pk_attn_bwd_rowdot(r.dout, r.out, dd, r.B, r.S, r.H, stream);
    if (e != cudaSuccess)
        return 2000 + (int)e;
    const __nv_bfloat16 *k = r.k, *v = r.v;
    const int last = r.causal ? r.rank : r.world - 1; // the last block with queries' share
    for (int step = 0; step < r.world; step++) {
        // dkv[step % 2]: the partial sums received last step, completed in place; the next
        // receive goes to the other pair.
        float *cur = dkv[step % 2], *recv = dkv[(step + 1) % 2];
        PkAttnBwdBlock a = {};
        a.q = r.q;
        a.dout = r.dout;
        a.k = k;
        a.v = v;
        a.lse = r.lse;
        a.dd = dd;
        a.B = r.B;
        a.Sq = a.Sk = r.S;
        a.H = r.H;
        a.q_pos0 = (long long)r.rank * r.S;
        a.k_pos0 = (long long)((r.rank - step + r.world) % r.world) * r.S;
        a.causal = r.causal && step == 0;
        a.scale = r.scale;
        a.dq_in = step == 0 ? NULL : dq;
        a.dq_out = dq;
        a.dq_bf16 = step == last ? r.dq : NULL;
        if (r.world == 1) { // the local backward: straight to bf16
            a.dk_bf16 = r.dk;
            a.dv_bf16 = r.dv;
        } else {
            a.dk_in = step == 0 ? NULL : cur;
            a.dv_in = step == 0 ? NULL : cur + n;
            a.dk_out = cur;
            a.dv_out = cur + n;
        }
        if (step <= last) { // else no queries' share: the received partial sums pass on
            e = pk_attn_bwd_launch(a, stream);
            if (e != cudaSuccess)
                return 2000 + (int)e;
        }
        if (r.world == 1)
            return 0;
        __nv_bfloat16 *next = r.ring + (size_t)(step % 2) * 2 * n; // never where k, v point
        const int to = (r.rank + 1) % r.world, from = (r.rank + r.world - 1) % r.world;
        ncclResult_t rc = ncclGroupStart();
        if (rc == ncclSuccess && step + 1 < r.world) {
            rc = ncclSend(k, n, ncclBfloat16, to, r.comm, stream);
            if (rc == ncclSuccess)
                rc = ncclSend(v, n, ncclBfloat16, to, r.comm, stream);
            if (rc == ncclSuccess)
                rc = ncclRecv(next, n, ncclBfloat16, from, r.comm, stream);
            if (rc == ncclSuccess)
                rc = ncclRecv(next + n, n, ncclBfloat16, from, r.comm, stream);
        }
        if (rc == ncclSuccess)
            rc = ncclSend(cur, 2 * n, ncclFloat32, to, r.comm, stream);
        if (rc == ncclSuccess)
            rc = ncclRecv(recv, 2 * n, ncclFloat32, from, r.comm, stream);
        const ncclResult_t end = ncclGroupEnd();
        if (rc != ncclSuccess || end != ncclSuccess)
            return 1000 + (int)(rc != ncclSuccess ? rc : end);
        k = next;
        v = next + n;
    }
    // The last receive: this rank's own keys' dK, dV (in dkv[world % 2]), rounded to bf16.
    const float *mine = dkv[r.world % 2];
    pk_attn_bwd_round_kernel<<<4 * 132, 256, 0, stream>>>(mine, r.dk, r.dv, n);
    e = cudaGetLastError();
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
#endif // __CUDACC__
#endif // __CUDACC__ || PK_ATTN_EMULATE

#endif
