// Wrong (subtle): correct.cu with the gate applied after the delta update instead of before
// it: the projection k^T S reads the undecayed state and the decay multiplies the updated
// state, S <- decay (S + k u^T) with u = (v - k^T S) beta, where FLA's gated delta rule (and
// PKB's reference) decays first, S <- decay S, then u = (v - k^T S) beta, S <- S + k u^T.
// The outputs differ wherever decay != 1 (decay ~ 0.4-0.7 on these gates), on every input.
//
// (What follows is correct.cu's description.)
// Correct, and not the reference: no NCCL call and no packing. The all-to-alls become NVLink
// loads and stores through the device API: after an LSA barrier (every peer is in this call, its
// inputs are ready) one kernel gathers this rank's heads over the whole sequence straight from
// every rank's q, k, v, gate and beta (ncclGetLsaPointer on the arena's window) into scratch,
// [S][Hl][.] in rank order; the recurrence runs as in the reference (fp32 state in registers);
// a last kernel stores each token's output into its owner's y over NVLink and waits at a
// barrier: every peer has finished reading our inputs and writing our y.
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
            st[r] = (st[r] + kn[g * R + r] * u) * decay;
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
    bf16 *dst[5]; // [S][Hl][D] in scratch
};

// dst_i[s][hl][d] = rank (s / Ls)'s x_i[s % Ls][me Hl + hl][d].
__global__ void __launch_bounds__(THREADS)
    pull_heads(ncclDevComm comm, ncclWindow_t win, Pull a, int me, int world, long long Ls,
               long long H, long long Hl) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (int i = 0; i < 5; i++) {
        const long long D = a.D[i], n = world * Ls * Hl * D;
        for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
             e += (long long)gridDim.x * THREADS) {
            const long long s = e / (Hl * D), hl = e / D % Hl, d = e % D;
            const int src = (int)(s / Ls);
            const bf16 *x = static_cast<const bf16 *>(ncclGetLsaPointer(win, a.off[i], src));
            a.dst[i][e] = x[((s % Ls) * H + me * Hl + hl) * D + d];
        }
    }
}

// rank (s / Ls)'s y[s % Ls][me Hl + hl][d] = out[s][hl][d]; then the barrier.
__global__ void __launch_bounds__(THREADS)
    push_out(ncclDevComm comm, ncclWindow_t win, size_t y_off, const bf16 *out, int me, int world,
             long long Ls, long long H, long long Hl, long long Dv) {
    const long long n = world * Ls * Hl * Dv;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const long long s = e / (Hl * Dv), hl = e / Dv % Hl, d = e % Dv;
        bf16 *y = static_cast<bf16 *>(ncclGetLsaPointer(win, y_off, (int)(s / Ls)));
        y[((s % Ls) * H + me * Hl + hl) * Dv + d] = out[e];
    }
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *q, const bf16 *k, const bf16 *v,
                        const bf16 *gate, const bf16 *beta, const bf16 *a_log, const bf16 *dt_bias,
                        bf16 *y, size_t Ls, size_t H, size_t Dk, size_t Dv) {
    if (!g_ctas && solution_init(ctx))
        return 1;
    const int W = ctx->world_size, me = ctx->rank;
    const long long Hl = (long long)H / W, S = (long long)Ls * W;
    if ((long long)H % W != 0 || Dk % GROUPS != 0 || Dk / GROUPS > MAX_ROWS)
        return 2;
    const bf16 *in[5] = {q, k, v, gate, beta};
    Pull a;
    bf16 *p = static_cast<bf16 *>(ctx->scratch);
    const long long D[5] = {(long long)Dk, (long long)Dk, (long long)Dv, 1, 1};
    long long used = 0;
    for (int i = 0; i < 5; i++) {
        a.off[i] = pk_sym_offset(ctx, in[i]);
        a.D[i] = D[i];
        a.dst[i] = p + used;
        used += S * Hl * D[i];
    }
    bf16 *out = p + used;
    used += S * Hl * (long long)Dv;
    if ((size_t)used * sizeof(bf16) > ctx->scratch_size)
        return 3;
    cudaStream_t s = ctx->stream;
    pull_heads<<<g_ctas, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, a, me, W, (long long)Ls,
                                          (long long)H, Hl);
    const dim3 grid((unsigned)Hl, (unsigned)((Dv + COLS - 1) / COLS));
    gated_delta<<<grid, GROUPS * COLS, 0, s>>>(a.dst[0], a.dst[1], a.dst[2], a.dst[3], a.dst[4],
                                               a_log, dt_bias, out, (int)S, (int)Hl, (int)Dk,
                                               (int)Dv);
    push_out<<<g_ctas, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, y), out, me,
                                        W, (long long)Ls, (long long)H, Hl, (long long)Dv);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
