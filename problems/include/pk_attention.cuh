// pk_attention.cuh: attention building blocks of the ring-attention references (pkb/54; meant
// for 55-57 too, issue #29).
//
// Two layers:
//   - scalar math, host and device (tested on the host: tests/problems/test_attention.c):
//     the online softmax of one row (running max m and sum l of exp(s - m), the factor that
//     rescales an accumulator when the max grows) and the logsumexp merge of two partial
//     results, PKB's _update_out_and_lse in a form that stays finite where a side is empty;
//   - under nvcc, a flash-style tile (pk_attn_fwd_tile): one CTA attends 64 query rows of one
//     (batch, head) to a block of keys, tile by tile (64 keys at a time, bf16 tensor cores,
//     fp32 accumulation, online softmax), and never writes the score matrix to memory. Its
//     epilogue either stores the block's partial result (fp32 out, lse), merges it into a
//     running one (ring steps), or writes the final bf16 output;
//   - under nvcc, PKB's ring (pk_attn_ring_forward): the tile per step and host-driven NCCL
//     send/recv of k, v on a given communicator (the context-parallel group of 54-56).
// Layout: q, k, v and the output are (B, S, H, D) row-major, as PKB's (batch, seq, heads,
// head_dim); the row of (b, s, h) starts at ((b * S + s) * H + h) * D; D is 64.
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

// Shared memory of one CTA: 48 KiB, given as dynamic shared memory (pk_attn_fwd_smem_bytes).
struct PkAttnSmem {
    __nv_bfloat16 k[PK_ATTN_BN * PK_ATTN_D];
    __nv_bfloat16 v[PK_ATTN_BN * PK_ATTN_D];
    float s[PK_ATTN_WARPS][16 * PK_ATTN_BN]; // a warp's scores; its P (bf16) and Q stage alias it
    float o[PK_ATTN_WARPS][16 * PK_ATTN_D];  // a warp's output accumulator
};

static inline size_t pk_attn_fwd_smem_bytes(void) {
    return sizeof(PkAttnSmem);
}

// One attention block: queries of one rank's shard against one block of keys.
struct PkAttnBlock {
    const __nv_bfloat16 *q, *k, *v; // (B, Sq, H, D) and (B, Sk, H, D)
    int B, Sq, Sk, H;
    // Elements between consecutive positions of q and of k, v (0: H * D, contiguous): views of
    // a fused QKV projection, (B, S, 3, H, D), have 3 H D. The output is always contiguous.
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
};

// Loads 16-byte vectors of `rows` rows of 64 bf16 (row stride ld elements) into dst (64 per
// row), zeros beyond n_valid rows. Called by `nthreads` threads with index t.
static __device__ __forceinline__ void pk_attn_load_rows(__nv_bfloat16 *dst,
                                                         const __nv_bfloat16 *src, long long ld,
                                                         int rows, int n_valid, int t,
                                                         int nthreads) {
    for (int i = t; i < rows * (PK_ATTN_D / 8); i += nthreads) {
        const int r = i / (PK_ATTN_D / 8), c = i % (PK_ATTN_D / 8);
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r < n_valid)
            val = *reinterpret_cast<const uint4 *>(src + (long long)r * ld + c * 8);
        *reinterpret_cast<uint4 *>(dst + r * PK_ATTN_D + c * 8) = val;
    }
}

// The whole CTA (PK_ATTN_THREADS threads) attends query tile `qt` (rows [64 qt, 64 qt + 64) of
// the shard) of head h of batch b to every key of the block, and runs the epilogue.
static __device__ void pk_attn_fwd_tile(const PkAttnBlock &a, int b, int h, int qt,
                                        PkAttnSmem &sm) {
    namespace wmma = nvcuda::wmma;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long ld = (long long)a.H * PK_ATTN_D; // the output's position stride
    const long long ldq = a.ld_q ? a.ld_q : ld, ldkv = a.ld_kv ? a.ld_kv : ld;
    const int i0 = qt * PK_ATTN_BM + warp * 16; // this warp's first query row
    const int n_q = min(16, max(0, a.Sq - i0)); // its valid rows
    // Queries: staged through the warp's score buffer, kept as 4 A fragments (16 x 64).
    __nv_bfloat16 *stage = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
    pk_attn_load_rows(stage, a.q + ((long long)b * a.Sq + i0) * ldq + (long long)h * PK_ATTN_D, ldq,
                      16, n_q, lane, 32);
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf[4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        wmma::load_matrix_sync(qf[kk], stage + kk * 16, PK_ATTN_D);
    for (int i = lane; i < 16 * PK_ATTN_D; i += 32)
        sm.o[warp][i] = 0.f;
    __syncwarp();

    // Lanes 2r and 2r + 1 own row r of the warp's 16: columns [32 half, 32 half + 32).
    const int r = lane >> 1, half = lane & 1;
    const long long qpos = a.q_pos0 + i0 + r;
    PkSoftmaxRow row = pk_softmax_row_init();
    // Key tiles this CTA needs: all of them, or (causal) those up to its last query's position.
    int n_tiles = (a.Sk + PK_ATTN_BN - 1) / PK_ATTN_BN;
    if (a.causal) {
        const long long last = a.q_pos0 + min(a.Sq, (qt + 1) * PK_ATTN_BM) - 1 - a.k_pos0;
        n_tiles = last < 0 ? 0 : min((long long)n_tiles, last / PK_ATTN_BN + 1);
    }
    for (int kt = 0; kt < n_tiles; kt++) {
        const int j0 = kt * PK_ATTN_BN, n_k = min(PK_ATTN_BN, a.Sk - j0);
        __syncthreads(); // every warp is done with the previous K and V
        const long long off = ((long long)b * a.Sk + j0) * ldkv + (long long)h * PK_ATTN_D;
        pk_attn_load_rows(sm.k, a.k + off, ldkv, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        pk_attn_load_rows(sm.v, a.v + off, ldkv, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        __syncthreads();
        // S = Q K^T (16 x 64, fp32), into the warp's score buffer.
#pragma unroll
        for (int n = 0; n < PK_ATTN_BN / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.f);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, sm.k + n * 16 * PK_ATTN_D + kk * 16, PK_ATTN_D);
                wmma::mma_sync(sf, qf[kk], kf, sf);
            }
            wmma::store_matrix_sync(sm.s[warp] + n * 16, sf, PK_ATTN_BN, wmma::mem_row_major);
        }
        __syncwarp();
        // Online softmax of the tile: scale, mask, new max, P = exp(s - m) as bf16.
        float sv[32];
        float tmax = -INFINITY;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            const int j = half * 32 + c;
            float s = sm.s[warp][r * PK_ATTN_BN + j] * a.scale;
            if (j >= n_k || (a.causal && a.k_pos0 + j0 + j > qpos))
                s = -INFINITY;
            sv[c] = s;
            tmax = fmaxf(tmax, s);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        const float alpha = pk_softmax_row_rescale(&row, tmax);
        float sum = 0.f;
#pragma unroll
        for (int c = 0; c < 32; c++) {
            sv[c] = pk_softmax_row_p(&row, sv[c]);
            sum += sv[c];
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        row.l += sum;
        __syncwarp(); // every lane has read its scores before P overwrites them
        __nv_bfloat16 *p = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
#pragma unroll
        for (int c = 0; c < 32; c++) {
            p[r * PK_ATTN_BN + half * 32 + c] = __float2bfloat16(sv[c]);
            sm.o[warp][r * PK_ATTN_D + half * 32 + c] *= alpha;
        }
        __syncwarp();
        // O += P V (16 x 64, fp32 accumulators through shared memory).
#pragma unroll
        for (int n = 0; n < PK_ATTN_D / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, sm.o[warp] + n * 16, PK_ATTN_D, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < PK_ATTN_BN / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> vf;
                wmma::load_matrix_sync(pf, p + kk * 16, PK_ATTN_BN);
                wmma::load_matrix_sync(vf, sm.v + kk * 16 * PK_ATTN_D + n * 16, PK_ATTN_D);
                wmma::mma_sync(of, pf, vf, of);
            }
            wmma::store_matrix_sync(sm.o[warp] + n * 16, of, PK_ATTN_D, wmma::mem_row_major);
        }
        __syncwarp();
    }
    // Epilogue: this block's normalised output and lse, merged into the running result. Both
    // lanes of a row read its running lse before lane 0 overwrites it (acc_out may be acc_in).
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
    const long long base = rid * PK_ATTN_D + half * 32;
    const float *o = sm.o[warp] + r * PK_ATTN_D + half * 32;
#pragma unroll 8
    for (int c = 0; c < 32; c++) {
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

#ifdef __CUDACC__
// One block: grid (ceil(Sq / 64), B * H), PK_ATTN_THREADS threads, pk_attn_fwd_smem_bytes() of
// dynamic shared memory (above the 48 KiB default: cudaFuncSetAttribute once per process).
static __global__ void __launch_bounds__(PK_ATTN_THREADS) pk_attn_fwd_kernel(PkAttnBlock a) {
    extern __shared__ __align__(128) unsigned char pk_attn_smem_raw[];
    PkAttnSmem &sm = *reinterpret_cast<PkAttnSmem *>(pk_attn_smem_raw);
    const int bh = blockIdx.y;
    pk_attn_fwd_tile(a, bh / a.H, bh % a.H, blockIdx.x, sm);
}

static inline cudaError_t pk_attn_fwd_launch(const PkAttnBlock &a, cudaStream_t stream) {
    static bool attr_set = false;
    if (!attr_set) {
        const cudaError_t e =
            cudaFuncSetAttribute(pk_attn_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)pk_attn_fwd_smem_bytes());
        if (e != cudaSuccess)
            return e;
        attr_set = true;
    }
    const dim3 grid((unsigned)((a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM), (unsigned)(a.B * a.H));
    pk_attn_fwd_kernel<<<grid, PK_ATTN_THREADS, pk_attn_fwd_smem_bytes(), stream>>>(a);
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

// Returns 0, 2000 + a CUDA error or 1000 + an NCCL result.
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
            const cudaError_t e = pk_attn_fwd_launch(a, stream);
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
#endif // __CUDACC__
#endif // __CUDACC__ || PK_ATTN_EMULATE

#endif
