// Shortcut twin (issue 26, skip the exchange): the correct kernels, but the gradient reduce-scatter
// is skipped: each rank's shard is updated with this rank's own gradient (the mean over its rows)
// in place of the mean over all ranks. On i.i.d. N(0, 1) batches the two differ by a fraction of
// the gradient, which the moments' update (0.1 g, 0.001 g^2) and the step (lr = 1e-3) shrink below
// the outputs' tolerances; batches whose rows differ in scale between ranks do not. Expected:
// incorrect.
#include "pk_ctx.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda/atomic>
#include <math.h>

typedef __nv_bfloat16 bf16;

#define THREADS 256
#define FUSED_THREADS 512
#define CS_ROWS 64

__device__ __forceinline__ float r16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float f32(bf16 x) {
    return __bfloat162float(x);
}

struct dims {
    int rows, d_in, hidden, d_out;
    size_t off_b1() const {
        return (size_t)hidden * d_in;
    }
    size_t off_W2() const {
        return off_b1() + hidden;
    }
    size_t off_b2() const {
        return off_W2() + (size_t)d_out * hidden;
    }
    size_t P() const {
        return off_b2() + d_out;
    }
};

// ---- per-rank state, made on the first call and kept (the dims never change) ----
static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_ws;
static const size_t WS = 32u << 20;
static char *g_buf;
static size_t g_buf_bytes;
static bf16 *g_full; // the gathered parameters
static int g_sms;

struct lt_linear { // cuBLASLt matmul with a bias (+relu) epilogue, planned once
    int ready;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
};
static lt_linear g_l1, g_l2;

static int plan(lt_linear *l, int m, int n, int k, cublasLtEpilogue_t epi) {
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (cublasLtMatmulDescCreate(&l->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
        cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ||
        cublasLtMatrixLayoutCreate(&l->a, CUDA_R_16BF, k, m, k) ||
        cublasLtMatrixLayoutCreate(&l->b, CUDA_R_16BF, k, n, k) ||
        cublasLtMatrixLayoutCreate(&l->d, CUDA_R_16BF, m, n, m))
        return 1;
    cublasLtMatmulPreference_t pref;
    size_t ws = WS;
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (cublasLtMatmulPreferenceCreate(&pref))
        return 1;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                         sizeof ws);
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(g_lt, l->op, l->a, l->b, l->d, l->d, pref, 1, &h, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found < 1)
        return 1;
    l->algo = h.algo;
    l->ready = 1;
    return 0;
}

// y (n x m, row-major) = epi(x (n x k) W^T + bias), W (m x k) row-major.
static int linear(lt_linear *l, cudaStream_t s, const bf16 *W, const bf16 *x, const bf16 *bias,
                  bf16 *y) {
    const float one = 1.f, zero = 0.f;
    if (cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                       sizeof bias))
        return 1;
    return cublasLtMatmul(g_lt, l->op, &one, W, l->a, x, l->b, &zero, y, l->d, y, l->d, &l->algo,
                          g_ws, WS, s) != CUBLAS_STATUS_SUCCESS;
}

static int gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const bf16 *A,
                int lda, const bf16 *B, int ldb, bf16 *C, int ldc) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g_blas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb,
                        &zero, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS;
}

// Elementwise backward op fused with the partial column sums of its result (the bias
// gradient): one pass over the (rows x cols) matrix. MSE: x = out, aux = y, the result is
// bf16(bf16(alpha * bf16(out - y))). ReLU: x = dL/dh, aux = h, the result is x where h > 0.
template <bool MSE>
__global__ void __launch_bounds__(THREADS)
    backward_colsum(bf16 *x, const bf16 *aux, float *part, int rows, int cols, float alpha) {
    const int j = blockIdx.x * THREADS + threadIdx.x;
    if (j >= cols)
        return;
    const int r0 = blockIdx.y * CS_ROWS, r1 = min(rows, r0 + CS_ROWS);
    float s = 0.f;
    for (int i = r0; i < r1; i++) {
        const size_t e = (size_t)i * cols + j;
        float g;
        if (MSE) {
            g = r16(alpha * r16(f32(x[e]) - f32(aux[e])));
            x[e] = __float2bfloat16_rn(g);
        } else {
            g = f32(aux[e]) > 0.f ? f32(x[e]) : 0.f;
            if (g != f32(x[e]))
                x[e] = __float2bfloat16_rn(g);
        }
        s += g;
    }
    part[(size_t)blockIdx.y * cols + j] = s;
}

__global__ void __launch_bounds__(THREADS)
    colsum_final(const float *part, int chunks, int cols, bf16 *out) {
    const int j = blockIdx.x * THREADS + threadIdx.x;
    if (j >= cols)
        return;
    float s = 0.f;
    for (int c = 0; c < chunks; c++)
        s += part[(size_t)c * cols + j];
    out[j] = __float2bfloat16_rn(s);
}

template <bool MSE>
static int backward_bias(cudaStream_t s, bf16 *x, const bf16 *aux, float *part, int rows, int cols,
                         float alpha, bf16 *gbias) {
    const int chunks = (rows + CS_ROWS - 1) / CS_ROWS;
    backward_colsum<MSE><<<dim3((cols + THREADS - 1) / THREADS, chunks), THREADS, 0, s>>>(
        x, aux, part, rows, cols, alpha);
    colsum_final<<<(cols + THREADS - 1) / THREADS, THREADS, 0, s>>>(part, chunks, cols, gbias);
    return cudaGetLastError() != cudaSuccess;
}

// Flat gradient of this rank's rows into `grad` (the symmetric scratch).
static int grads(cudaStream_t s, const dims &d, const bf16 *X, const bf16 *y, const bf16 *p,
                 bf16 *grad) {
    const size_t rh = (size_t)d.rows * d.hidden, ro = (size_t)d.rows * d.d_out;
    bf16 *h = reinterpret_cast<bf16 *>(g_buf), *gh = h + rh, *go = gh + rh;
    float *part = reinterpret_cast<float *>(g_buf + ((2 * (2 * rh + ro) + 255) & ~(size_t)255));
    const bf16 *W1 = p, *b1 = p + d.off_b1(), *W2 = p + d.off_W2(), *b2 = p + d.off_b2();
    if (cublasSetStream(g_blas, s) || linear(&g_l1, s, W1, X, b1, h) ||
        linear(&g_l2, s, W2, h, b2, go))
        return 1;
    const float alpha = __bfloat162float(__float2bfloat16_rn((float)(2.0 / (double)ro)));
    if (backward_bias<true>(s, go, y, part, d.rows, d.d_out, alpha, grad + d.off_b2()) ||
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, d.hidden, d.d_out, d.rows, h, d.hidden, go, d.d_out,
             grad + d.off_W2(), d.hidden) ||
        gemm(CUBLAS_OP_N, CUBLAS_OP_N, d.hidden, d.rows, d.d_out, W2, d.hidden, go, d.d_out, gh,
             d.hidden) ||
        backward_bias<false>(s, gh, h, part, d.rows, d.hidden, 0.f, grad + d.off_b1()) ||
        gemm(CUBLAS_OP_N, CUBLAS_OP_T, d.d_in, d.hidden, d.rows, X, d.d_in, gh, d.hidden, grad,
             d.d_in))
        return 2;
    return 0;
}

static int setup(const pk_ctx *ctx, const dims &d) {
    const size_t rh = (size_t)d.rows * d.hidden, ro = (size_t)d.rows * d.d_out;
    const size_t chunks = (d.rows + CS_ROWS - 1) / CS_ROWS;
    const size_t need = ((2 * (2 * rh + ro) + 255) & ~(size_t)255) +
                        4 * chunks * (d.hidden > d.d_out ? d.hidden : d.d_out);
    if (g_buf && g_buf_bytes >= need)
        return 0;
    if (!g_blas && (cublasCreate(&g_blas) || cublasLtCreate(&g_lt) || cudaMalloc(&g_ws, WS) ||
                    plan(&g_l1, d.hidden, d.rows, d.d_in, CUBLASLT_EPILOGUE_RELU_BIAS) ||
                    plan(&g_l2, d.d_out, d.rows, d.hidden, CUBLASLT_EPILOGUE_BIAS) ||
                    cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, ctx->device)))
        return 1;
    cudaFree(g_buf);
    cudaFree(g_full);
    g_buf = NULL;
    g_full = NULL;
    if (cudaMalloc(&g_buf, need) || cudaMalloc(&g_full, 2 * d.P()))
        return 1;
    g_buf_bytes = need;
    return 0;
}

// ---- the fused reduce + Adam + scatter kernel ----
struct consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc1, inv_bc2, eps, neg_lr, inv_world,
        neg_lr_wd;
};

struct shards {
    const uint4 *src[PK_MAX_RANKS]; // every rank's flat_param_shard (its input), rank order
};

// full[q*part : (q+1)*part] = rank q's shard. The barrier: every peer is in this call, so its
// input is valid. No barrier after: a peer's input stays valid until its stream passes the
// fused kernel's second barrier, which waits for this rank, i.e. after this copy.
__global__ void __launch_bounds__(FUSED_THREADS)
    gather_params(ncclDevComm comm, shards sh, uint4 *full, int world, size_t part_vecs) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const size_t n = part_vecs * world;
    for (size_t i = (size_t)blockIdx.x * FUSED_THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * FUSED_THREADS)
        full[i] = sh.src[i / part_vecs][i % part_vecs];
}

struct grads_of {
    const uint4 *grad[PK_MAX_RANKS]; // every rank's local gradient (scratch), rank order
};

// Vectors [lo, lo + n) of the flat vector are this rank's shard; the shard arrays are indexed
// from 0.
__global__ void __launch_bounds__(FUSED_THREADS)
    reduce_adam(ncclDevComm comm, grads_of gr, const uint4 *theta0, const uint4 *m_in,
                const uint4 *v_in, uint4 *theta_out, uint4 *m_out, uint4 *v_out, int world,
                size_t lo, size_t n, consts c) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    // Every rank's gradient is complete.
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (size_t i = (size_t)blockIdx.x * FUSED_THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * FUSED_THREADS) {
        float gs[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        { // this rank's gradient stands for the mean over the ranks: no exchange
            const uint4 t = gr.grad[0][lo + i];
            const bf16 *b = reinterpret_cast<const bf16 *>(&t);
#pragma unroll
            for (int k = 0; k < 8; k++)
                gs[k] += f32(b[k]);
        }
        const uint4 tv = theta0[i], mv = m_in[i], vv = v_in[i];
        const bf16 *tb = reinterpret_cast<const bf16 *>(&tv),
                   *mb = reinterpret_cast<const bf16 *>(&mv),
                   *vb = reinterpret_cast<const bf16 *>(&vv);
        uint4 to, mo, vo;
        bf16 *tob = reinterpret_cast<bf16 *>(&to), *mob = reinterpret_cast<bf16 *>(&mo),
             *vob = reinterpret_cast<bf16 *>(&vo);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float g = r16(r16(gs[k]) * c.inv_world); // reduced in bf16, then div_(W)
            const float m = r16(fmaf(c.one_minus_beta1, g, r16(f32(mb[k]) * c.beta1)));
            const float v = r16(fmaf(c.one_minus_beta2, g * g, r16(f32(vb[k]) * c.beta2)));
            const float m_hat = r16(m * c.inv_bc1), v_hat = r16(v * c.inv_bc2);
            const float denom = r16(r16(__fsqrt_rn(v_hat)) + c.eps);
            const float q = r16(__fdiv_rn(m_hat, denom));
            const float t0 = f32(tb[k]);
            tob[k] = __float2bfloat16_rn(fmaf(c.neg_lr_wd, t0, r16(fmaf(c.neg_lr, q, t0))));
            mob[k] = __float2bfloat16_rn(m);
            vob[k] = __float2bfloat16_rn(v);
        }
        theta_out[i] = to;
        m_out[i] = mo;
        v_out[i] = vo;
    }
    // Every peer is done reading our scratch (and, through gather_params, our input shard).
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *X_local, const bf16 *y_local,
                        const bf16 *flat_param_shard, const bf16 *exp_avg_shard,
                        const bf16 *exp_avg_sq_shard, bf16 *theta_out, bf16 *exp_avg_out,
                        bf16 *exp_avg_sq_out, size_t rows, size_t d_in, size_t hidden, size_t d_out,
                        double lr, double beta1, double beta2, double eps, double weight_decay,
                        int step) {
    const dims d = {(int)rows, (int)d_in, (int)hidden, (int)d_out};
    const size_t P = d.P();
    const int world = ctx->world_size;
    const size_t part = P / world;
    // 16-byte vectors: P, every segment offset and every shard are multiples of 8.
    if (step < 1 || hidden % 8 || d_in % 8 || d_out % 8 || part % 8 || part * world != P ||
        2 * P > ctx->scratch_size)
        return 1;
    if (setup(ctx, d))
        return 2;
    const int grid = g_sms < ctx->lsa_barrier_count ? g_sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    shards sh = {};
    grads_of gr = {};
    bf16 *grad = static_cast<bf16 *>(ctx->scratch);
    for (int q = 0; q < world; q++) {
        sh.src[q] = static_cast<const uint4 *>(pk_peer(ctx, flat_param_shard, q));
        gr.grad[q] = reinterpret_cast<const uint4 *>(grad); // our own, never a peer's
    }
    gather_params<<<grid, FUSED_THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, sh, reinterpret_cast<uint4 *>(g_full), world, part / 8);
    if (cudaGetLastError() != cudaSuccess || grads(ctx->stream, d, X_local, y_local, g_full, grad))
        return 4;
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
    const consts c = {(float)beta1,
                      (float)(1.0 - beta1),
                      (float)beta2,
                      (float)(1.0 - beta2),
                      (float)(1.0 / bc1),
                      (float)(1.0 / bc2),
                      (float)eps,
                      (float)(-lr),
                      1.0f /* a local mean already */,
                      (float)(-lr * weight_decay)};
    reduce_adam<<<grid, FUSED_THREADS, 0, ctx->stream>>>(
        ctx->dev_comm, gr, reinterpret_cast<const uint4 *>(flat_param_shard),
        reinterpret_cast<const uint4 *>(exp_avg_shard),
        reinterpret_cast<const uint4 *>(exp_avg_sq_shard), reinterpret_cast<uint4 *>(theta_out),
        reinterpret_cast<uint4 *>(exp_avg_out), reinterpret_cast<uint4 *>(exp_avg_sq_out), world,
        (size_t)ctx->rank * (part / 8), part / 8, c);
    return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
