// pkb/74_fla_kimi_delta_attention_cp_tp (ParallelKernelBench problem 74): Kimi delta attention
// (FLA's KDA: the gated delta rule with a decay per key channel) over a sequence split across a
// context-parallel group, inside a tensor-parallel pair. W ranks = TP tp x CP W / tp in
// Megatron's 'tp-cp' order (rank = cp_rank tp + tp_rank), tp = 2 at W >= 4, 1 at W = 2: the CP
// groups are {t, t + tp, ...}, the TP pairs {2c, 2c + 1}. Rank r holds its tokens (Ls of them)
// of q, k (Ls x H x Dk), v (Ls x H x Dv), g (Ls x H x Dk), beta (Ls x H), bf16, and a_log (H),
// dt_bias (H Dk), the same on every rank. Its CP group's sequence is its ranks' tokens in CP
// order (S = cp Ls); for every head, with the state S_h (Dk x Dv, fp32, zero at the start),
//   kn = k / |k|, qn = q / |q| Dk^-1/2, d_i = exp(-5 sigmoid(exp(a_log[h]) (g_i + dt_bias[h][i]))),
//   S_h <- diag(d) S_h;  u = (v - kn^T S_h) sigmoid(beta);  S_h <- S_h + kn u^T;  o = qn^T S_h,
// o rounded to bf16; then the sum over the TP pair (bf16 all-reduce), and rank r keeps its own
// tokens: y = bf16(o_mine + o_partner) at its CP position (y = o_mine at W = 2).
#include "pk_problem_module.h"

#include <cuda_bf16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t, size_t, size_t,
                        size_t);

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
            st[r] *= dk[g * R + r];
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

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// The TP and CP sub-communicators (split once in init(), as pkb/55) and the gathered sequence
// (plain memory, made in the first reference call).
static struct {
    ncclComm_t tp, cp;
    int tp_size;
    bf16 *seq;
    size_t seq_bytes;
} g;

static int tp_size_of(int world) {
    return world >= 4 && world % 2 == 0 ? 2 : 1;
}

static int init(const pk_ctx *ctx) {
    if (g.cp)
        return 0;
    g.tp_size = tp_size_of(ctx->world_size);
    const int tp = g.tp_size;
    int rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank % tp, ctx->rank, &g.cp, NULL));
    if (!rc && tp > 1)
        rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank / tp, ctx->rank, &g.tp, NULL));
    return rc;
}

static void fini(const pk_ctx *ctx) {
    if (g.cp)
        ncclCommDestroy(g.cp);
    if (g.tp)
        ncclCommDestroy(g.tp);
    cudaFree(g.seq);
    g.cp = g.tp = NULL;
    g.seq = NULL;
    g.seq_bytes = 0;
}

// Baseline, PKB's steps: the CP all-gather of q, k, v, g and beta (PKB's all_gather_into_tensor,
// batch 1: the sequence in CP order), the recurrence of every head (one CTA per head and 32
// state columns, the fp32 state slice in registers) up to the end of this rank's tokens (PKB
// runs on to the end of the sequence and slices; the later tokens do not reach this rank's
// output), this rank's tokens' outputs written to y, then the TP all-reduce of y (bf16).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long Ls = call->dims[0], H = call->dims[1], Dk = call->dims[2], Dv = call->dims[3];
    const bf16 *in[5];
    for (int i = 0; i < 5; i++)
        in[i] = static_cast<const bf16 *>(call->args[i]);
    const bf16 *a_log = static_cast<const bf16 *>(call->args[5]);
    const bf16 *dt_bias = static_cast<const bf16 *>(call->args[6]);
    bf16 *y = static_cast<bf16 *>(call->args[7]);
    int rc = init(ctx);
    if (rc)
        return rc;
    const int tp = g.tp_size, cp = ctx->world_size / tp, cp_rank = ctx->rank / tp;
    const long long D[5] = {Dk, Dk, Dv, Dk, 1}, S = cp * Ls;
    long long total = 0;
    for (int i = 0; i < 5; i++)
        total += (S + Ls) * H * D[i]; // the gathered sequence and a plain copy of our tokens
    if (g.seq_bytes < (size_t)total * sizeof(bf16)) {
        cudaFree(g.seq);
        g.seq = NULL;
        g.seq_bytes = 0;
        rc = cuda_code(cudaMalloc(&g.seq, (size_t)total * sizeof(bf16)));
        if (rc)
            return rc;
        g.seq_bytes = (size_t)total * sizeof(bf16);
    }
    // Our tokens are copied out of the arena first: NCCL 2.28 can hang between the windowed
    // arena and plain memory (docs/problems.md, known issues), so the all-gather runs plain to
    // plain.
    bf16 *full[5], *mine[5], *p = g.seq;
    for (int i = 0; i < 5 && !rc; i++) {
        full[i] = p;
        p += S * H * D[i];
        mine[i] = p;
        p += Ls * H * D[i];
        rc = cuda_code(cudaMemcpyAsync(mine[i], in[i], (size_t)(Ls * H * D[i]) * sizeof(bf16),
                                       cudaMemcpyDeviceToDevice, ctx->stream));
    }
    if (!rc) {
        rc = nccl_code(ncclGroupStart());
        if (!rc) {
            for (int i = 0; i < 5 && !rc; i++)
                rc = nccl_code(ncclAllGather(mine[i], full[i], (size_t)(Ls * H * D[i]),
                                             ncclBfloat16, g.cp, ctx->stream));
            const int end_rc = nccl_code(ncclGroupEnd());
            rc = rc ? rc : end_rc;
        }
    }
    if (rc)
        return rc;
    const dim3 grid((unsigned)H, (unsigned)((Dv + COLS - 1) / COLS));
    kda<<<grid, GROUPS * COLS, 0, ctx->stream>>>(
        full[0], full[1], full[2], full[3], full[4], a_log, dt_bias, y, (int)(cp_rank * Ls),
        (int)((cp_rank + 1) * Ls), (int)H, (int)Dk, (int)Dv);
    rc = cuda_code(cudaGetLastError());
    if (!rc && tp > 1)
        rc = nccl_code(
            ncclAllReduce(y, y, (size_t)(Ls * H * Dv), ncclBfloat16, ncclSum, g.tp, ctx->stream));
    return rc;
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
