// pkb/25_importance_sampling_loss (ParallelKernelBench 25): a PPO-style importance-sampling loss
// on top of an LM head. Per rank: logits = hidden_states @ weight^T (bf16), per-token log-probs
// of the labels, ratios against old log-probs, a token-weighted policy-gradient loss over all
// ranks, and five metrics (mean, min and max ratio, mean k3 KL estimate, mean entropy proxy).
//
// PyTorch's rounding points are kept: logits are bf16 (cuBLAS, fp32 accumulation); log_softmax
// computes max, sum of expf and logf in fp32 and rounds log-probs to bf16; every elementwise
// op on bf16 tensors computes in fp32 and rounds to bf16 once; sums of bf16 tensors accumulate in
// fp32 and round to bf16; the all-reduces are NCCL's, in PKB's order and dtypes (count fp32 sum;
// pg, ratio, k3 and entropy sums bf16; min and max bf16); a bf16 0-dim sum divided by the fp32
// count is an fp32 division.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                        const int64_t *, const __nv_bfloat16 *, const __nv_bfloat16 *, float *,
                        __nv_bfloat16 *, __nv_bfloat16 *, float *, size_t, size_t, size_t, int64_t);

#define CE_THREADS 512
#define RED_THREADS 1024
#define ROW_VALS 8 // per-token values the reductions need

// Per-token values, in ROW_VALS floats per row.
enum { V_PG = 0, V_WCE, V_RATIO, V_K3, V_ENT, V_MIN, V_MAX, V_VALID };

// Scalars that are all-reduced, in the module's registered buffer.
struct Scalars {
    float n_valid;                       // fp32 sum
    __nv_bfloat16 pg, ratio, rmin, rmax; // bf16 sum, sum, min, max
    __nv_bfloat16 k3, ent;               // bf16 sums
    __nv_bfloat16 surrogate;             // local only
};

__device__ __forceinline__ float bf(float v) { // one bf16 rounding
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
    __syncthreads(); // `result` may be reused by the next call
    return out;
}

// One CTA per row: log-softmax of the bf16 logits at the label (two passes, as PyTorch's),
// then the per-token chain of ops of PKB's solution(), each rounded to bf16.
__global__ void __launch_bounds__(CE_THREADS)
    cross_entropy_rows(const __nv_bfloat16 *logits, size_t V, const int64_t *labels,
                       int64_t ignore_index, const __nv_bfloat16 *old_logprobs,
                       const __nv_bfloat16 *advantages, __nv_bfloat16 *logprobs,
                       __nv_bfloat16 *pg_out, float *vals) {
    const size_t row = blockIdx.x;
    const uint4 *x = reinterpret_cast<const uint4 *>(logits + row * V);
    const size_t vecs = V / 8;
    float mx = -INFINITY;
    for (size_t i = threadIdx.x; i < vecs; i += CE_THREADS) {
        const uint4 raw = x[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            mx = fmaxf(mx, fmaxf(f.x, f.y));
        }
    }
    mx = block_reduce<CE_THREADS, true>(mx);
    float s = 0.0f;
    for (size_t i = threadIdx.x; i < vecs; i += CE_THREADS) {
        const uint4 raw = x[i];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float2 f = __bfloat1622float2(h[k]);
            s += expf(f.x - mx);
            s += expf(f.y - mx);
        }
    }
    s = block_reduce<CE_THREADS, false>(s);
    if (threadIdx.x != 0)
        return;
    const int64_t label = labels[row];
    const bool valid = label != ignore_index;
    // ce = -log_softmax[label] (0 where ignored); new log-prob = -ce.
    const float lp =
        valid ? bf(__fsub_rn(__fsub_rn(__bfloat162float(logits[row * V + label]), mx), logf(s)))
              : 0.0f;
    const float ce = valid ? -lp : 0.0f;
    const float nw = -ce;
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

// One CTA: the local sums (fp32, rounded to bf16 as a bf16 tensor's sum is), min, max, count.
__global__ void __launch_bounds__(RED_THREADS)
    local_reductions(const float *vals, size_t M, Scalars *sc) {
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
    if (threadIdx.x == 0) {
        sc->n_valid = cnt;
        sc->pg = __float2bfloat16_rn(acc[V_PG]);
        sc->surrogate = __float2bfloat16_rn(acc[V_WCE]);
        sc->ratio = __float2bfloat16_rn(acc[V_RATIO]);
        sc->k3 = __float2bfloat16_rn(acc[V_K3]);
        sc->ent = __float2bfloat16_rn(acc[V_ENT]);
        sc->rmin = __float2bfloat16_rn(mn);
        sc->rmax = __float2bfloat16_rn(mxv);
    }
}

// After the all-reduces: loss = (true_pg + surrogate) - surrogate, and the metrics.
__global__ void finish(const Scalars *sc, float *loss, float *metrics) {
    const float n = fmaxf(sc->n_valid, 1.0f);
    const float true_pg = __fdiv_rn(__bfloat162float(sc->pg), n);
    const float surrogate = __fdiv_rn(__bfloat162float(sc->surrogate), n);
    *loss = __fsub_rn(__fadd_rn(true_pg, surrogate), surrogate);
    metrics[0] = __fdiv_rn(__bfloat162float(sc->ratio), n);
    metrics[1] = __bfloat162float(sc->rmin);
    metrics[2] = __bfloat162float(sc->rmax);
    metrics[3] = __fdiv_rn(__bfloat162float(sc->k3), n);
    metrics[4] = __fdiv_rn(__bfloat162float(sc->ent), n);
}

// The module's buffers, made on the first call (a correctness trial, never timed): the bf16
// logits and per-token values (cudaMalloc; PyTorch's caching allocator keeps such buffers too)
// and the all-reduced scalars (ncclMemAlloc, registered as an NCCL window like the harness's
// reference outputs). cuBLAS's handle is made then too, unless init() made it.
static cublasHandle_t g_blas;
static void *g_work, *g_scalars;
static size_t g_work_bytes;
static ncclWindow_t g_win;
static ncclComm_t g_comm;

static void release(void) {
    if (g_scalars) {
        ncclCommWindowDeregister(g_comm, g_win);
        ncclMemFree(g_scalars);
    }
    if (g_work)
        cudaFree(g_work);
    if (g_blas)
        cublasDestroy(g_blas);
    g_scalars = g_work = NULL;
    g_blas = NULL;
    g_work_bytes = 0;
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    return g_blas || cublasCreate(&g_blas) == CUBLAS_STATUS_SUCCESS ? 0 : 3000;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    release();
}

static int buffers(const pk_ctx *ctx, size_t work_bytes) {
    if (init(ctx))
        return 3000;
    if (!g_scalars) {
        ncclResult_t e = ncclMemAlloc(&g_scalars, sizeof(Scalars));
        if (e == ncclSuccess)
            e = ncclCommWindowRegister(ctx->comm, g_scalars, sizeof(Scalars), &g_win,
                                       NCCL_WIN_COLL_SYMMETRIC);
        if (e != ncclSuccess) {
            if (g_scalars)
                ncclMemFree(g_scalars);
            g_scalars = NULL;
            return 1000 + (int)e;
        }
        g_comm = ctx->comm;
    }
    if (g_work_bytes < work_bytes) {
        if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
            return 2000;
        if (g_work)
            cudaFree(g_work);
        g_work = NULL;
        g_work_bytes = 0;
        if (cudaMalloc(&g_work, work_bytes) != cudaSuccess)
            return 2000;
        g_work_bytes = work_bytes;
    }
    return 0;
}

static int64_t ignore_index_of(const pk_problem_call *call) {
    return call->n_params > 0 ? (int64_t)call->params[0] : -100;
}

// Baseline, as PKB's solution() without its host sync (`n_valid_local > 0` is decided on the
// device): the cuBLAS GEMM, the cross-entropy and per-token kernel, the local reductions, seven
// host-driven NCCL all-reduces of one value each (PKB's order and dtypes), the finishing kernel.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0], N = (size_t)call->dims[1], V = (size_t)call->dims[2];
    const size_t logits_bytes = M * V * sizeof(__nv_bfloat16);
    int rc = buffers(ctx, logits_bytes + M * ROW_VALS * sizeof(float));
    if (rc)
        return rc;
    __nv_bfloat16 *logits = static_cast<__nv_bfloat16 *>(g_work);
    float *vals = reinterpret_cast<float *>(static_cast<char *>(g_work) + logits_bytes);
    Scalars *sc = static_cast<Scalars *>(g_scalars);
    const float one = 1.0f, zero = 0.0f;
    // Row-major logits[M x V] = hs[M x N] . weight[V x N]^T, i.e. column-major
    // logits^T[V x M] = weight^T . hs^T, as PyTorch issues it.
    if (cublasSetStream(g_blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasGemmEx(g_blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)V, (int)M, (int)N, &one, call->args[1],
                     CUDA_R_16BF, (int)N, call->args[0], CUDA_R_16BF, (int)N, &zero, logits,
                     CUDA_R_16BF, (int)V, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
        return 3000;
    cross_entropy_rows<<<(unsigned)M, CE_THREADS, 0, ctx->stream>>>(
        logits, V, static_cast<const int64_t *>(call->args[2]), ignore_index_of(call),
        static_cast<const __nv_bfloat16 *>(call->args[3]),
        static_cast<const __nv_bfloat16 *>(call->args[4]),
        static_cast<__nv_bfloat16 *>(call->args[6]), static_cast<__nv_bfloat16 *>(call->args[7]),
        vals);
    local_reductions<<<1, RED_THREADS, 0, ctx->stream>>>(vals, M, sc);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    const struct {
        void *p;
        ncclDataType_t t;
        ncclRedOp_t op;
    } ar[7] = {{&sc->n_valid, ncclFloat32, ncclSum}, {&sc->pg, ncclBfloat16, ncclSum},
               {&sc->ratio, ncclBfloat16, ncclSum},  {&sc->rmin, ncclBfloat16, ncclMin},
               {&sc->rmax, ncclBfloat16, ncclMax},   {&sc->k3, ncclBfloat16, ncclSum},
               {&sc->ent, ncclBfloat16, ncclSum}};
    for (int i = 0; i < 7; i++) {
        ncclResult_t e =
            ncclAllReduce(ar[i].p, ar[i].p, 1, ar[i].t, ar[i].op, ctx->comm, ctx->stream);
        if (e != ncclSuccess)
            return 1000 + (int)e;
    }
    finish<<<1, 1, 0, ctx->stream>>>(sc, static_cast<float *>(call->args[5]),
                                     static_cast<float *>(call->args[8]));
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 9 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const __nv_bfloat16 *>(c->args[1]), static_cast<const int64_t *>(c->args[2]),
        static_cast<const __nv_bfloat16 *>(c->args[3]),
        static_cast<const __nv_bfloat16 *>(c->args[4]), static_cast<float *>(c->args[5]),
        static_cast<__nv_bfloat16 *>(c->args[6]), static_cast<__nv_bfloat16 *>(c->args[7]),
        static_cast<float *>(c->args[8]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], ignore_index_of(c));
}

// Labels beyond the generic generator (index(V)): PKB never ignores a token. Here, for call keys
// with key % 4 != 0, each token but the first is set to ignore_index with probability 1/8 (a
// function of (seed, key, rank, token)), so the masks and the global token count matter; no rank
// is ever left without a valid token (PKB's solution() would then all-reduce a min/max of another
// dtype on that rank).
__global__ void gen_ignore(int64_t *labels, size_t M, uint64_t key, int64_t ignore_index) {
    for (size_t i = 1 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < M;
         i += (size_t)gridDim.x * blockDim.x)
        if (pk_splitmix64(key + i) % 8 == 0)
            labels[i] = ignore_index;
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    if (key % 4 == 0)
        return 0;
    const pk_ctx *ctx = call->ctx;
    const size_t M = call->counts[2];
    const uint64_t k =
        pk_splitmix64(seed ^ pk_splitmix64((uint64_t)(unsigned)key * 64 + (uint64_t)ctx->rank));
    gen_ignore<<<(unsigned)((M + 255) / 256), 256, 0, ctx->stream>>>(
        static_cast<int64_t *>(call->args[2]), M, k, ignore_index_of(call));
    return cudaGetLastError() == cudaSuccess ? 0 : 2000;
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
