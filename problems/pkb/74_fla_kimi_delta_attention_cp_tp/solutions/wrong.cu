// Wrong (subtle): correct.cu with KDA's per-channel decay applied to the state's columns (the
// value channels: S <- S diag(d)) instead of its rows (the key channels: S <- diag(d) S). With
// Dk == Dv (128 and 128) every index is valid and the decay has the right shape; the outputs
// differ wherever the decays of different channels differ, on every input.
//
// (What follows is correct.cu's description.)
// Correct, and not the reference: no NCCL call. After an LSA barrier one kernel pulls, straight
// from the CP group's ranks over NVLink (ncclGetLsaPointer on the arena's window), only the
// tokens up to the end of ours (the later ones do not reach our output) into scratch; the
// recurrence runs as in the reference; a last kernel waits at a barrier for the TP partner's
// output, sums the pair (fp32 of two bf16 values, one rounding: NCCL's bf16 sum of two) into y,
// and waits at a last barrier (peers done reading our inputs and our output).
#include "pk_ctx.h"

#include <cuda/atomic>
#include <math.h>

typedef __nv_bfloat16 bf16;

#define GROUPS 8    // row groups of the state per CTA
#define COLS 32     // state columns per CTA
#define MAX_ROWS 16 // Dk / GROUPS at most (meta.json: Dk <= 128)
#define MAX_DK 128

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

// Kimi delta attention of one head over tokens [0, end) of the sequence, for COLS columns of
// its Dk x Dv state (CTA (h, column block)); outputs only for tokens [t0, end), into out
// [end - t0][H][Dv]. Thread (g, j) keeps rows [g R, (g + 1) R) of column j in registers. q, k, v,
// g (the gate, per key channel), beta are [S][H][.]; a_log [H], dt_bias [H Dk] (the same on
// every rank). fp32 throughout, as PKB's _kda_forward; one bf16 rounding of o.
__global__ void __launch_bounds__(GROUPS *COLS)
    kda(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *gt, const bf16 *beta,
        const bf16 *a_log, const bf16 *dt_bias, bf16 *out, int t0, int end, int H, int Dk, int Dv) {
    __shared__ float kn[MAX_DK], qn[MAX_DK], dk[MAX_DK], part[GROUPS][COLS],
        red[GROUPS * COLS / 32];
    __shared__ float upd[COLS];
    const int h = blockIdx.x, g = threadIdx.x / COLS, lane = threadIdx.x % COLS;
    const int j = blockIdx.y * COLS + lane, R = Dk / GROUPS;
    const float scale = 1.f / sqrtf((float)Dk), a = expf(__bfloat162float(a_log[h]));
    float st[MAX_ROWS];
#pragma unroll
    for (int r = 0; r < MAX_ROWS; r++)
        st[r] = 0.f;
    for (int s = 0; s < end; s++) {
        const long long tok = (long long)s * H + h;
        float kk = 0, qq = 0;
        for (int i = threadIdx.x; i < Dk; i += blockDim.x) {
            const float kv = __bfloat162float(k[tok * Dk + i]),
                        qv = __bfloat162float(q[tok * Dk + i]);
            kn[i] = kv;
            qn[i] = qv;
            kk += kv * kv;
            qq += qv * qv;
            // decay = exp(-5 sigmoid(exp(a_log) (g + dt_bias))), per key channel
            const float x = a * (__bfloat162float(gt[tok * Dk + i]) +
                                 __bfloat162float(dt_bias[(long long)h * Dk + i]));
            dk[i] = expf(-5.f * (1.f / (1.f + expf(-x))));
        }
        const float ksum = block_sum(kk, red), qsum = block_sum(qq, red);
        const float kden = fmaxf(sqrtf(ksum), 1e-12f), qden = fmaxf(sqrtf(qsum), 1e-12f);
        for (int i = threadIdx.x; i < Dk; i += blockDim.x) {
            kn[i] = kn[i] / kden;
            qn[i] = qn[i] / qden * scale;
        }
        const float b = 1.f / (1.f + expf(-__bfloat162float(beta[tok])));
        __syncthreads();
        float p = 0;
#pragma unroll
        for (int r = 0; r < MAX_ROWS; r++) { // unrolled: the state stays in registers
            if (r >= R)
                break;
            st[r] *= dk[j < Dk ? j : Dk - 1]; // the column's channel: Dk == Dv here
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
        for (int r = 0; r < MAX_ROWS; r++) {
            if (r >= R)
                break;
            st[r] += kn[g * R + r] * u;
            o += qn[g * R + r] * st[r];
        }
        part[g][lane] = o;
        __syncthreads();
        if (g == 0 && j < Dv && s >= t0) {
            float acc = 0;
            for (int w = 0; w < GROUPS; w++)
                acc += part[w][lane];
            out[((long long)(s - t0) * H + h) * Dv + j] = __float2bfloat16(acc);
        }
        __syncthreads();
    }
}

#define THREADS 256

static int g_ctas; // CTAs of the exchange kernels: one LSA barrier each

extern "C" int solution_init(const pk_ctx *ctx) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    g_ctas = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    return g_ctas > 0 ? 0 : 1;
}

struct Pull {
    size_t off[5]; // the five inputs' arena offsets
    long long D[5];
    bf16 *dst[5]; // [s][H][D] in scratch
};

// seq_i[s][h][d] = CP rank (s / Ls)'s x_i[s % Ls][h][d] for s < end (the tokens up to the end
// of ours), from rank (s / Ls) tp + tp_rank over NVLink, after an LSA barrier.
__global__ void __launch_bounds__(THREADS)
    pull_seq(ncclDevComm comm, ncclWindow_t win, Pull a, int tp, int tp_rank, long long Ls,
             long long H, long long end) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (int i = 0; i < 5; i++) {
        const long long D = a.D[i], n = end * H * D;
        for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
             e += (long long)gridDim.x * THREADS) {
            const long long s = e / (H * D);
            const int src = (int)(s / Ls) * tp + tp_rank;
            const bf16 *x = static_cast<const bf16 *>(ncclGetLsaPointer(win, a.off[i], src));
            a.dst[i][e] = x[(s % Ls) * H * D + e % (H * D)];
        }
    }
}

// y = bf16(mine + the TP partner's mine) (NCCL's bf16 sum of two), or mine without a partner,
// after an LSA barrier (the partner's is complete); then a barrier: every peer has finished
// reading our inputs and our partial, so the harness and the next call may reuse them.
__global__ void __launch_bounds__(THREADS)
    tp_combine(ncclDevComm comm, ncclWindow_t win, size_t mine_off, const bf16 *mine, bf16 *y,
               int partner, long long n) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const bf16 *other =
        partner >= 0 ? static_cast<const bf16 *>(ncclGetLsaPointer(win, mine_off, partner)) : NULL;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS)
        y[e] = other ? __float2bfloat16(__bfloat162float(mine[e]) + __bfloat162float(other[e]))
                     : mine[e];
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *q, const bf16 *k, const bf16 *v,
                        const bf16 *gt, const bf16 *beta, const bf16 *a_log, const bf16 *dt_bias,
                        bf16 *y, size_t Ls, size_t H, size_t Dk, size_t Dv) {
    if (!g_ctas && solution_init(ctx))
        return 1;
    const int W = ctx->world_size, tp = W >= 4 && W % 2 == 0 ? 2 : 1;
    const int cp_rank = ctx->rank / tp, tp_rank = ctx->rank % tp;
    if (Dk % GROUPS != 0 || Dk / GROUPS > MAX_ROWS)
        return 2;
    const long long end = (long long)(cp_rank + 1) * (long long)Ls;
    const bf16 *in[5] = {q, k, v, gt, beta};
    const long long D[5] = {(long long)Dk, (long long)Dk, (long long)Dv, (long long)Dk, 1};
    Pull a;
    bf16 *p = static_cast<bf16 *>(ctx->scratch);
    long long used = 0;
    for (int i = 0; i < 5; i++) {
        a.off[i] = pk_sym_offset(ctx, in[i]);
        a.D[i] = D[i];
        a.dst[i] = p + used;
        used += end * (long long)H * D[i];
    }
    bf16 *mine = p + used; // at the same offset on the TP partner (the same cp_rank and end)
    used += (long long)(Ls * H * Dv);
    if ((size_t)used * sizeof(bf16) > ctx->scratch_size)
        return 3;
    cudaStream_t s = ctx->stream;
    pull_seq<<<g_ctas, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, a, tp, tp_rank, (long long)Ls,
                                        (long long)H, end);
    const dim3 grid((unsigned)H, (unsigned)((Dv + COLS - 1) / COLS));
    kda<<<grid, GROUPS * COLS, 0, s>>>(a.dst[0], a.dst[1], a.dst[2], a.dst[3], a.dst[4], a_log,
                                       dt_bias, mine, cp_rank * (int)Ls, (int)end, (int)H, (int)Dk,
                                       (int)Dv);
    const int partner = tp > 1 ? ctx->rank ^ 1 : -1;
    tp_combine<<<g_ctas, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, mine),
                                          mine, y, partner, (long long)(Ls * H * Dv));
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
