// Shortcut twin (issue 26, assume the distribution): the correct kernels, but each row's
// log-sum-exp is not measured: logits ~ N(0, 1) give E sum exp = V e^(1/2), so the kernel uses
// ln V + 1/2 and reads only the label's logit. On these inputs the true value is within ~0.03 of
// it; any other scale of the logits (or a peaked row) moves it by O(1). Expected: incorrect.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>

#define CE_THREADS 512
#define RED_THREADS 1024
#define ROW_VALS 8
#define SLOT 8 // floats per rank in the exchange

enum { V_PG = 0, V_WCE, V_RATIO, V_K3, V_ENT, V_MIN, V_MAX, V_VALID };

static cublasHandle_t g_blas;

extern "C" int solution_init(const pk_ctx *ctx) {
    (void)ctx;
    return cublasCreate(&g_blas) == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    (void)ctx;
    if (g_blas)
        cublasDestroy(g_blas);
    g_blas = NULL;
    return 0;
}

__device__ __forceinline__ float bf(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

template <int T, bool MAX> __device__ __forceinline__ float block_reduce(float v) {
    __shared__ float part[T / 32];
    __shared__ float result;
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = MAX ? fmaxf(v, o) : v + o;
    }
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = part[0];
        for (int w = 1; w < T / 32; w++)
            r = MAX ? fmaxf(r, part[w]) : r + part[w];
        result = r;
    }
    __syncthreads();
    const float out = result;
    __syncthreads();
    return out;
}

// One CTA per row: max and sum of expf in fp32 over the bf16 logits, log-prob of the label
// rounded to bf16, then the per-token ops, each rounded to bf16 as PyTorch's.
__global__ void __launch_bounds__(CE_THREADS)
    token_values(const __nv_bfloat16 *logits, size_t V, const int64_t *labels, int64_t ignore,
                 const __nv_bfloat16 *old_logprobs, const __nv_bfloat16 *advantages,
                 __nv_bfloat16 *logprobs, __nv_bfloat16 *pg_out, float *vals) {
    const size_t row = blockIdx.x;
    const uint4 *x = reinterpret_cast<const uint4 *>(logits + row * V);
    const size_t vecs = V / 8;
    (void)x;
    (void)vecs;
    if (threadIdx.x != 0)
        return;
    // E[sum of exp] of V N(0, 1) logits is V e^(1/2): the normaliser without reading the row
    const float mx = 0.0f, s = (float)V * 1.6487212707001282f;
    const int64_t label = labels[row];
    const bool valid = label != ignore;
    const float lp =
        valid ? bf(__fsub_rn(__fsub_rn(__bfloat162float(logits[row * V + label]), mx), logf(s)))
              : 0.0f;
    const float ce = valid ? -lp : 0.0f, nw = -ce;
    const float old = __bfloat162float(old_logprobs[row]), adv = __bfloat162float(advantages[row]);
    const float delta = valid ? fminf(fmaxf(bf(__fsub_rn(nw, old)), -20.0f), 20.0f) : 0.0f;
    const float ratio = bf(expf(delta));
    const float t = bf(__fmul_rn(ratio, adv));
    float *v = vals + row * ROW_VALS;
    v[V_PG] = valid ? -t : -0.0f;
    v[V_WCE] = bf(__fmul_rn(valid ? t : 0.0f, ce));
    v[V_RATIO] = valid ? ratio : 0.0f;
    v[V_K3] = valid ? bf(__fsub_rn(bf(__fsub_rn(ratio, delta)), 1.0f)) : 0.0f;
    v[V_ENT] = valid ? ce : 0.0f;
    v[V_MIN] = valid ? ratio : INFINITY;
    v[V_MAX] = valid ? ratio : -INFINITY;
    v[V_VALID] = valid ? 1.0f : 0.0f;
    logprobs[row] = __float2bfloat16_rn(nw);
    pg_out[row] = __float2bfloat16_rn(v[V_PG]);
}

struct Slots {
    float *peer[PK_MAX_RANKS]; // our slot in rank q's exchange area
};

// Slot layout: n_valid, pg, ratio, min, max, k3, entropy (bf16-rounded values, as floats).
__global__ void __launch_bounds__(RED_THREADS)
    reduce_exchange(ncclDevComm comm, const float *vals, size_t M, Slots slots, const float *area,
                    int world, float *loss, float *metrics) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    float acc[5] = {0, 0, 0, 0, 0}, mn = INFINITY, mxv = -INFINITY, cnt = 0.0f;
    for (size_t r = threadIdx.x; r < M; r += RED_THREADS) {
        const float *v = vals + r * ROW_VALS;
        for (int k = 0; k < 5; k++)
            acc[k] += v[k];
        mn = fminf(mn, v[V_MIN]);
        mxv = fmaxf(mxv, v[V_MAX]);
        cnt += v[V_VALID];
    }
    for (int k = 0; k < 5; k++)
        acc[k] = block_reduce<RED_THREADS, false>(acc[k]);
    mn = -block_reduce<RED_THREADS, true>(-mn);
    mxv = block_reduce<RED_THREADS, true>(mxv);
    cnt = block_reduce<RED_THREADS, false>(cnt);
    const float surrogate_local = bf(acc[V_WCE]);
    if (threadIdx.x < world) {
        float *d = slots.peer[threadIdx.x];
        d[0] = cnt;
        d[1] = bf(acc[V_PG]);
        d[2] = bf(acc[V_RATIO]);
        d[3] = bf(mn);
        d[4] = bf(mxv);
        d[5] = bf(acc[V_K3]);
        d[6] = bf(acc[V_ENT]);
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        float g[7];
        for (int k = 0; k < 7; k++)
            g[k] = area[k];
        for (int q = 1; q < world; q++) {
            const float *s = area + q * SLOT;
            g[0] = __fadd_rn(g[0], s[0]);
            g[1] = __fadd_rn(g[1], s[1]);
            g[2] = __fadd_rn(g[2], s[2]);
            g[3] = fminf(g[3], s[3]);
            g[4] = fmaxf(g[4], s[4]);
            g[5] = __fadd_rn(g[5], s[5]);
            g[6] = __fadd_rn(g[6], s[6]);
        }
        const float n = fmaxf(g[0], 1.0f);
        const float true_pg = __fdiv_rn(bf(g[1]), n), surrogate = __fdiv_rn(surrogate_local, n);
        *loss = __fsub_rn(__fadd_rn(true_pg, surrogate), surrogate);
        metrics[0] = __fdiv_rn(bf(g[2]), n);
        metrics[1] = g[3];
        metrics[2] = g[4];
        metrics[3] = __fdiv_rn(bf(g[5]), n);
        metrics[4] = __fdiv_rn(bf(g[6]), n);
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *hidden_states,
                        const __nv_bfloat16 *weight, const int64_t *labels,
                        const __nv_bfloat16 *old_logprobs, const __nv_bfloat16 *advantages,
                        float *loss, __nv_bfloat16 *per_token_logprobs,
                        __nv_bfloat16 *per_token_loss, float *metrics, size_t M, size_t N, size_t V,
                        int64_t ignore_index) {
    const int world = ctx->world_size;
    // Scratch: logits (M x V bf16), per-token values, the exchange area (SLOT floats per rank).
    const size_t logits_bytes = M * V * sizeof(__nv_bfloat16);
    const size_t vals_bytes = M * ROW_VALS * sizeof(float);
    if (!g_blas || V % 8 != 0 || ctx->lsa_barrier_count < 1 ||
        logits_bytes + vals_bytes + PK_MAX_RANKS * SLOT * sizeof(float) > ctx->scratch_size)
        return 1;
    char *scratch = static_cast<char *>(ctx->scratch);
    __nv_bfloat16 *logits = reinterpret_cast<__nv_bfloat16 *>(scratch);
    float *vals = reinterpret_cast<float *>(scratch + logits_bytes);
    float *area = reinterpret_cast<float *>(scratch + logits_bytes + vals_bytes);
    const float one = 1.0f, zero = 0.0f;
    if (cublasSetStream(g_blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)V, (int)M, (int)N, &one, weight,
                     CUDA_R_16BF, (int)N, hidden_states, CUDA_R_16BF, (int)N, &zero, logits,
                     CUDA_R_16BF, (int)V, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
        return 2;
    token_values<<<(unsigned)M, CE_THREADS, 0, ctx->stream>>>(
        logits, V, labels, ignore_index, old_logprobs, advantages, per_token_logprobs,
        per_token_loss, vals);
    Slots slots = {};
    for (int q = 0; q < world; q++)
        slots.peer[q] = static_cast<float *>(pk_peer(ctx, area + ctx->rank * SLOT, q));
    reduce_exchange<<<1, RED_THREADS, 0, ctx->stream>>>(ctx->dev_comm, vals, M, slots, area, world,
                                                        loss, metrics);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
