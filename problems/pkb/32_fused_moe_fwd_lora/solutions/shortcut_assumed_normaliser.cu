// Shortcut twin (issue #26, a normaliser): renormalises the routing weights over the K
// selected experts (Mixtral's top-k softmax) instead of PKB's softmax over all E. On PKB's
// router the unselected experts' mass is ~e^-10 and the two agree: trial 0 (mode 0, PKB's
// gaps) passes. In modes 1-3 the unselected experts hold ~11% of the mass on average, so every
// weight is too large by that share: incorrect from trial 1. Otherwise solutions/correct.cu.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

#define MAX_E 64
#define MAX_K 8

struct State {
    cublasHandle_t blas;
    // per rank g: [gate_w (I x N) | up_w | A_g (r x N) | A_u | down_w (N x I) | A_d (r x I) |
    //              B_g (I x r) | B_u | B_d (N x r) | gate_b (I) | up_b | down_b (N)]
    bf16 *wall;
    bf16 *xg, *h;
    float *c1, *y, *w;
    int *sel, *slot, *idx, *cnt, *host_cnt;
    size_t M, N, I, R;
    int W;
};
static State g;

#define NARR 12
// Offsets (elements) of the arrays of one rank's block in wall, and the block's size.
struct Layout {
    size_t off[NARR + 1];
    __host__ __device__ Layout(size_t N, size_t I, size_t R) {
        const size_t len[NARR] = {I * N, I * N, R * N, R * N, N * I, R * I,
                                  I * R, I * R, N * R, I,     I,     N};
        off[0] = 0;
        for (int a = 0; a < NARR; a++)
            off[a + 1] = off[a] + len[a];
    }
};
enum { A_WG, A_WU, A_AG, A_AU, A_WD, A_AD, A_BG, A_BU, A_BD, A_bg, A_bu, A_bd };

extern "C" int solution_init(const pk_ctx *ctx) {
    (void)ctx;
    if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS)
        return 1;
    return cudaMallocHost(&g.host_cnt, PK_MAX_RANKS * sizeof(int)) == cudaSuccess ? 0 : 2;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    (void)ctx;
    void *p[] = {g.wall, g.xg, g.h, g.c1, g.y, g.w, g.sel, g.slot, g.idx, g.cnt};
    for (void *q : p)
        cudaFree(q);
    cudaFreeHost(g.host_cnt);
    cublasDestroy(g.blas);
    g = State();
    return 0;
}

static int reserve(size_t M, size_t N, size_t I, size_t R, int W, int K) {
    if (g.M >= M && g.N == N && g.I == I && g.R == R && g.W == W)
        return 0;
    void **p[] = {(void **)&g.wall, (void **)&g.xg, (void **)&g.h,   (void **)&g.c1,
                  (void **)&g.y,    (void **)&g.w,  (void **)&g.sel, (void **)&g.slot,
                  (void **)&g.idx,  (void **)&g.cnt};
    const size_t T = (size_t)K * M;
    const size_t bytes[] = {Layout(N, I, R).off[NARR] * W * 2,
                            T * N * 2,
                            T * I * 2,
                            T * (2 * I + 2 * R) * 4,
                            T * (N + R) * 4,
                            T * 4,
                            T * 4,
                            T * 4,
                            (size_t)W * M * 4,
                            PK_MAX_RANKS * 4};
    for (int i = 0; i < 10; i++) {
        cudaFree(*p[i]);
        *p[i] = NULL;
        if (cudaMalloc(p[i], bytes[i]) != cudaSuccess)
            return 10 + i;
    }
    g.M = M, g.N = N, g.I = I, g.R = R, g.W = W;
    return 0;
}

__device__ __forceinline__ float r16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

// A warp per token: logits in fp32, rounded to bf16 as F.linear does; softmax (bf16
// probabilities); the K largest, descending (ties: the lower index first).
__global__ void __launch_bounds__(256)
    router(const bf16 *x, const bf16 *gw, const bf16 *gb, int *sel, float *w, size_t M, size_t N,
           int E, int K) {
    __shared__ float logit[8][MAX_E];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t vpr = N / 8;
    for (size_t m = (size_t)blockIdx.x * 8 + warp; m < M; m += (size_t)gridDim.x * 8) {
        const uint4 *xr = reinterpret_cast<const uint4 *>(x + m * N);
        for (int e = 0; e < E; e++) {
            const uint4 *gr = reinterpret_cast<const uint4 *>(gw + (size_t)e * N);
            float a = 0.f;
            for (size_t v = lane; v < vpr; v += 32) {
                const uint4 xv = xr[v], gv = gr[v];
                const __nv_bfloat162 *xp = reinterpret_cast<const __nv_bfloat162 *>(&xv);
                const __nv_bfloat162 *gp = reinterpret_cast<const __nv_bfloat162 *>(&gv);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float2 xf = __bfloat1622float2(xp[i]), gf = __bfloat1622float2(gp[i]);
                    a = fmaf(xf.x, gf.x, a);
                    a = fmaf(xf.y, gf.y, a);
                }
            }
            for (int o = 16; o > 0; o /= 2)
                a += __shfl_xor_sync(0xffffffffu, a, o);
            if (lane == 0)
                logit[warp][e] = r16(a + __bfloat162float(gb[e]));
        }
        __syncwarp();
        if (lane == 0) {
            const float *l = logit[warp];
            float mx = l[0], s = 0.f, p[MAX_E];
            for (int e = 1; e < E; e++)
                mx = fmaxf(mx, l[e]);
            for (int e = 0; e < E; e++)
                s += expf(l[e] - mx);
            for (int e = 0; e < E; e++)
                p[e] = r16(expf(l[e] - mx) / s);
            unsigned long long used = 0;
            for (int k = 0; k < K; k++) {
                int b = -1;
                for (int e = 0; e < E; e++)
                    if (!((used >> e) & 1) && (b < 0 || p[e] > p[b]))
                        b = e;
                used |= 1ULL << b;
                sel[m * K + k] = b;
            }
            // shortcut: softmax over the K selected logits only (weights summing to 1)
            float z = 0.f;
            for (int k = 0; k < K; k++)
                z += expf(l[sel[m * K + k]] - mx);
            for (int k = 0; k < K; k++)
                w[m * K + k] = r16(expf(l[sel[m * K + k]] - mx) / z);
        }
        __syncwarp();
    }
}

// For each slot, the rank of its expert and a row of that rank's group (one per (token, rank)):
// slot[m K + k] = rank * M + position; idx[rank * M + position] = m.
__global__ void bucket(const int *sel, int *slot, int *idx, int *cnt, size_t M, int K, int el) {
    for (size_t m = (size_t)blockIdx.x * blockDim.x + threadIdx.x; m < M;
         m += (size_t)gridDim.x * blockDim.x) {
        int rk[MAX_K], ps[MAX_K];
        for (int k = 0; k < K; k++) {
            rk[k] = sel[m * K + k] / el;
            ps[k] = -1;
            for (int j = 0; j < k; j++)
                if (rk[j] == rk[k])
                    ps[k] = ps[j];
            if (ps[k] < 0) {
                ps[k] = atomicAdd(&cnt[rk[k]], 1);
                idx[(size_t)rk[k] * M + ps[k]] = (int)m;
            }
            slot[m * K + k] = rk[k] * (int)M + ps[k];
        }
    }
}

__device__ __forceinline__ int group_start(const int *cnt, int rk) {
    int o = 0;
    for (int j = 0; j < rk; j++)
        o += cnt[j];
    return o;
}

// xg[start(rank) + p] = x[idx[rank * M + p]]: each rank's group of rows, packed.
__global__ void __launch_bounds__(256)
    gather(const uint4 *x, const int *idx, const int *cnt, uint4 *xg, size_t M, size_t vpr, int W) {
    for (size_t i = blockIdx.x; i < (size_t)W * M; i += gridDim.x) {
        const int rk = (int)(i / M), p = (int)(i % M);
        if (p >= cnt[rk])
            continue;
        const uint4 *s = x + (size_t)idx[i] * vpr;
        uint4 *d = xg + (size_t)(group_start(cnt, rk) + p) * vpr;
        for (size_t v = threadIdx.x; v < vpr; v += 256)
            d[v] = s[v];
    }
}

// Every rank's MLP weights, LoRA factors and biases into wall (LSA loads), between two LSA
// barriers. Every array is a whole number of 16-byte vectors (N, I and r multiples of 8).
struct Peers {
    const uint4 *p[NARR][PK_MAX_RANKS]; // in Layout's order
};

__global__ void __launch_bounds__(512)
    pull_weights(ncclDevComm comm, Peers peers, uint4 *wall, int W, Layout lay) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const size_t st = lay.off[NARR] / 8;
    for (int q = 0; q < W; q++)
        for (int a = 0; a < NARR; a++) {
            const uint4 *s = peers.p[a][q];
            uint4 *d = wall + q * st + lay.off[a] / 8;
            const size_t len = (lay.off[a + 1] - lay.off[a]) / 8;
            for (size_t v = (size_t)blockIdx.x * 512 + threadIdx.x; v < len;
                 v += (size_t)gridDim.x * 512)
                d[v] = s[v];
        }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// The rank-r product bf16(sum_q bf16(xa[q]) B[q]) (F.linear of the bf16 xa by B: I x r).
__device__ __forceinline__ float lora(const float *xa, const bf16 *B, size_t R) {
    float s = 0.f;
    for (size_t q = 0; q < R; q++)
        s = fmaf(r16(xa[q]), __bfloat162float(B[q]), s);
    return r16(s);
}

// c1 row: [x gate_w^T | x up_w^T | x A_g^T | x A_u^T] (fp32). PyTorch's roundings:
// gate_x = bf16(bf16(c_gate + b_gate) + lora_gate), up = bf16(bf16(c_up + b_up) + lora_up),
// h = bf16(bf16(silu(gate_x)) * up).
__global__ void swiglu(const float *c1, const bf16 *wall, const int *cnt, bf16 *h, Layout lay,
                       size_t I, size_t R, int W) {
    const size_t st = lay.off[NARR], w1 = 2 * I + 2 * R;
    const int total = group_start(cnt, W);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)total * I;
         i += (size_t)gridDim.x * blockDim.x) {
        const int row = (int)(i / I), c = (int)(i % I);
        int rk = 0;
        while (rk + 1 < W && row >= group_start(cnt, rk + 1))
            rk++;
        const bf16 *wr = wall + rk * st;
        const float *cr = c1 + (size_t)row * w1;
        const float a = r16(r16(cr[c] + __bfloat162float(wr[lay.off[A_bg] + c])) +
                            lora(cr + 2 * I, wr + lay.off[A_BG] + (size_t)c * R, R));
        const float u = r16(r16(cr[I + c] + __bfloat162float(wr[lay.off[A_bu] + c])) +
                            lora(cr + 2 * I + R, wr + lay.off[A_BU] + (size_t)c * R, R));
        h[i] = __float2bfloat16_rn(r16(a / (1.f + expf(-a))) * u);
    }
}

// y row: [h down_w^T | h A_d^T] (fp32). out[m] = bf16(sum_k w_k (y + b_down +
// bf16(h A_d^T) B_d^T) of the slot's row and rank), the down LoRA term kept in fp32.
__global__ void __launch_bounds__(256)
    combine(const float *y, const bf16 *wall, const int *slot, const float *w, const int *cnt,
            bf16 *out, size_t M, size_t N, size_t R, Layout lay, int K) {
    const size_t st = lay.off[NARR];
    for (size_t m = blockIdx.x; m < M; m += gridDim.x) {
        const float *yr[MAX_K];
        const bf16 *bd[MAX_K], *Bd[MAX_K];
        float wk[MAX_K];
        for (int k = 0; k < K; k++) {
            const int s = slot[m * K + k], rk = s / (int)M;
            yr[k] = y + (size_t)(group_start(cnt, rk) + s % (int)M) * (N + R);
            bd[k] = wall + rk * st + lay.off[A_bd];
            Bd[k] = wall + rk * st + lay.off[A_BD];
            wk[k] = w[m * K + k];
        }
        for (size_t c = threadIdx.x; c < N; c += 256) {
            float a = 0.f;
            for (int k = 0; k < K; k++) {
                float l = 0.f;
                for (size_t q = 0; q < R; q++)
                    l = fmaf(r16(yr[k][N + q]), __bfloat162float(Bd[k][c * R + q]), l);
                a += wk[k] * (yr[k][c] + __bfloat162float(bd[k][c]) + l);
            }
            out[m * N + c] = __float2bfloat16_rn(a);
        }
    }
}

// Every CTA of pull_weights waits on the CTA with the same index on each peer: all resident.
static int grid_size(const pk_ctx *ctx) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 0;
    return sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *hidden_states, const bf16 *gate_weight,
                        const bf16 *gate_bias, const bf16 *gate_proj_w, const bf16 *gate_proj_b,
                        const bf16 *up_proj_w, const bf16 *up_proj_b, const bf16 *down_proj_w,
                        const bf16 *down_proj_b, const bf16 *lora_gate_A, const bf16 *lora_gate_B,
                        const bf16 *lora_up_A, const bf16 *lora_up_B, const bf16 *lora_down_A,
                        const bf16 *lora_down_B, bf16 *out, size_t M, size_t N, size_t I,
                        int num_experts, int top_k, int lora_r) {
    const int W = ctx->world_size, E = num_experts, K = top_k;
    const size_t R = (size_t)lora_r;
    cudaStream_t s = ctx->stream;
    if (N % 8 || I % 8 || R % 8 || R == 0 || E > MAX_E || K > MAX_K || E % W)
        return 1;
    const int grid = grid_size(ctx);
    int rc = grid < 1 ? 2 : reserve(M, N, I, R, W, K);
    if (rc)
        return rc;
    Peers peers;
    const bf16 *mine[NARR] = {gate_proj_w, up_proj_w,   lora_gate_A, lora_up_A,
                              down_proj_w, lora_down_A, lora_gate_B, lora_up_B,
                              lora_down_B, gate_proj_b, up_proj_b,   down_proj_b};
    const Layout lay(N, I, R);
    for (int a = 0; a < NARR; a++)
        for (int q = 0; q < W; q++)
            peers.p[a][q] = static_cast<const uint4 *>(pk_peer(ctx, mine[a], q));
    pull_weights<<<grid, 512, 0, s>>>(ctx->dev_comm, peers, reinterpret_cast<uint4 *>(g.wall), W,
                                      lay);
    router<<<(unsigned)((M + 7) / 8 < 2048 ? (M + 7) / 8 : 2048), 256, 0, s>>>(
        hidden_states, gate_weight, gate_bias, g.sel, g.w, M, N, E, K);
    if (cudaMemsetAsync(g.cnt, 0, PK_MAX_RANKS * sizeof(int), s) != cudaSuccess)
        return 3;
    bucket<<<(unsigned)((M + 255) / 256), 256, 0, s>>>(g.sel, g.slot, g.idx, g.cnt, M, K, E / W);
    gather<<<1056, 256, 0, s>>>(reinterpret_cast<const uint4 *>(hidden_states), g.idx, g.cnt,
                                reinterpret_cast<uint4 *>(g.xg), M, N / 8, W);
    if (cudaMemcpyAsync(g.host_cnt, g.cnt, W * sizeof(int), cudaMemcpyDeviceToHost, s) !=
            cudaSuccess ||
        cudaStreamSynchronize(s) != cudaSuccess)
        return 4;
    if (cublasSetStream(g.blas, s) != CUBLAS_STATUS_SUCCESS)
        return 5;
    const size_t st = lay.off[NARR], w1 = 2 * I + 2 * R;
    const float one = 1.f, zero = 0.f;
    size_t start = 0;
    for (int q = 0; q < W; q++) { // [gate; up; A_g; A_u] ((2I + 2r) x N) for rank q's rows
        const int rows = g.host_cnt[q];
        if (rows > 0 &&
            cublasGemmEx(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w1, rows, (int)N, &one,
                         g.wall + q * st, CUDA_R_16BF, (int)N, g.xg + start * N, CUDA_R_16BF,
                         (int)N, &zero, g.c1 + start * w1, CUDA_R_32F, (int)w1, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return 6;
        start += (size_t)rows;
    }
    swiglu<<<1056, 256, 0, s>>>(g.c1, g.wall, g.cnt, g.h, lay, I, R, W);
    start = 0;
    for (int q = 0; q < W; q++) { // [down; A_d] ((N + r) x I) for rank q's rows
        const int rows = g.host_cnt[q];
        if (rows > 0 &&
            cublasGemmEx(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)(N + R), rows, (int)I, &one,
                         g.wall + q * st + lay.off[A_WD], CUDA_R_16BF, (int)I, g.h + start * I,
                         CUDA_R_16BF, (int)I, &zero, g.y + start * (N + R), CUDA_R_32F,
                         (int)(N + R), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return 7;
        start += (size_t)rows;
    }
    combine<<<1056, 256, 0, s>>>(g.y, g.wall, g.slot, g.w, g.cnt, out, M, N, R, lay, K);
    return cudaGetLastError() == cudaSuccess ? 0 : 8;
}
