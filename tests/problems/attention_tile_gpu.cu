// attention_tile_gpu: the forward tile of problems/include/pk_attention.cuh (pk_attn_fwd_launch<D>,
// D = 64 and 128) on the GPU against a plain fp32 reference kernel (one thread per (batch,
// query, head) row), then timed against the previous tile (WMMA with the scores and the output
// accumulator in shared memory, kept below as old_fwd_tile) at a large shape. Exit 77 without
// a GPU (ctest: skipped), 1 when a case is out of its bound.
//
// Cases: causal or not, Sq and Sk not multiples of 64 (200 x 333), query tiles that see no key
// at all (k_pos0 > q_pos0: n_tiles 0) and rows that see none inside a tile that has keys,
// grouped-query heads with PKB's packed key_value (hs_kv = 2 D, v = k + D), queries with
// ld_q > H D, two batches, and a two-block merge (the first block writes acc_out / lse_out, the
// second merges through acc_in / lse_in and writes bf16) against one block over all the keys.
// Every output row below Sq must be written and nothing beyond it (sentinels).
//
// The bound: P = exp(s - m) is rounded to bf16 (relative error <= 2^-8, bf16's unit roundoff: 8
// significant bits) before P V, while l sums the unrounded P (as the tile always did), so
// |O_got - O| <= 2^-8 sum_j p_j |v_jd| / l = 2^-8 mass_d per element, plus fp32 rounding of the
// sums (~1e-6 relative); the bf16 output adds 2^-8 |O|. Asserted: |got - want| <= 2^-7 mass_d +
// 2^-7 |want| (bf16 outputs) + 1e-5, twice the analytic bound; the lse within 1e-4 (1 + |lse|)
// (fp32 sums of exp, log); rows with no key: lse -inf and O 0 exactly, or the running result
// unchanged when merging. The old tile is held to the same bound (it has the same numerics). The
// split-P variant (PK_ATTN_P_SPLIT: P to ~16 bits) is held to 2^-11 mass_d (+ the bf16 output's
// share), 16x tighter; its TFLOP/s (flops counted as the plain tile's, 4 Sq Sk D H) are printed
// too. The timing runs even after a failed case (the exit status still says it failed).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "pk_attention.cuh"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// ---- The previous forward tile (before FlashAttention-2 registers), for the timing ----
// Shared memory of one forward CTA for head dim D (64 or 128): 48 KiB at D = 64, 80 KiB at
// D = 128, given as dynamic shared memory (pk_attn_fwd_smem_bytes<D>()). The Q stage (16 x D
// bf16) aliases a warp's score buffer (16 x 64 fp32), so D is at most 128.
template <int D> struct OldSmem {
    static_assert(D % 16 == 0 && D >= 32 && D <= 128, "head dim: a multiple of 16, 32..128");
    __nv_bfloat16 k[PK_ATTN_BN * D];
    __nv_bfloat16 v[PK_ATTN_BN * D];
    float s[PK_ATTN_WARPS][16 * PK_ATTN_BN]; // a warp's scores; its P (bf16) and Q stage alias it
    float o[PK_ATTN_WARPS][16 * D];          // a warp's output accumulator
};

// The whole CTA (PK_ATTN_THREADS threads) attends query tile `qt` (rows [64 qt, 64 qt + 64) of
// the shard) of head h of batch b to every key of the block (of head h / (H / Hkv)), and runs
// the epilogue. D (the head dim) is deduced from the shared memory's type.
template <int D>
static __device__ void old_fwd_tile(const PkAttnBlock &a, int b, int h, int qt, OldSmem<D> &sm) {
    namespace wmma = nvcuda::wmma;
    constexpr int DH = D / 2; // output columns per lane (two lanes per row)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hkv_n = a.Hkv ? a.Hkv : a.H, hkv = h / (a.H / hkv_n);
    const long long ld = (long long)a.H * D; // the output's position stride
    const long long ldq = a.ld_q ? a.ld_q : ld, ldkv = a.ld_kv ? a.ld_kv : (long long)hkv_n * D;
    const long long hs = a.hs_kv ? a.hs_kv : D;
    const int i0 = qt * PK_ATTN_BM + warp * 16; // this warp's first query row
    const int n_q = min(16, max(0, a.Sq - i0)); // its valid rows
    // Queries: staged through the warp's score buffer, kept as 4 A fragments (16 x 64).
    __nv_bfloat16 *stage = reinterpret_cast<__nv_bfloat16 *>(sm.s[warp]);
    pk_attn_load_rows<D>(stage, a.q + ((long long)b * a.Sq + i0) * ldq + (long long)h * D, ldq, 16,
                         n_q, lane, 32);
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> qf[D / 16];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        wmma::load_matrix_sync(qf[kk], stage + kk * 16, D);
    for (int i = lane; i < 16 * D; i += 32)
        sm.o[warp][i] = 0.f;
    __syncwarp();

    // Lanes 2r and 2r + 1 own row r of the warp's 16: score columns [32 half, 32 half + 32),
    // output columns [DH half, DH half + DH).
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
        const long long off = ((long long)b * a.Sk + j0) * ldkv + (long long)hkv * hs;
        pk_attn_load_rows<D>(sm.k, a.k + off, ldkv, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        pk_attn_load_rows<D>(sm.v, a.v + off, ldkv, PK_ATTN_BN, n_k, threadIdx.x, PK_ATTN_THREADS);
        __syncthreads();
        // S = Q K^T (16 x 64, fp32), into the warp's score buffer.
#pragma unroll
        for (int n = 0; n < PK_ATTN_BN / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.f);
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, sm.k + n * 16 * D + kk * 16, D);
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
        for (int c = 0; c < 32; c++)
            p[r * PK_ATTN_BN + half * 32 + c] = __float2bfloat16(sv[c]);
#pragma unroll
        for (int c = 0; c < DH; c++)
            sm.o[warp][r * D + half * DH + c] *= alpha;
        __syncwarp();
        // O += P V (16 x 64, fp32 accumulators through shared memory).
#pragma unroll
        for (int n = 0; n < D / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, sm.o[warp] + n * 16, D, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < PK_ATTN_BN / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> vf;
                wmma::load_matrix_sync(pf, p + kk * 16, PK_ATTN_BN);
                wmma::load_matrix_sync(vf, sm.v + kk * 16 * D + n * 16, D);
                wmma::mma_sync(of, pf, vf, of);
            }
            wmma::store_matrix_sync(sm.o[warp] + n * 16, of, D, wmma::mem_row_major);
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

template <int D>
static __global__ void __launch_bounds__(PK_ATTN_THREADS) old_fwd_kernel(PkAttnBlock a) {
    extern __shared__ __align__(128) unsigned char old_smem_raw[];
    OldSmem<D> &sm = *reinterpret_cast<OldSmem<D> *>(old_smem_raw);
    const int bh = blockIdx.y;
    old_fwd_tile<D>(a, bh / a.H, bh % a.H, blockIdx.x, sm);
}

template <int D> static cudaError_t old_fwd_launch(const PkAttnBlock &a, cudaStream_t stream) {
    typedef OldSmem<D> Smem;
    const int smem = (int)sizeof(Smem);
    const cudaError_t e =
        cudaFuncSetAttribute(old_fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess)
        return e;
    const dim3 grid((unsigned)((a.Sq + PK_ATTN_BM - 1) / PK_ATTN_BM), (unsigned)(a.B * a.H));
    old_fwd_kernel<D><<<grid, PK_ATTN_THREADS, smem, stream>>>(a);
    return cudaGetLastError();
}

// The tiles under test: the new one (bf16 P), its split-P variant (PK_ATTN_P_SPLIT), the old one.
enum { NEW = 0, SPLIT = 1, OLD = 2 };
static const char *const kVariant[3] = {"new", "split", "old"};

template <int D> static cudaError_t launch_variant(int which, const PkAttnBlock &a) {
    if (which == SPLIT)
        return pk_attn_fwd_launch<D, PK_ATTN_P_SPLIT>(a, 0);
    return which == OLD ? old_fwd_launch<D>(a, 0) : pk_attn_fwd_launch<D>(a, 0);
}

// ---- Inputs and the reference ----

static __device__ uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// n bf16 of mean 0 and standard deviation sd (uniform), from (seed, index).
static __global__ void fill_kernel(__nv_bfloat16 *p, size_t n, uint64_t seed, float sd) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const double u = (double)(mix64(seed * 0x100000001b3ULL + i) >> 11) * 0x1p-53;
        p[i] = __float2bfloat16((float)((2 * u - 1) * 1.7320508075688772 * sd));
    }
}

// One thread per (b, i, h): softmax attention in fp32 over the keys the row sees, out (B, Sq,
// H, D) normalised (0 for a row with no key), lse (-inf then), mass = sum_j p_j |v_jd| / l.
template <int D>
static __global__ void ref_kernel(PkAttnBlock a, float *out, float *lse, float *mass) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= (long long)a.B * a.Sq * a.H)
        return;
    const int h = (int)(row % a.H), i = (int)(row / a.H % a.Sq), b = (int)(row / a.H / a.Sq);
    const int hkv_n = a.Hkv ? a.Hkv : a.H, hkv = h / (a.H / hkv_n);
    const long long ldq = a.ld_q ? a.ld_q : (long long)a.H * D;
    const long long ldkv = a.ld_kv ? a.ld_kv : (long long)hkv_n * D, hs = a.hs_kv ? a.hs_kv : D;
    float q[D];
    for (int d = 0; d < D; d++)
        q[d] = __bfloat162float(a.q[((long long)b * a.Sq + i) * ldq + (long long)h * D + d]);
    const long long qpos = a.q_pos0 + i;
    float m = -INFINITY;
    for (int j = 0; j < a.Sk; j++) {
        if (a.causal && a.k_pos0 + j > qpos)
            break;
        const __nv_bfloat16 *k = a.k + ((long long)b * a.Sk + j) * ldkv + hkv * hs;
        float s = 0.f;
        for (int d = 0; d < D; d++)
            s += q[d] * __bfloat162float(k[d]);
        m = fmaxf(m, s * a.scale);
    }
    float l = 0.f, o[D], am[D];
    for (int d = 0; d < D; d++)
        o[d] = am[d] = 0.f;
    for (int j = 0; j < a.Sk && m != -INFINITY; j++) {
        if (a.causal && a.k_pos0 + j > qpos)
            break;
        const __nv_bfloat16 *k = a.k + ((long long)b * a.Sk + j) * ldkv + hkv * hs;
        const __nv_bfloat16 *v = a.v + ((long long)b * a.Sk + j) * ldkv + hkv * hs;
        float s = 0.f;
        for (int d = 0; d < D; d++)
            s += q[d] * __bfloat162float(k[d]);
        const float p = expf(s * a.scale - m);
        l += p;
        for (int d = 0; d < D; d++) {
            const float x = __bfloat162float(v[d]);
            o[d] += p * x;
            am[d] += p * fabsf(x);
        }
    }
    for (int d = 0; d < D; d++) {
        out[row * D + d] = l > 0.f ? o[d] / l : 0.f;
        mass[row * D + d] = l > 0.f ? am[d] / l : 0.f;
    }
    lse[row] = l > 0.f ? m + logf(l) : -INFINITY;
}

static float bf2f(__nv_bfloat16 x) {
    uint16_t u;
    memcpy(&u, &x, 2);
    const uint32_t w = (uint32_t)u << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

// ---- The cases ----

struct Case {
    const char *name;
    int B, Sq, Sk, H, Hkv, causal;
    long long q_pos0, k_pos0;
    int packed;   // k, v as PKB's key_value: hs_kv = 2 D, ld_kv = 2 Hkv D, v = k + D
    int q_pad;    // ld_q = H D + q_pad (0: contiguous)
    float spread; // standard deviation of the scores
    int split;    // > 0: two blocks, keys [0, split) then [split, Sk), merged
};

static int g_fail = 0;
static const int PAD = 4096; // sentinel elements beyond the outputs

struct Bufs {
    __nv_bfloat16 *q, *kv, *v; // v: separate values (NULL when packed)
    float *ref, *lse, *mass;
    float *acc, *acc_lse;
    __nv_bfloat16 *out;
};

// Checks fp32 (acc, lse: when lse_got) or bf16 (out) results of tile `which` against the
// reference.
static void check(int which, const Case &c, int D, const std::vector<float> &ref,
                  const std::vector<float> &lse, const std::vector<float> &mass,
                  const std::vector<float> &got, const std::vector<float> *lse_got, bool bf16,
                  const std::vector<float> &tail) {
    const size_t n = ref.size();
    double max_abs = 0, max_rel = 0, worst = 0, max_lse = 0;
    bool bad = false;
    for (size_t x = 0; x < n; x++) {
        const double g = got[x], w = ref[x];
        if (isnan(g)) {
            bad = true;
            worst = INFINITY;
            continue;
        }
        const double err = fabs(g - w);
        // P to ~16 bits (the fp32 scores' own rounding then dominates: at spread 30 a score
        // of ~100 is ~1e-5 off), or bf16
        const double p_err = which == SPLIT ? 0x1p-11 : 0x1p-7;
        const double bound = p_err * mass[x] + (bf16 ? 0x1p-7 * fabs(w) : 0.0) + 1e-5;
        max_abs = fmax(max_abs, err);
        max_rel = fmax(max_rel, err / fmax(fabs(w), 1e-3));
        worst = fmax(worst, err / bound);
        if (mass[x] == 0.f && g != 0.0) // a row with no key: exactly 0
            bad = true;
    }
    if (lse_got)
        for (size_t r = 0; r < lse.size(); r++) {
            const double g = (*lse_got)[r], w = lse[r];
            if (isinf(w) || isinf(g)) {
                if (g != w)
                    bad = true;
                continue;
            }
            if (isnan(g) || fabs(g - w) > 1e-4 * (1 + fabs(w)))
                bad = true;
            max_lse = fmax(max_lse, isnan(g) ? INFINITY : fabs(g - w));
        }
    for (float s : tail)
        if (!isnan(s)) // beyond the last row: must stay the NaN sentinel
            bad = true;
    if (worst > 1.0)
        bad = true;
    printf("%-5s D=%-3d %-16s %-5s max_abs %.3e max_rel %.3e err/bound %.3f lse_abs %.2e %s\n",
           kVariant[which], D, c.name, bf16 ? "bf16" : "fp32", max_abs, max_rel, worst, max_lse,
           bad ? "FAIL" : "ok");
    if (bad)
        g_fail = 1;
}

template <int D> static void run_case(const Case &c) {
    const long long ldq = (long long)c.H * D + c.q_pad;
    const long long ldkv = (long long)(c.packed ? 2 : 1) * c.Hkv * D;
    const size_t nq = (size_t)c.B * c.Sq * ldq, nkv = (size_t)c.B * c.Sk * ldkv;
    const size_t no = (size_t)c.B * c.Sq * c.H * D, nr = (size_t)c.B * c.Sq * c.H;
    Bufs g = {};
    CK(cudaMalloc(&g.q, nq * 2));
    CK(cudaMalloc(&g.kv, nkv * 2));
    if (!c.packed)
        CK(cudaMalloc(&g.v, nkv * 2));
    CK(cudaMalloc(&g.ref, no * 4));
    CK(cudaMalloc(&g.mass, no * 4));
    CK(cudaMalloc(&g.lse, nr * 4));
    CK(cudaMalloc(&g.acc, (no + PAD) * 4));
    CK(cudaMalloc(&g.acc_lse, (nr + PAD) * 4));
    CK(cudaMalloc(&g.out, (no + PAD) * 2));
    const float scale = 1.f / sqrtf((float)D);
    // q.k scale ~ spread: sd_q sd_k sqrt(D) scale = spread.
    const float sd = sqrtf(c.spread);
    fill_kernel<<<256, 256>>>(g.q, nq, 1 + D, sd);
    if (c.packed) { // per head D k columns (sd) then D v columns (1): two fills, k part wins
        fill_kernel<<<256, 256>>>(g.kv, nkv, 2 + D, 1.f);
        std::vector<__nv_bfloat16> kv(nkv);
        std::vector<__nv_bfloat16> ks(nkv);
        CK(cudaMemcpy(kv.data(), g.kv, nkv * 2, cudaMemcpyDeviceToHost));
        fill_kernel<<<256, 256>>>(g.kv, nkv, 3 + D, sd);
        CK(cudaMemcpy(ks.data(), g.kv, nkv * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < nkv; i++)
            if ((i / D) % 2 == 0)
                kv[i] = ks[i];
        CK(cudaMemcpy(g.kv, kv.data(), nkv * 2, cudaMemcpyHostToDevice));
    } else {
        fill_kernel<<<256, 256>>>(g.kv, nkv, 2 + D, sd);
        fill_kernel<<<256, 256>>>(g.v, nkv, 3 + D, 1.f);
    }
    CK(cudaGetLastError());
    PkAttnBlock a = {};
    a.q = g.q;
    a.k = g.kv;
    a.v = c.packed ? g.kv + D : g.v;
    a.B = c.B;
    a.Sq = c.Sq;
    a.Sk = c.Sk;
    a.H = c.H;
    a.Hkv = c.Hkv == c.H ? 0 : c.Hkv;
    a.ld_q = c.q_pad ? ldq : 0;
    a.ld_kv = c.packed ? ldkv : 0;
    a.hs_kv = c.packed ? 2 * D : 0;
    a.q_pos0 = c.q_pos0;
    a.k_pos0 = c.k_pos0;
    a.causal = c.causal;
    a.scale = scale;
    ref_kernel<D><<<(unsigned)((nr + 127) / 128), 128>>>(a, g.ref, g.lse, g.mass);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> ref(no), lse(nr), mass(no);
    CK(cudaMemcpy(ref.data(), g.ref, no * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse.data(), g.lse, nr * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(mass.data(), g.mass, no * 4, cudaMemcpyDeviceToHost));
    for (int which = 0; which < 3; which++) {
        auto launch = [&](const PkAttnBlock &x) { CK(launch_variant<D>(which, x)); };
        for (int bf16 = 0; bf16 < 2; bf16++) {
            CK(cudaMemset(g.acc, 0xff, (no + PAD) * 4)); // NaN sentinels
            CK(cudaMemset(g.acc_lse, 0xff, (nr + PAD) * 4));
            CK(cudaMemset(g.out, 0xff, (no + PAD) * 2));
            PkAttnBlock x = a;
            if (c.split > 0) { // keys [0, split), then [split, Sk) merged into them
                x.Sk = c.split;
                x.acc_out = g.acc;
                x.lse_out = g.acc_lse;
                launch(x);
                PkAttnBlock y = a;
                y.Sk = c.Sk - c.split;
                y.k = a.k + (long long)c.split * (c.packed ? ldkv : c.Hkv * D);
                y.v = a.v + (long long)c.split * (c.packed ? ldkv : c.Hkv * D);
                y.k_pos0 = a.k_pos0 + c.split;
                y.acc_in = g.acc;
                y.lse_in = g.acc_lse;
                if (bf16)
                    y.out_bf16 = g.out;
                else
                    y.acc_out = g.acc, y.lse_out = g.acc_lse; // in place
                launch(y);
            } else if (bf16) {
                x.out_bf16 = g.out;
                launch(x);
            } else {
                x.acc_out = g.acc;
                x.lse_out = g.acc_lse;
                launch(x);
            }
            CK(cudaDeviceSynchronize());
            std::vector<float> got(no), lse_got(nr), tail(PAD);
            if (bf16) {
                std::vector<__nv_bfloat16> ob(no + PAD);
                CK(cudaMemcpy(ob.data(), g.out, (no + PAD) * 2, cudaMemcpyDeviceToHost));
                for (size_t i = 0; i < no; i++)
                    got[i] = bf2f(ob[i]);
                for (int i = 0; i < PAD; i++)
                    tail[i] = bf2f(ob[no + i]);
            } else {
                std::vector<float> of(no + PAD), lf(nr + PAD);
                CK(cudaMemcpy(of.data(), g.acc, (no + PAD) * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(lf.data(), g.acc_lse, (nr + PAD) * 4, cudaMemcpyDeviceToHost));
                memcpy(got.data(), of.data(), no * 4);
                memcpy(lse_got.data(), lf.data(), nr * 4);
                for (int i = 0; i < PAD; i++)
                    tail[i] = of[no + i];
                for (size_t i = nr; i < nr + PAD; i++)
                    if (!isnan(lf[i]))
                        tail[0] = 0.f; // an lse written beyond the last row
            }
            check(which, c, D, ref, lse, mass, got, bf16 ? NULL : &lse_got, bf16 != 0, tail);
        }
    }
    cudaFree(g.q);
    cudaFree(g.kv);
    cudaFree(g.v);
    cudaFree(g.ref);
    cudaFree(g.mass);
    cudaFree(g.lse);
    cudaFree(g.acc);
    cudaFree(g.acc_lse);
    cudaFree(g.out);
}

// ---- Timing ----

template <int D> static void time_shape(int Sq, int Sk, int H, int causal, double *tflops) {
    const size_t n = (size_t)Sq * H * D, nk = (size_t)Sk * H * D;
    __nv_bfloat16 *q, *k, *v, *out;
    CK(cudaMalloc(&q, n * 2));
    CK(cudaMalloc(&k, nk * 2));
    CK(cudaMalloc(&v, nk * 2));
    CK(cudaMalloc(&out, n * 2));
    fill_kernel<<<512, 256>>>(q, n, 11, 1.f);
    fill_kernel<<<512, 256>>>(k, nk, 12, 1.f);
    fill_kernel<<<512, 256>>>(v, nk, 13, 1.f);
    PkAttnBlock a = {};
    a.q = q;
    a.k = k;
    a.v = v;
    a.B = 1;
    a.Sq = Sq;
    a.Sk = Sk;
    a.H = H;
    a.causal = causal;
    a.q_pos0 = Sk - Sq; // causal: the queries are the last positions
    a.scale = 1.f / sqrtf((float)D);
    a.out_bf16 = out;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const double flops = 4.0 * Sq * Sk * D * H * (causal ? 0.5 : 1.0);
    for (int which = 0; which < 3; which++) {
        auto launch = [&] { CK(launch_variant<D>(which, a)); };
        launch();
        launch();
        CK(cudaDeviceSynchronize());
        const int iters = which == OLD ? 3 : 10;
        CK(cudaEventRecord(e0));
        for (int i = 0; i < iters; i++)
            launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        tflops[which] = flops / (ms / iters * 1e-3) / 1e12;
    }
    printf("time  D=%-3d Sq=Sk=%d H=%d %-10s new %6.1f TFLOP/s  split-P %6.1f  old %6.1f  "
           "new/old %.1fx\n",
           D, Sq, H, causal ? "causal" : "non-causal", tflops[NEW], tflops[SPLIT], tflops[OLD],
           tflops[NEW] / tflops[OLD]);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(out);
}

template <int D> static void all_cases(void) {
    const Case cases[] = {
        // name, B, Sq, Sk, H, Hkv, causal, q_pos0, k_pos0, packed, q_pad, spread, split
        {"plain", 2, 200, 333, 4, 4, 0, 0, 0, 0, 0, 1.f, 0},
        {"causal_end", 1, 200, 333, 4, 4, 1, 133, 0, 0, 0, 1.f, 0},
        {"causal_empty", 2, 200, 333, 3, 3, 1, 0, 100, 0, 0, 1.f, 0},
        {"gqa_packed_ldq", 1, 200, 333, 8, 2, 0, 0, 0, 1, 64, 30.f, 0},
        {"gqa_causal", 1, 333, 333, 8, 2, 1, 0, 0, 1, 64, 4.f, 0},
        {"merge", 1, 200, 333, 4, 4, 0, 0, 0, 0, 0, 4.f, 150},
        {"merge_causal", 1, 200, 333, 4, 2, 1, 0, 0, 1, 0, 1.f, 150},
    };
    for (const Case &c : cases)
        run_case<D>(c);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIPPED: no GPU\n");
        return 77;
    }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, smem per block optin %zu, per SM %zu; new tile smem D=64 %zu, D=128 %zu\n",
           p.name, p.sharedMemPerBlockOptin, p.sharedMemPerMultiprocessor,
           pk_attn_fwd_smem_bytes<64>(), pk_attn_fwd_smem_bytes<128>());
    all_cases<64>();
    all_cases<128>();
    double t[3];
    for (int causal = 0; causal < 2; causal++) {
        time_shape<64>(8192, 8192, 16, causal, t);
        time_shape<128>(8192, 8192, 16, causal, t);
    }
    if (g_fail) {
        printf("FAILED: a case is out of its bound (lines marked FAIL above)\n");
        return 1;
    }
    printf("PASSED\n");
    return 0;
}
