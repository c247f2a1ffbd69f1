// pkb/75_fla_gated_deltanet_cp (ParallelKernelBench problem 75): gated DeltaNet (FLA) over a
// sequence split across the ranks. Rank r holds tokens [r Ls, (r + 1) Ls) of q, k (Ls x H x Dk),
// v (Ls x H x Dv), gate and beta (Ls x H), bf16, and the per-head parameters a_log and dt_bias of
// heads [r Hl, (r + 1) Hl) (Hl = H / W). For every head h, over the whole sequence s = 0..S-1
// (S = W Ls, rank order), with q and k L2-normalised (q also times Dk^-1/2) and
//   decay_s = exp(-exp(a_log[h]) softplus(gate_s + dt_bias[h])),
//   S_h <- decay_s S_h;  u = (v_s - k_s^T S_h) beta_s;  S_h <- S_h + k_s u^T;  o_s = q_s^T S_h
// (S_h: Dk x Dv fp32, zero at s = 0), every rank must produce y = bf16(o) for its own tokens and
// every head. The state of a head flows through every rank's tokens in order: PKB moves the
// heads (Ulysses all-to-all, sequence -> heads), runs the recurrence, and moves them back.
#include "pk_problem_module.h"
#include "pk_ulysses.cuh"

#include <cuda_bf16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t, size_t, size_t,
                        size_t);

#define GROUPS 8    // row groups of the state per CTA
#define COLS 32     // state columns per CTA
#define MAX_ROWS 32 // Dk / GROUPS at most (meta.json: Dk <= 256)
#define MAX_DK 256

// PKB's _a2a_sequence_to_heads, send side: send[p][t][hl][d] = x[t][p Hl + hl][d].
__global__ void pack_heads(const bf16 *x, bf16 *send, long long Ls, long long H, long long Hl,
                           long long D, int world) {
    const long long n = world * Ls * Hl * D;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long p = e / (Ls * Hl * D), t = e / (Hl * D) % Ls, hl = e / D % Hl, d = e % D;
        send[e] = x[(t * H + p * Hl + hl) * D + d];
    }
}

// PKB's _a2a_heads_to_sequence, receive side: y[t][p Hl + hl][d] = recv[p][t][hl][d].
__global__ void unpack_heads(const bf16 *recv, bf16 *y, long long Ls, long long H, long long Hl,
                             long long D, int world) {
    const long long n = world * Ls * Hl * D;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long p = e / (Ls * Hl * D), t = e / (Hl * D) % Ls, hl = e / D % Hl, d = e % D;
        y[(t * H + p * Hl + hl) * D + d] = recv[e];
    }
}

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

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 8192 ? b : 8192);
}

static PkUlyWork g_work;

static int init(const pk_ctx *ctx) {
    return 0;
}

static void fini(const pk_ctx *ctx) {
    pk_uly_work_free(ctx, &g_work);
}

// Sequence -> heads for one tensor of D elements per (token, head): pack, exchange, and our own
// chunk copied (recv[p] is rank p's tokens of our heads).
static int to_heads(const pk_ctx *ctx, const bf16 *x, bf16 *send, bf16 *recv, long long Ls,
                    long long H, long long D) {
    const int W = ctx->world_size, me = ctx->rank;
    const long long Hl = H / W, chunk = Ls * Hl * D;
    pack_heads<<<grid_for(W * chunk), 256, 0, ctx->stream>>>(x, send, Ls, H, Hl, D, W);
    int rc = pk_uly_cuda(cudaGetLastError());
    if (!rc)
        rc = pk_uly_cuda(cudaMemcpyAsync(recv + me * chunk, send + me * chunk,
                                         (size_t)chunk * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                         ctx->stream));
    return rc ? rc : pk_uly_exchange(ctx, send, recv, (size_t)chunk);
}

// Baseline, PKB's steps: the five Ulysses all-to-alls (sequence -> heads: q, k, v, gate, beta),
// the recurrence of every local head over the whole sequence (fp32 state in registers, one CTA
// per head and 32 state columns), the all-to-all back (heads -> sequence).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long Ls = call->dims[0], H = call->dims[1], Dk = call->dims[2], Dv = call->dims[3];
    const long long Hl = H / W, S = Ls * W;
    const bf16 *in[5];
    for (int i = 0; i < 5; i++)
        in[i] = static_cast<const bf16 *>(call->args[i]);
    const bf16 *a_log = static_cast<const bf16 *>(call->args[5]);
    const bf16 *dt_bias = static_cast<const bf16 *>(call->args[6]);
    bf16 *y = static_cast<bf16 *>(call->args[7]);
    const long long D[5] = {Dk, Dk, Dv, 1, 1};
    long long total = 0;
    for (int i = 0; i < 5; i++)
        total += 2 * Ls * H * D[i];
    total += 2 * Ls * H * Dv; // the output's send and receive buffers
    int rc = pk_uly_work_reserve(ctx, &g_work, (size_t)total * sizeof(bf16));
    if (rc)
        return rc;
    bf16 *base = static_cast<bf16 *>(g_work.ptr), *head[5];
    for (int i = 0; i < 5 && !rc; i++) {
        bf16 *send = base, *recv = base + Ls * H * D[i];
        base += 2 * Ls * H * D[i];
        head[i] = recv;
        rc = to_heads(ctx, in[i], send, recv, Ls, H, D[i]);
    }
    if (rc)
        return rc;
    bf16 *osend = base, *orecv = base + Ls * H * Dv;
    const dim3 grid((unsigned)Hl, (unsigned)((Dv + COLS - 1) / COLS));
    gated_delta<<<grid, GROUPS * COLS, 0, ctx->stream>>>(head[0], head[1], head[2], head[3],
                                                         head[4], a_log, dt_bias, osend, (int)S,
                                                         (int)Hl, (int)Dk, (int)Dv);
    const long long chunk = Ls * Hl * Dv;
    rc = pk_uly_cuda(cudaGetLastError());
    if (!rc)
        rc = pk_uly_cuda(cudaMemcpyAsync(orecv + me * chunk, osend + me * chunk,
                                         (size_t)chunk * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                         ctx->stream));
    if (!rc)
        rc = pk_uly_exchange(ctx, osend, orecv, (size_t)chunk);
    if (rc)
        return rc;
    unpack_heads<<<grid_for(W * chunk), 256, 0, ctx->stream>>>(orecv, y, Ls, H, Hl, Dv, W);
    return pk_uly_cuda(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 8 || c->n_dims < 4)
        return -1;
    const bf16 *a[7];
    for (int i = 0; i < 7; i++)
        a[i] = static_cast<const bf16 *>(c->args[i]);
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], static_cast<bf16 *>(c->args[7]),
        (size_t)c->dims[0], (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
