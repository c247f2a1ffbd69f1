// Shortcut twin ("skip the exchange"; for a linear-attention recurrence: skip the state). Every
// rank runs the recurrence of every head over its own Ls tokens only, from a zero state, as if
// its shard were the whole sequence: no all-to-all, no state from the ranks before it. It
// fetches only the per-head parameters of the other ranks' heads (a_log and dt_bias, 2 H values,
// over NVLink after an LSA barrier). Rank 0's output is right (its tokens start the sequence);
// on every other rank each token misses the decayed contributions of all earlier ranks' tokens,
// wrong on every input (bench/pkb/sim_75_fla_gated_deltanet_cp.py).
#include "pk_ctx.h"

#include <cuda/atomic>
#include <math.h>

typedef __nv_bfloat16 bf16;

#define GROUPS 8    // row groups of the state per CTA
#define COLS 32     // state columns per CTA
#define MAX_ROWS 32 // Dk / GROUPS at most (meta.json: Dk <= 256)
#define MAX_DK 256

__device__ __forceinline__ float block_sum(float v, float *red) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    float s = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++)
        s += red[w];
    return s;
}

// The gated delta rule of one head over S steps, for COLS columns of its Dk x Dv state (CTA
// (hl, column block)): thread (g, j) keeps rows [g R, (g + 1) R) of column j in registers
// (R = Dk / GROUPS). q, k, v, gate, beta are [S][Hl][.] (the sequence in rank order); out is
// [S][Hl][Dv]. fp32 throughout, as PKB's _gated_delta_recurrent; one bf16 rounding of o.
__global__ void __launch_bounds__(GROUPS *COLS)
    gated_delta(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *gate, const bf16 *beta,
                const bf16 *a_log, const bf16 *dt_bias, bf16 *out, int S, int Hl, int Dk, int Dv) {
    __shared__ float kn[MAX_DK], qn[MAX_DK], part[GROUPS][COLS], red[GROUPS * COLS / 32];
    __shared__ float upd[COLS];
    const int hl = blockIdx.x, g = threadIdx.x / COLS, lane = threadIdx.x % COLS;
    const int j = blockIdx.y * COLS + lane, R = Dk / GROUPS;
    const float scale = 1.f / sqrtf((float)Dk);
    const float a = expf(__bfloat162float(a_log[hl])), dtb = __bfloat162float(dt_bias[hl]);
    // (here Hl is every head, H, and S this rank's Ls tokens: a_log and dt_bias of all H heads)
    float st[MAX_ROWS];
#pragma unroll
    for (int r = 0; r < MAX_ROWS; r++)
        st[r] = 0.f;
    for (int s = 0; s < S; s++) {
        const long long tok = (long long)s * Hl + hl;
        float kk = 0, qq = 0;
        for (int i = threadIdx.x; i < Dk; i += blockDim.x) {
            const float kv = __bfloat162float(k[tok * Dk + i]),
                        qv = __bfloat162float(q[tok * Dk + i]);
            kn[i] = kv;
            qn[i] = qv;
            kk += kv * kv;
            qq += qv * qv;
        }
        const float ksum = block_sum(kk, red), qsum = block_sum(qq, red);
        const float kden = fmaxf(sqrtf(ksum), 1e-6f), qden = fmaxf(sqrtf(qsum), 1e-6f);
        for (int i = threadIdx.x; i < Dk; i += blockDim.x) {
            kn[i] = kn[i] / kden;
            qn[i] = qn[i] / qden * scale;
        }
        const float x = __bfloat162float(gate[tok]) + dtb;
        const float sp = x > 20.f ? x : log1pf(expf(x));
        const float decay = expf(-a * sp), b = __bfloat162float(beta[tok]);
        __syncthreads();
        float p = 0;
#pragma unroll
        for (int r = 0; r < MAX_ROWS; r++) { // unrolled: the state stays in registers
            if (r >= R)
                break;
            st[r] *= decay;
            p += kn[g * R + r] * st[r];
        }
        part[g][lane] = p;
        __syncthreads();
        if (g == 0) {
            float proj = 0;
            for (int w = 0; w < GROUPS; w++)
                proj += part[w][lane];
            const float vj = j < Dv ? __bfloat162float(v[tok * Dv + j]) : 0.f;
            upd[lane] = (vj - proj) * b;
        }
        __syncthreads();
        const float u = upd[lane];
        float o = 0;
#pragma unroll
        for (int r = 0; r < MAX_ROWS; r++) { // unrolled: the state stays in registers
            if (r >= R)
                break;
            st[r] += kn[g * R + r] * u;
            o += qn[g * R + r] * st[r];
        }
        part[g][lane] = o;
        __syncthreads();
        if (g == 0 && j < Dv) {
            float acc = 0;
            for (int w = 0; w < GROUPS; w++)
                acc += part[w][lane];
            out[tok * Dv + j] = __float2bfloat16(acc);
        }
        __syncthreads();
    }
}

static bf16 *g_par; // a_log and dt_bias of all H heads, gathered

// par[h] = a_log of head h, par[H + h] = dt_bias of head h, from the head's rank; then the
// barrier (peers done reading ours).
__global__ void gather_params(ncclDevComm comm, ncclWindow_t win, size_t a_off, size_t dt_off,
                              bf16 *par, int world, int Hl) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (int h = threadIdx.x; h < world * Hl; h += blockDim.x) {
        const bf16 *a = static_cast<const bf16 *>(ncclGetLsaPointer(win, a_off, h / Hl));
        const bf16 *d = static_cast<const bf16 *>(ncclGetLsaPointer(win, dt_off, h / Hl));
        par[h] = a[h % Hl];
        par[world * Hl + h] = d[h % Hl];
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    cudaStreamSynchronize(ctx->stream);
    cudaFree(g_par);
    g_par = NULL;
    return 0;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *q, const bf16 *k, const bf16 *v,
                        const bf16 *gate, const bf16 *beta, const bf16 *a_log, const bf16 *dt_bias,
                        bf16 *y, size_t Ls, size_t H, size_t Dk, size_t Dv) {
    const int W = ctx->world_size;
    if (Dk % GROUPS != 0 || Dk / GROUPS > MAX_ROWS || ctx->lsa_barrier_count < 1)
        return 1;
    if (!g_par && cudaMalloc(&g_par, 2 * H * sizeof(bf16)) != cudaSuccess)
        return 2;
    cudaStream_t s = ctx->stream;
    gather_params<<<1, 256, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, a_log),
                                    pk_sym_offset(ctx, dt_bias), g_par, W, (int)(H / W));
    // [Ls][H][.] is [S][Hl][.] with S = Ls, Hl = H: the local tokens, every head.
    const dim3 grid((unsigned)H, (unsigned)((Dv + COLS - 1) / COLS));
    gated_delta<<<grid, GROUPS * COLS, 0, s>>>(q, k, v, gate, beta, g_par, g_par + H, y, (int)Ls,
                                               (int)H, (int)Dk, (int)Dv);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
