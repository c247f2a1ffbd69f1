// SHORTCUT TWIN (issue 26), incorrect: correct.cu, except that every routing weight is 1/K,
// the mean top-2 weight a flat router would give, so the softmax normaliser is never needed.
// PKB's top-K probabilities are anything but 1/K each; the skewed, hot and tied routings move
// them further.
#include "pk_ctx.h"

#include <cublasLt.h>
#include <cuda/atomic>
#include <cuda_bf16.h>

#define THREADS 512
#define MAX_E 16
#define MAX_K 2
#define LT_WS (32u << 20)
#define HDR 4096 // scratch: counts [W] ints, then the receive rows

typedef __nv_bfloat16 bf16;

__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
    const __nv_bfloat162 *x = reinterpret_cast<const __nv_bfloat162 *>(&a);
    const __nv_bfloat162 *y = reinterpret_cast<const __nv_bfloat162 *>(&b);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 u = __bfloat1622float2(x[j]), v = __bfloat1622float2(y[j]);
        s += u.x * v.x + u.y * v.y;
    }
    return s;
}

// The choice of expert and weight for slot k of token m, from the E logits (fp32): the softmax
// and its top K <= 2 (ties to the lower index: any tie rule is valid).
__device__ void choose(const float *z, int E, int K, int *sel, float *w) {
    float mx = z[0], s = 0.f, p[MAX_E];
    for (int e = 1; e < E; e++)
        mx = fmaxf(mx, z[e]);
    for (int e = 0; e < E; e++) {
        p[e] = __expf(z[e] - mx);
        s += p[e];
    }
    int a = 0;
    for (int e = 1; e < E; e++)
        a = p[e] > p[a] ? e : a;
    sel[0] = a;
    w[0] = 1.f / (float)K; // SHORTCUT: weights assumed uniform
    (void)s;
    if (K < 2)
        return;
    int b = a == 0 ? 1 : 0;
    for (int e = 0; e < E; e++)
        b = e != a && p[e] > p[b] ? e : b;
    sel[1] = b;
    w[1] = 1.f / (float)K;
}

// (1) One warp per token: logits, top K, a slot at each destination (sel: the member).
__global__ void __launch_bounds__(256)
    route(const uint4 *x, const uint4 *gw, const bf16 *gb, int *cnt, int *sel, float *wts, int *pos,
          size_t M, size_t vpr, int E, int K, int El) {
    const int lane = threadIdx.x % 32;
    for (size_t m = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; m < M;
         m += (size_t)gridDim.x * blockDim.x / 32) {
        float acc[MAX_E];
        for (int e = 0; e < E; e++)
            acc[e] = 0.f;
        for (size_t v = lane; v < vpr; v += 32) {
            const uint4 xv = x[m * vpr + v];
            for (int e = 0; e < E; e++)
                acc[e] += dot8(xv, gw[(size_t)e * vpr + v]);
        }
        for (int e = 0; e < E; e++)
            for (int o = 16; o > 0; o /= 2)
                acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
        if (lane == 0) {
            for (int e = 0; e < E; e++)
                acc[e] += __bfloat162float(gb[e]);
            int s[MAX_K];
            float w[MAX_K];
            choose(acc, E, K, s, w);
            for (int k = 0; k < K; k++) {
                const int dm = s[k] / El; // the destination member
                sel[m * K + k] = dm;
                wts[m * K + k] = w[k];
                pos[m * K + k] = atomicAdd(&cnt[dm], 1);
            }
        }
    }
}

struct Dispatch {
    size_t cnt_off, recv_off; // arena offsets of the counts and the receive rows
    const uint4 *x;
    const int *sel, *pos;
    int *offs; // [G] where this rank's rows start at member p
    int *R;    // rows this rank receives
    size_t M, vpr;
    int me, first, G, K;
};

// (2) Every (token, slot) row into its destination's receive buffer (LSA stores).
__global__ void __launch_bounds__(THREADS)
    dispatch(ncclDevComm comm, ncclWindow_t win, Dispatch a) {
    __shared__ int cnt[PK_MAX_RANKS][PK_MAX_RANKS];
    __shared__ int off[PK_MAX_RANKS];
    __shared__ uint4 *dst[PK_MAX_RANKS];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const int G = a.G, K = a.K;
    for (int j = threadIdx.x; j < G * G; j += THREADS) // member s's rows for member p
        cnt[j / G][j % G] =
            static_cast<const int *>(ncclGetLsaPointer(win, a.cnt_off, a.first + j / G))[j % G];
    __syncthreads();
    if (threadIdx.x < G) {
        const int p = threadIdx.x;
        int o = 0;
        for (int s = 0; s < a.me; s++)
            o += cnt[s][p];
        off[p] = o;
        dst[p] = static_cast<uint4 *>(ncclGetLsaPointer(win, a.recv_off, a.first + p));
        if (blockIdx.x == 0) {
            a.offs[p] = o;
            if (p == a.me) {
                int r = 0;
                for (int s = 0; s < G; s++)
                    r += cnt[s][p];
                *a.R = r;
            }
        }
    }
    __syncthreads();
    const int per = THREADS / 64; // 64 threads per row
    for (size_t t = (size_t)blockIdx.x * per + threadIdx.x / 64; t < a.M * K;
         t += (size_t)gridDim.x * per) {
        const int p = a.sel[t];
        uint4 *d = dst[p] + (size_t)(off[p] + a.pos[t]) * a.vpr;
        const uint4 *s = a.x + (t / K) * a.vpr;
        for (size_t v = threadIdx.x % 64; v < a.vpr; v += 64)
            d[v] = s[v];
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// h = silu(g) * u from the fused [g | u] rows (R x 2I), fp32 math, one bf16 rounding.
__global__ void silu_mul(const bf16 *gu, bf16 *h, size_t R, size_t I) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < R * I;
         i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / I, c = i % I;
        const float g = __bfloat162float(gu[r * 2 * I + c]),
                    u = __bfloat162float(gu[r * 2 * I + I + c]);
        h[i] = __float2bfloat16_rn(g / (1.f + __expf(-g)) * u);
    }
}

struct Combine {
    size_t recv_off;
    const int *sel, *pos, *offs;
    const float *wts;
    uint4 *out;
    size_t M, vpr;
    int first, K;
};

// (4) out[m] = sum_k w_k * expert row (LSA loads), fp32, one rounding.
__global__ void __launch_bounds__(THREADS) combine(ncclDevComm comm, ncclWindow_t win, Combine a) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const int per = THREADS / 64, K = a.K;
    for (size_t m = (size_t)blockIdx.x * per + threadIdx.x / 64; m < a.M;
         m += (size_t)gridDim.x * per) {
        const uint4 *src[MAX_K];
        float w[MAX_K];
        for (int k = 0; k < K; k++) {
            const int p = a.sel[m * K + k];
            src[k] = static_cast<const uint4 *>(ncclGetLsaPointer(win, a.recv_off, a.first + p)) +
                     (size_t)(a.offs[p] + a.pos[m * K + k]) * a.vpr;
            w[k] = a.wts[m * K + k];
        }
        for (size_t v = threadIdx.x % 64; v < a.vpr; v += 64) {
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            for (int k = 0; k < K; k++) {
                const uint4 r = src[k][v];
                const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&r);
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float2 f = __bfloat1622float2(h[j]);
                    acc[2 * j] += w[k] * f.x;
                    acc[2 * j + 1] += w[k] * f.y;
                }
            }
            uint4 o;
            __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
            for (int j = 0; j < 4; j++)
                h[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
            a.out[m * a.vpr + v] = o;
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// y (n x m row-major) = x (n x k) W^T + b: cuBLASLt, bias epilogue, fp32 accumulation.
static cublasLtHandle_t g_lt;
static void *g_ws;

static int linear(cudaStream_t s, int m, int n, int k, const bf16 *W, const bf16 *x, const bf16 *b,
                  bf16 *y) {
    if (n == 0)
        return 0;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const float one = 1.f, zero = 0.f;
    int rc = 0;
    if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b) ||
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k) ||
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k) ||
        cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m) ||
        cublasLtMatmul(g_lt, op, &one, W, la, x, lb, &zero, y, ld, y, ld, NULL, g_ws, LT_WS, s) !=
            CUBLAS_STATUS_SUCCESS)
        rc = 1;
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (op)
        cublasLtMatmulDescDestroy(op);
    return rc;
}

static char *g_buf;
static size_t g_buf_bytes;
static int *g_R;

extern "C" int solution(const pk_ctx *ctx, const bf16 *hidden_states, const bf16 *gate_weight,
                        const bf16 *gate_bias, const bf16 *w_gate, const bf16 *b_gate,
                        const bf16 *w_up, const bf16 *b_up, const bf16 *w_down, const bf16 *b_down,
                        bf16 *out, size_t M, size_t N, size_t I, int num_experts, int top_k) {
    const int W = ctx->world_size, E = num_experts, K = top_k;
    const int G = E >= W ? W : E, first = E >= W ? 0 : ctx->rank / E * E, El = E / G;
    if (E > MAX_E || K < 1 || K > MAX_K || K > E || E % G != 0 || N % 8 != 0 || I % 8 != 0)
        return 1;
    // A rank receives at most every token of every member, once per local expert it holds.
    const size_t cap = M * (size_t)G * (size_t)(El < K ? El : K), vpr = N / 8;
    if (HDR + cap * N * sizeof(bf16) > ctx->scratch_size)
        return 2;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 3;
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    cudaStream_t s = ctx->stream;
    // Local buffers (first call only: an untimed trial; the dims never change).
    const size_t need = 3 * M * K * 4 + 256 + cap * 3 * I * sizeof(bf16) +
                        (2 * I * N + 2 * I) * sizeof(bf16) + 1024;
    if (!g_lt) {
        if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS ||
            cudaMalloc(&g_ws, LT_WS) != cudaSuccess ||
            cudaMallocHost(&g_R, sizeof(int)) != cudaSuccess)
            return 4;
    }
    if (g_buf_bytes < need) {
        cudaFree(g_buf);
        g_buf_bytes = 0;
        if (cudaMalloc(&g_buf, need) != cudaSuccess)
            return 4;
        g_buf_bytes = need;
    }
    int *sel = reinterpret_cast<int *>(g_buf), *pos = sel + M * K, *offs = pos + M * K + M * K,
        *dR = offs + 32;
    float *wts = reinterpret_cast<float *>(pos + M * K);
    bf16 *gu = reinterpret_cast<bf16 *>(dR + 32), *h = gu + cap * 2 * I, *wcat = h + cap * I,
         *bcat = wcat + 2 * I * N;
    int *cnt = static_cast<int *>(ctx->scratch);
    uint4 *recv = reinterpret_cast<uint4 *>(static_cast<char *>(ctx->scratch) + HDR);
    // [w_gate; w_up] and [b_gate; b_up]: one GEMM for both projections.
    if (cudaMemcpyAsync(wcat, w_gate, I * N * sizeof(bf16), cudaMemcpyDeviceToDevice, s) ||
        cudaMemcpyAsync(wcat + I * N, w_up, I * N * sizeof(bf16), cudaMemcpyDeviceToDevice, s) ||
        cudaMemcpyAsync(bcat, b_gate, I * sizeof(bf16), cudaMemcpyDeviceToDevice, s) ||
        cudaMemcpyAsync(bcat + I, b_up, I * sizeof(bf16), cudaMemcpyDeviceToDevice, s) ||
        cudaMemsetAsync(cnt, 0, (size_t)G * sizeof(int), s))
        return 5;
    route<<<(unsigned)((M + 7) / 8), 256, 0, s>>>(reinterpret_cast<const uint4 *>(hidden_states),
                                                  reinterpret_cast<const uint4 *>(gate_weight),
                                                  gate_bias, cnt, sel, wts, pos, M, vpr, E, K, El);
    Dispatch d;
    d.cnt_off = pk_sym_offset(ctx, cnt);
    d.recv_off = pk_sym_offset(ctx, recv);
    d.x = reinterpret_cast<const uint4 *>(hidden_states);
    d.sel = sel;
    d.pos = pos;
    d.offs = offs;
    d.R = dR;
    d.M = M;
    d.vpr = vpr;
    d.me = ctx->rank - first;
    d.first = first;
    d.G = G;
    d.K = K;
    dispatch<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, d);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpyAsync(g_R, dR, sizeof(int), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess)
        return 6;
    const int R = *g_R;
    if (R < 0 || (size_t)R > cap)
        return 7;
    const bf16 *rows = reinterpret_cast<const bf16 *>(recv);
    if (linear(s, (int)(2 * I), R, (int)N, wcat, rows, bcat, gu))
        return 8;
    if (R > 0)
        silu_mul<<<1024, 256, 0, s>>>(gu, h, (size_t)R, I);
    if (linear(s, (int)N, R, (int)I, w_down, h, b_down, reinterpret_cast<bf16 *>(recv)))
        return 9;
    Combine c;
    c.recv_off = d.recv_off;
    c.sel = sel;
    c.pos = pos;
    c.offs = offs;
    c.wts = wts;
    c.out = reinterpret_cast<uint4 *>(out);
    c.M = M;
    c.vpr = vpr;
    c.first = first;
    c.K = K;
    combine<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, c);
    return cudaGetLastError() == cudaSuccess ? 0 : 10;
}
