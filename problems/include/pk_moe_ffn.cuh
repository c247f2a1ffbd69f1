// pk_moe_ffn.cuh: the fused expert-parallel MoE forward of pkb/31 and 32 (issue #29): router
// (bf16 linear, softmax, top-k), expert-major permutation, variable-size all-to-all dispatch,
// the rank's expert MLP (SwiGLU, optional LoRA), all-to-all back and the weighted combine.
//
// Prompt: the fused MoE forward as PyTorch runs it: router linear, softmax, top-k, expert-major
// permutation, variable-size all-to-all dispatch, SwiGLU expert MLP with cuBLAS (optional LoRA),
// all-to-all back, weighted combine.
//
// PKB's experts: every rank holds ONE MLP (gate_proj, up_proj, down_proj: nn.Linear with bias,
// drawn per rank), applied to every row the rank receives, whatever its local expert. So expert
// e's weights are those of rank e / El (El = E / W), and the grouped GEMM over the local experts
// is one GEMM over the received rows. PKB's two chunk sorts (source-major to expert-major before
// the MLP and back after it) permute rows through a row-wise function and undo it: the
// reference leaves them out (the result is the same row for row).
//
// The routing is designed, not left to chance (generate()): PKB's N(0, 1) router makes every
// token's top-1 weight ~1 and its ties and near-ties (bf16 logits) a coin flip between experts
// of different ranks, whose MLPs differ. pk_moe_design writes the router's gate_weight (a dense
// N(0, 1/N) part, PKB's direction at nn.Linear's scale) and, per token, two hidden columns per
// expert (2e: hi, 2e + 1: lo, gate_weight[e] has 1 and 2^-8 there and 0 in the other experts'
// columns) so that token m's exact logits are target values with the experts of
// pk_moe_route() (the routing modes of pk_moe_routing.cuh: balanced, skewed, hot + empty
// expert, a rank group left empty) in slot order, and a margin of at least 0.5 between the K-th
// and the (K+1)-th logit (6 in the balanced mode): far above a bf16 logit's rounding (<= 2^-5
// at |logit| <= 16 ... 0.125 at 40) and any fp32 accumulation order, so the routing, and the
// output, is unique at every precision. Mode 0 (balanced) keeps PKB's sharp softmax (gaps 6-12:
// the top-1 weight ~1, the others < e^-6); modes 1-3 give gaps of 0.5-2, so the K-th weight and
// the unselected experts' mass matter.
#pragma once

#include "pk_moe_routing.cuh"

#include <math.h>
#include <string.h>

#define PK_MOE_DESIGN_LO (1.0f / 256.0f) // gate_weight[e][2e + 1]: the lo column's factor

// bf16 round-to-nearest-even of a float, on the host and the device (finite inputs).
static inline PK_HD float pk_bf16r(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    float y;
    memcpy(&y, &u, 4);
    return y;
}

// A normal draw (Box-Muller) for counter k.
static inline PK_HD double pk_moe_normal(uint64_t k) {
    const double u1 = pk_splitmix_unit(k), u2 = pk_splitmix_unit(k ^ 0x5bd1e995ULL);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// The key of rank `rank`'s router draws (gate_weight's dense part) for a call's routing.
static inline PK_HD uint64_t pk_moe_design_key(const PkMoeRouting &r, int rank) {
    return pk_splitmix64(r.stream ^ (0x676174650000ULL + (uint64_t)rank));
}

// gate_weight[e][j] of rank `rank` (before its bf16 rounding, exact in bf16 for j < 2E).
static inline PK_HD float pk_moe_gate_weight(const PkMoeRouting &r, int rank, int e, size_t j,
                                             size_t N) {
    if (j < 2 * (size_t)r.E)
        return j == 2 * (size_t)e ? 1.f : j == 2 * (size_t)e + 1 ? PK_MOE_DESIGN_LO : 0.f;
    const uint64_t k = pk_moe_design_key(r, rank) + ((uint64_t)e << 40) + (uint64_t)j;
    return (float)(pk_moe_normal(k) / sqrt((double)N));
}

// Token `token`'s target logits t[0..E) and experts ex[0..K) (pk_moe_route's, in slot order):
// t[ex[0]] = 0 > t[ex[1]] > ... > t[ex[K-1]], gaps in [lo, lo + span); every other expert at
// most t[ex[K-1]] - lo. lo = 6, span = 6 in mode 0 (PKB's sharp softmax); 0.5 and 1.5 else.
static inline PK_HD void pk_moe_targets(const PkMoeRouting &r, int rank, uint64_t token, float *t,
                                        int *ex) {
    pk_moe_route(r, rank, token, ex);
    const bool sharp = r.mode == PK_MOE_BALANCED;
    const float lo = sharp ? 6.f : 0.5f, span = sharp ? 6.f : 1.5f;
    const uint64_t k0 = pk_splitmix64(r.stream ^ 0x7461726700000000ULL) + ((uint64_t)rank << 48) +
                        token * (uint64_t)(PK_MOE_MAX_E + 8);
    uint64_t used = 0;
    float v = 0.f;
    for (int k = 0; k < r.K; k++) {
        t[ex[k]] = v;
        used |= 1ULL << ex[k];
        v -= lo + span * (float)pk_splitmix_unit(k0 + (uint64_t)k);
    }
    for (int e = 0; e < r.E; e++)
        if (!((used >> e) & 1))
            t[e] = v - 2.f * span * (float)pk_splitmix_unit(k0 + 8 + (uint64_t)e);
}

// generate()'s hidden columns of one token: d[e] = its logit without them (the dense columns'
// dot product and gate_bias, in fp64); hi[e], lo[e] (bf16 values) for columns 2e and 2e + 1 so
// that d[e] + hi[e] + lo[e] / 256 = t[e] within ~2^-17 |t[e] - d[e]|.
static inline PK_HD void pk_moe_design_cols(const PkMoeRouting &r, int rank, uint64_t token,
                                            const double *d, float *hi, float *lo) {
    float t[PK_MOE_MAX_E];
    int ex[8];
    pk_moe_targets(r, rank, token, t, ex);
    for (int e = 0; e < r.E; e++) {
        const double c = (double)t[e] - d[e];
        hi[e] = pk_bf16r((float)c);
        lo[e] = pk_bf16r((float)((c - (double)hi[e]) / PK_MOE_DESIGN_LO));
    }
}

// PyTorch's router on one token's bf16 logits: p = bf16(softmax(l)) (fp32 inside),
// torch.topk(p, K): the K largest in descending order (ties: the lower index first).
static inline PK_HD void pk_moe_router_token(const float *l, int E, int K, float *w, int *sel) {
    float mx = l[0];
    for (int e = 1; e < E; e++)
        mx = l[e] > mx ? l[e] : mx;
    float s = 0.f, p[PK_MOE_MAX_E];
    for (int e = 0; e < E; e++)
        s += expf(l[e] - mx);
    for (int e = 0; e < E; e++)
        p[e] = pk_bf16r(expf(l[e] - mx) / s);
    uint64_t used = 0;
    for (int k = 0; k < K; k++) {
        int b = -1;
        for (int e = 0; e < E; e++)
            if (!((used >> e) & 1) && (b < 0 || p[e] > p[b]))
                b = e;
        used |= 1ULL << b;
        sel[k] = b;
        w[k] = p[b];
    }
}

#if defined(__CUDACC__)
#include <cublasLt.h>
#include <cuda_bf16.h>

// ---- generate(): gate_weight, then the designed hidden columns ----

__global__ void pk_moe_design_gate(__nv_bfloat16 *gw, size_t N, int rank, PkMoeRouting r) {
    const size_t n = (size_t)r.E * N;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        gw[i] = __float2bfloat16_rn(pk_moe_gate_weight(r, rank, (int)(i / N), i % N, N));
}

// One block per token: d_e = sum over the dense columns of x gw (fp64) + b_e, then the hi and
// lo columns (pk_moe_design_cols).
__global__ void __launch_bounds__(256)
    pk_moe_design_hidden(__nv_bfloat16 *x, const __nv_bfloat16 *gw, const __nv_bfloat16 *gb,
                         size_t M, size_t N, int rank, PkMoeRouting r) {
    __shared__ double part[PK_MOE_MAX_E];
    const int E = r.E, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (size_t m = blockIdx.x; m < M; m += gridDim.x) {
        __nv_bfloat16 *row = x + m * N;
        for (int e = warp; e < E; e += 8) {
            double d = 0.0;
            for (size_t j = 2 * (size_t)E + lane; j < N; j += 32)
                d += (double)__bfloat162float(row[j]) * (double)__bfloat162float(gw[e * N + j]);
            for (int o = 16; o > 0; o /= 2)
                d += __shfl_xor_sync(0xffffffffu, d, o);
            if (lane == 0)
                part[e] = d;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            double d[PK_MOE_MAX_E];
            float hi[PK_MOE_MAX_E], lo[PK_MOE_MAX_E];
            for (int e = 0; e < E; e++)
                d[e] = part[e] + (double)__bfloat162float(gb[e]);
            pk_moe_design_cols(r, rank, m, d, hi, lo);
            for (int e = 0; e < E; e++) {
                row[2 * e] = __float2bfloat16_rn(hi[e]);
                row[2 * e + 1] = __float2bfloat16_rn(lo[e]);
            }
        }
        __syncthreads();
    }
}

// The routing of rank `rank` for (seed, key), written into its hidden_states (after the
// regimes), gate_weight and (read only) gate_bias. Needs N >= 2E.
static inline int pk_moe_design(cudaStream_t s, uint64_t seed, int key, int rank, int world, int E,
                                int K, __nv_bfloat16 *x, __nv_bfloat16 *gw, const __nv_bfloat16 *gb,
                                size_t M, size_t N) {
    static PkMoeRouting r; // 2 KB: off the stack
    pk_moe_routing_make(seed, key, world, E, K, &r);
    pk_moe_design_gate<<<264, 256, 0, s>>>(gw, N, rank, r);
    pk_moe_design_hidden<<<1056, 256, 0, s>>>(x, gw, gb, M, N, rank, r);
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

// ---- The reference's kernels ----

// Router on bf16 logits (M x E): sel (M x K, int) and w (M x K, bf16 probabilities).
__global__ void pk_moe_router(const __nv_bfloat16 *logits, int *sel, __nv_bfloat16 *w, size_t M,
                              int E, int K) {
    for (size_t m = (size_t)blockIdx.x * blockDim.x + threadIdx.x; m < M;
         m += (size_t)gridDim.x * blockDim.x) {
        float l[PK_MOE_MAX_E], p[8];
        int s[8];
        for (int e = 0; e < E; e++)
            l[e] = __bfloat162float(logits[m * E + e]);
        pk_moe_router_token(l, E, K, p, s);
        for (int k = 0; k < K; k++) {
            sel[m * K + k] = s[k];
            w[m * K + k] = __float2bfloat16_rn(p[k]);
        }
    }
}

// Expert-major positions (PKB's _permute: for e = 0..E-1 the tokens routed to e, ascending):
// mapping[pos] = token, pw[pos] = its weight for e (_generate_weights_idx + masked_select),
// cnt[e] (written by the block of expert e). One 1024-thread block per expert, in order, with
// the earlier experts' counts from a first pass (pk_moe_count).
__global__ void pk_moe_count(const int *sel, int *cnt, size_t M, int K) {
    __shared__ int c[PK_MOE_MAX_E];
    const int e = blockIdx.x;
    if (threadIdx.x == 0)
        c[0] = 0;
    __syncthreads();
    int n = 0;
    for (size_t m = threadIdx.x; m < M; m += blockDim.x)
        for (int k = 0; k < K; k++)
            n += sel[m * K + k] == e;
    atomicAdd(&c[0], n);
    __syncthreads();
    if (threadIdx.x == 0)
        cnt[e] = c[0];
}

__global__ void __launch_bounds__(1024)
    pk_moe_positions(const int *sel, const __nv_bfloat16 *w, const int *cnt, int *mapping,
                     __nv_bfloat16 *pw, size_t M, int K) {
    __shared__ int warp_base[32];
    __shared__ long long base;
    const int e = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (threadIdx.x == 0) {
        long long a = 0;
        for (int j = 0; j < e; j++)
            a += cnt[j];
        base = a;
    }
    __syncthreads();
    for (size_t m0 = 0; m0 < M; m0 += 1024) {
        const size_t m = m0 + threadIdx.x;
        int slot = -1;
        if (m < M)
            for (int k = 0; k < K; k++)
                slot = sel[m * K + k] == e ? k : slot;
        const unsigned ballot = __ballot_sync(0xffffffffu, slot >= 0);
        if (lane == 0)
            warp_base[warp] = __popc(ballot);
        __syncthreads();
        if (threadIdx.x == 0) {
            int acc = 0;
            for (int i = 0; i < 32; i++) {
                const int c = warp_base[i];
                warp_base[i] = acc;
                acc += c;
            }
        }
        __syncthreads();
        if (slot >= 0) {
            const long long p = base + warp_base[warp] + __popc(ballot & ((1u << lane) - 1u));
            mapping[p] = (int)m;
            pw[p] = w[m * K + slot];
        }
        __syncthreads();
        if (threadIdx.x == 1023)
            base += warp_base[31] + __popc(ballot);
        __syncthreads();
    }
}

// out[p] = x[mapping[p]] (index_select), rows of vpr 16-byte vectors.
__global__ void __launch_bounds__(256)
    pk_moe_gather(const uint4 *x, const int *mapping, uint4 *out, size_t T, size_t vpr) {
    for (size_t p = blockIdx.x; p < T; p += gridDim.x) {
        const uint4 *s = x + (size_t)mapping[p] * vpr;
        for (size_t v = threadIdx.x; v < vpr; v += 256)
            out[p * vpr + v] = s[v];
    }
}

// h = bf16(bf16(silu(g)) * u) (PyTorch: F.silu on bf16, then the bf16 product).
__global__ void pk_moe_swiglu(const __nv_bfloat16 *g, const __nv_bfloat16 *u, __nv_bfloat16 *h,
                              size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float a = __bfloat162float(g[i]);
        const float sa = __bfloat162float(__float2bfloat16_rn(a / (1.f + expf(-a))));
        h[i] = __float2bfloat16_rn(sa * __bfloat162float(u[i]));
    }
}

// y = bf16(a + b) (a bf16 tensor sum, PyTorch's add).
__global__ void pk_moe_add(__nv_bfloat16 *y, const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                           size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

// out[mapping[p]] += bf16(pw[p] * ret[p]) with bf16 atomics (PyTorch's mul + scatter_add_).
__global__ void __launch_bounds__(256)
    pk_moe_scatter_add(const __nv_bfloat162 *ret, const __nv_bfloat16 *pw, const int *mapping,
                       __nv_bfloat162 *out, size_t T, size_t half_row) {
    for (size_t p = blockIdx.x; p < T; p += gridDim.x) {
        const __nv_bfloat162 wp = __bfloat162bfloat162(pw[p]);
        __nv_bfloat162 *o = out + (size_t)mapping[p] * half_row;
        for (size_t c = threadIdx.x; c < half_row; c += 256)
            atomicAdd(o + c, __hmul2(ret[p * half_row + c], wp));
    }
}

// ---- cuBLASLt linear: y (rows x out_f) = bf16(x W^T [+ b]), x (rows x in_f), W (out_f x in_f)
// row-major, fp32 accumulation and one rounding: F.linear on 2-D bf16 (addmm with the BIAS
// epilogue, or mm). The heuristic runs on every call, as PyTorch's gemm_and_bias does. ----

struct PkMoeLt {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
};

static inline int pk_moe_lt_init(PkMoeLt *h) {
    h->ws_bytes = 32u << 20;
    if (cublasLtCreate(&h->lt) != CUBLAS_STATUS_SUCCESS)
        return 1;
    return cudaMalloc(&h->ws, h->ws_bytes) == cudaSuccess ? 0 : 2;
}

static inline void pk_moe_lt_fini(PkMoeLt *h) {
    cudaFree(h->ws);
    cublasLtDestroy(h->lt);
    h->ws = NULL;
}

static inline int pk_moe_linear(PkMoeLt *h, cudaStream_t s, size_t rows, int out_f, int in_f,
                                const __nv_bfloat16 *W, const __nv_bfloat16 *x,
                                const __nv_bfloat16 *bias, __nv_bfloat16 *y) {
    if (rows == 0)
        return 0;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t a = NULL, b = NULL, d = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulHeuristicResult_t hr;
    int found = 0, rc = 0;
    const float one = 1.f, zero = 0.f;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
        (bias && cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof bias)) ||
        cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, in_f, out_f, in_f) ||
        cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, in_f, rows, in_f) ||
        cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, out_f, rows, out_f) ||
        cublasLtMatmulPreferenceCreate(&pref) ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &h->ws_bytes, sizeof h->ws_bytes) ||
        cublasLtMatmulAlgoGetHeuristic(h->lt, op, a, b, d, d, pref, 1, &hr, &found) || found < 1)
        rc = 3;
    if (!rc && cublasLtMatmul(h->lt, op, &one, W, a, x, b, &zero, y, d, y, d, &hr.algo, h->ws,
                              h->ws_bytes, s) != CUBLAS_STATUS_SUCCESS)
        rc = 4;
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (d)
        cublasLtMatrixLayoutDestroy(d);
    if (b)
        cublasLtMatrixLayoutDestroy(b);
    if (a)
        cublasLtMatrixLayoutDestroy(a);
    if (op)
        cublasLtMatmulDescDestroy(op);
    return rc;
}

// ---- The expert MLP of one rank on `rows` rows (PKB's expert_forward / expert_forward_lora) ----

struct PkMoeExpert {
    const __nv_bfloat16 *wg, *bg, *wu, *bu, *wd, *bd; // gate/up (I x N, I), down (N x I, N)
    // LoRA (pkb/32) or NULL: A_g, A_u (r x N), B_g, B_u (I x r), A_d (r x I), B_d (N x r)
    const __nv_bfloat16 *ag, *bgl, *au, *bul, *ad, *bdl;
    int N, I, r;
};

// Scratch of pk_moe_expert_forward for `rows` rows, in bf16 elements.
static inline size_t pk_moe_expert_scratch(size_t rows, int I, int r) {
    return rows * (4 * (size_t)I + 2 * (size_t)(r > 0 ? r : 0)) + 64;
}

// y (rows x N) = down(bf16(silu(gate(x))) * up(x)) [+ the LoRA terms], every op rounded to bf16
// as PyTorch does it. tmp holds pk_moe_expert_scratch(rows) bf16; with LoRA, tmp2 holds rows x N.
static inline int pk_moe_expert_forward(PkMoeLt *h, cudaStream_t s, const PkMoeExpert &ex,
                                        size_t rows, const __nv_bfloat16 *x, __nv_bfloat16 *y,
                                        __nv_bfloat16 *tmp, __nv_bfloat16 *tmp2) {
    if (rows == 0)
        return 0;
    const size_t ri = rows * ex.I;
    __nv_bfloat16 *g = tmp, *u = g + ri, *hh = u + ri, *t = hh + ri, *xa = t + ri;
    const unsigned grid = 1056;
    int rc = pk_moe_linear(h, s, rows, ex.I, ex.N, ex.wg, x, ex.bg, g);
    if (!rc && ex.ag) { // gate_x = gate_proj(x) + F.linear(F.linear(x, A_g), B_g)
        rc = pk_moe_linear(h, s, rows, ex.r, ex.N, ex.ag, x, NULL, xa);
        rc = rc ? rc : pk_moe_linear(h, s, rows, ex.I, ex.r, ex.bgl, xa, NULL, t);
        if (!rc)
            pk_moe_add<<<grid, 256, 0, s>>>(g, g, t, ri);
    }
    rc = rc ? rc : pk_moe_linear(h, s, rows, ex.I, ex.N, ex.wu, x, ex.bu, u);
    if (!rc && ex.ag) {
        rc = pk_moe_linear(h, s, rows, ex.r, ex.N, ex.au, x, NULL, xa);
        rc = rc ? rc : pk_moe_linear(h, s, rows, ex.I, ex.r, ex.bul, xa, NULL, t);
        if (!rc)
            pk_moe_add<<<grid, 256, 0, s>>>(u, u, t, ri);
    }
    if (rc)
        return 10 + rc;
    pk_moe_swiglu<<<grid, 256, 0, s>>>(g, u, hh, ri);
    rc = pk_moe_linear(h, s, rows, ex.N, ex.I, ex.wd, hh, ex.bd, y);
    if (!rc && ex.ag) {
        rc = pk_moe_linear(h, s, rows, ex.r, ex.I, ex.ad, hh, NULL, xa);
        rc = rc ? rc : pk_moe_linear(h, s, rows, ex.N, ex.r, ex.bdl, xa, NULL, tmp2);
        if (!rc)
            pk_moe_add<<<grid, 256, 0, s>>>(y, y, tmp2, rows * (size_t)ex.N);
    }
    if (rc)
        return 20 + rc;
    return cudaGetLastError() == cudaSuccess ? 0 : 30;
}

// ---- The reference: router, dispatch, expert MLP, combine (state per rank: one module) ----

struct PkMoeRef {
    PkMoeLt lt;
    void *win_ptr; // send | ret | recv | y: rows of N bf16 (NCCL send/recv need a window)
    size_t win_bytes;
    ncclWindow_t win;
    __nv_bfloat16 *logits, *w, *pw, *tmp, *tmp2;
    int *sel, *cnt, *all_cnt, *mapping;
    size_t cap_M; // tokens the buffers hold
    int *host;    // pinned: every rank's counts [W][E]
};

static inline int pk_moe_ref_init(PkMoeRef *r) {
    memset(r, 0, sizeof *r);
    if (pk_moe_lt_init(&r->lt))
        return 2001;
    return cudaMallocHost(&r->host, PK_MAX_RANKS * PK_MOE_MAX_E * sizeof(int)) == cudaSuccess
               ? 0
               : 2002;
}

static inline void pk_moe_ref_fini(PkMoeRef *r, ncclComm_t comm) {
    if (r->win_ptr) {
        ncclCommWindowDeregister(comm, r->win);
        ncclMemFree(r->win_ptr);
    }
    cudaFree(r->logits);
    cudaFree(r->w);
    cudaFree(r->pw);
    cudaFree(r->tmp);
    cudaFree(r->tmp2);
    cudaFree(r->sel);
    cudaFree(r->cnt);
    cudaFree(r->all_cnt);
    cudaFree(r->mapping);
    cudaFreeHost(r->host);
    pk_moe_lt_fini(&r->lt);
    memset(r, 0, sizeof *r);
}

// Buffers for M tokens of N, I, E, K, LoRA rank lr at world W, sized on the first call (every
// rank makes it: trial 0, untimed; the window registration is collective).
static inline int pk_moe_ref_reserve(PkMoeRef *r, const pk_ctx *ctx, size_t M, size_t N, int I,
                                     int E, int K, int lr) {
    const size_t T = (size_t)K * M, cap = T * (size_t)ctx->world_size;
    const size_t bytes = (2 * T + 2 * cap) * N * sizeof(__nv_bfloat16);
    if (r->win_bytes >= bytes && r->cap_M >= M)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2003;
    if (r->win_ptr) {
        ncclCommWindowDeregister(ctx->comm, r->win);
        ncclMemFree(r->win_ptr);
        r->win_ptr = NULL;
        r->win_bytes = 0;
    }
    if (ncclMemAlloc(&r->win_ptr, bytes) != ncclSuccess ||
        ncclCommWindowRegister(ctx->comm, r->win_ptr, bytes, &r->win, NCCL_WIN_COLL_SYMMETRIC) !=
            ncclSuccess)
        return 2004;
    r->win_bytes = bytes;
    void **bufs[] = {(void **)&r->logits, (void **)&r->w,       (void **)&r->pw,
                     (void **)&r->tmp,    (void **)&r->tmp2,    (void **)&r->sel,
                     (void **)&r->cnt,    (void **)&r->all_cnt, (void **)&r->mapping};
    const size_t sizes[] = {M * E * 2,
                            T * 2,
                            T * 2,
                            pk_moe_expert_scratch(cap, I, lr) * 2,
                            lr > 0 ? cap * N * 2 : 16,
                            T * 4,
                            PK_MOE_MAX_E * 4,
                            PK_MAX_RANKS * PK_MOE_MAX_E * 4,
                            T * 4};
    for (int i = 0; i < 9; i++) {
        cudaFree(*bufs[i]);
        *bufs[i] = NULL;
        if (cudaMalloc(bufs[i], sizes[i]) != cudaSuccess)
            return 2005;
    }
    r->cap_M = M;
    return 0;
}

// The whole forward on this rank: x (M x N), the router (gw: E x N, gb: E), the rank's expert
// `ex`; writes out (M x N). Host-driven NCCL, one step after another, as PKB's solution().
static inline int pk_moe_ref_forward(PkMoeRef *r, const pk_ctx *ctx, const __nv_bfloat16 *x,
                                     const __nv_bfloat16 *gw, const __nv_bfloat16 *gb,
                                     const PkMoeExpert &ex, __nv_bfloat16 *out, size_t M, int E,
                                     int K) {
    const int W = ctx->world_size, rank = ctx->rank, El = E / W;
    const size_t N = (size_t)ex.N, T = (size_t)K * M, cap = T * (size_t)W, vpr = N / 8;
    const size_t row = N * sizeof(__nv_bfloat16);
    cudaStream_t s = ctx->stream;
    int rc = pk_moe_ref_reserve(r, ctx, M, N, ex.I, E, K, ex.ag ? ex.r : 0);
    if (rc)
        return rc;
    uint4 *send = static_cast<uint4 *>(r->win_ptr), *ret = send + T * vpr, *recv = ret + T * vpr,
          *y = recv + cap * vpr;
    // router_logits = F.linear(x, gate_weight, gate_bias); softmax; top-k.
    if ((rc = pk_moe_linear(&r->lt, s, M, E, (int)N, gw, x, gb, r->logits)))
        return 100 + rc;
    pk_moe_router<<<264, 256, 0, s>>>(r->logits, r->sel, r->w, M, E, K);
    // _preprocess: tokens per expert, all-gathered; the split sizes on the host (.tolist()).
    pk_moe_count<<<E, 256, 0, s>>>(r->sel, r->cnt, M, K);
    if (ncclAllGather(r->cnt, r->all_cnt, (size_t)E, ncclInt32, ctx->comm, s) != ncclSuccess)
        return 200;
    if (cudaMemcpyAsync(r->host, r->all_cnt, (size_t)W * E * sizeof(int), cudaMemcpyDeviceToHost,
                        s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess)
        return 201;
    size_t ins[PK_MAX_RANKS], outs[PK_MAX_RANKS],
        in_off[PK_MAX_RANKS + 1] = {0}, out_off[PK_MAX_RANKS + 1] = {0};
    for (int p = 0; p < W; p++) {
        ins[p] = outs[p] = 0;
        for (int l = 0; l < El; l++) {
            ins[p] += (size_t)r->host[rank * E + p * El + l];  // rows to p's experts
            outs[p] += (size_t)r->host[p * E + rank * El + l]; // rows from p to ours
        }
        in_off[p + 1] = in_off[p] + ins[p];
        out_off[p + 1] = out_off[p] + outs[p];
    }
    if (in_off[W] != T || out_off[W] > cap)
        return 202;
    // _permute: expert-major positions, then index_select into the send buffer.
    pk_moe_positions<<<E, 1024, 0, s>>>(r->sel, r->w, r->cnt, r->mapping, r->pw, M, K);
    pk_moe_gather<<<1056, 256, 0, s>>>(static_cast<const uint4 *>(static_cast<const void *>(x)),
                                       r->mapping, send, T, vpr);
    if (cudaGetLastError() != cudaSuccess)
        return 203;
    // all_to_all_single (dispatch): ins[p] rows to p, outs[p] rows from p.
    if (ncclGroupStart() != ncclSuccess)
        return 204;
    for (int p = 0; p < W; p++) {
        if (ins[p] > 0)
            rc = rc ? rc
                    : (ncclSend(send + in_off[p] * vpr, ins[p] * N, ncclBfloat16, p, ctx->comm,
                                s) != ncclSuccess);
        if (outs[p] > 0)
            rc = rc ? rc
                    : (ncclRecv(recv + out_off[p] * vpr, outs[p] * N, ncclBfloat16, p, ctx->comm,
                                s) != ncclSuccess);
    }
    if (ncclGroupEnd() != ncclSuccess || rc)
        return 205;
    // The rank's experts: one MLP over every received row.
    const size_t R = out_off[W];
    if ((rc = pk_moe_expert_forward(&r->lt, s, ex, R, reinterpret_cast<__nv_bfloat16 *>(recv),
                                    reinterpret_cast<__nv_bfloat16 *>(y), r->tmp, r->tmp2)))
        return 300 + rc;
    // all_to_all_single (combine): every row back to its token's rank.
    if (ncclGroupStart() != ncclSuccess)
        return 400;
    for (int p = 0; p < W; p++) {
        if (outs[p] > 0)
            rc = rc ? rc
                    : (ncclSend(y + out_off[p] * vpr, outs[p] * N, ncclBfloat16, p, ctx->comm, s) !=
                       ncclSuccess);
        if (ins[p] > 0)
            rc = rc ? rc
                    : (ncclRecv(ret + in_off[p] * vpr, ins[p] * N, ncclBfloat16, p, ctx->comm, s) !=
                       ncclSuccess);
    }
    if (ncclGroupEnd() != ncclSuccess || rc)
        return 401;
    // _unpermute: zeros, weighted scatter_add_.
    if (cudaMemsetAsync(out, 0, M * row, s) != cudaSuccess)
        return 500;
    pk_moe_scatter_add<<<1056, 256, 0, s>>>(reinterpret_cast<const __nv_bfloat162 *>(ret), r->pw,
                                            r->mapping, reinterpret_cast<__nv_bfloat162 *>(out), T,
                                            N / 2);
    return cudaGetLastError() == cudaSuccess ? 0 : 501;
}
#endif
