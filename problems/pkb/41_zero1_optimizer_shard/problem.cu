// pkb/41_zero1_optimizer_shard (ParallelKernelBench problem 41): a ZeRO-1 training step of a
// two-layer MLP (Linear -> ReLU -> Linear, MSE loss) with Adam. Rank 0's parameters are
// broadcast; every rank runs forward and backward on its own rows; the gradients are
// all-reduced and averaged; rank r keeps the Adam moments of partition r of the flat vector
// only, updates that partition (PyTorch's bf16 op-by-op rounding), and the updated partitions
// are all-gathered.
//
// Flat layout (PKB's _flatten_dense_tensors order): [W1 (hidden x d_in) | b1 (hidden) |
// W2 (d_out x hidden) | b2 (d_out)], row-major, P elements; partition r = [r*part, (r+1)*part).
#include "pk_problem_module.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, bf16 *, bf16 *, bf16 *, size_t, size_t, size_t, size_t,
                        double, double, double, double, int);

#define THREADS 256
#define COLSUM_ROWS 64 // rows per partial column sum (fixed order: deterministic)

__device__ __forceinline__ float r16(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}
__device__ __forceinline__ float f32(bf16 x) {
    return __bfloat162float(x);
}

static unsigned grid_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 132 * 16 ? (b ? b : 1) : 132 * 16);
}

// ---- The MLP's forward and backward on one rank (the same in problems 40, 41, 42, 47) ----

struct mlp_dims {
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

static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_lt_ws;
static const size_t LT_WS_BYTES = 32u << 20;
static void *g_buf; // activations, gradients and partial sums, grown on the first call
static size_t g_buf_bytes;

// Module init (once per rank, outside timing): cuBLAS handles and the cuBLASLt workspace.
static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS)
        return 1;
    return cudaMalloc(&g_lt_ws, LT_WS_BYTES) == cudaSuccess ? 0 : 2;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    cudaFree(g_buf);
    cudaFree(g_lt_ws);
    cublasLtDestroy(g_lt);
    cublasDestroy(g_blas);
    g_buf = g_lt_ws = NULL;
    g_buf_bytes = 0;
}

static void *workspace(size_t bytes) {
    if (bytes > g_buf_bytes) { // first call only (an untimed trial): the dims never change
        cudaFree(g_buf);
        g_buf_bytes = 0;
        if (cudaMalloc(&g_buf, bytes) != cudaSuccess)
            return NULL;
        g_buf_bytes = bytes;
    }
    return g_buf;
}

// F.linear(x, W, b) on a 2-D bf16 x is addmm, which PyTorch runs as one cuBLASLt matmul with
// the BIAS epilogue: y = bf16(x W^T + b), one rounding of the fp32 accumulator. Row-major
// y (n x m) is column-major y^T (m x n) = W (op T on W's storage) * x^T. RELU_BIAS also
// applies the ReLU that follows layer 1: relu commutes with that single rounding.
// Descriptors and the heuristic's algorithm are cached per call site (the dims never change).
struct lt_plan {
    int ready, m, n, k;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
};

static int linear_bias(lt_plan *pl, cudaStream_t s, int m, int n, int k, const bf16 *W,
                       const bf16 *x, const bf16 *bias, bf16 *y, cublasLtEpilogue_t epi) {
    if (!pl->ready || pl->m != m || pl->n != n || pl->k != k) {
        if (pl->ready) {
            cublasLtMatmulDescDestroy(pl->op);
            cublasLtMatrixLayoutDestroy(pl->a);
            cublasLtMatrixLayoutDestroy(pl->b);
            cublasLtMatrixLayoutDestroy(pl->d);
            pl->ready = 0;
        }
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        if (cublasLtMatmulDescCreate(&pl->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) ||
            cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
            cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
            cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                           sizeof epi) ||
            cublasLtMatrixLayoutCreate(&pl->a, CUDA_R_16BF, k, m, k) ||
            cublasLtMatrixLayoutCreate(&pl->b, CUDA_R_16BF, k, n, k) ||
            cublasLtMatrixLayoutCreate(&pl->d, CUDA_R_16BF, m, n, m))
            return 1;
        cublasLtMatmulPreference_t pref;
        size_t ws = LT_WS_BYTES;
        cublasLtMatmulHeuristicResult_t h;
        int found = 0;
        if (cublasLtMatmulPreferenceCreate(&pref))
            return 2;
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof ws);
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_lt, pl->op, pl->a, pl->b, pl->d, pl->d,
                                                           pref, 1, &h, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        if (st != CUBLAS_STATUS_SUCCESS || found < 1)
            return 3;
        pl->algo = h.algo;
        pl->m = m, pl->n = n, pl->k = k, pl->ready = 1;
    }
    if (cublasLtMatmulDescSetAttribute(pl->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                       sizeof bias))
        return 4;
    const float one = 1.f, zero = 0.f;
    return cublasLtMatmul(g_lt, pl->op, &one, W, pl->a, x, pl->b, &zero, y, pl->d, y, pl->d,
                          &pl->algo, g_lt_ws, LT_WS_BYTES, s) == CUBLAS_STATUS_SUCCESS
               ? 0
               : 5;
}

// Plain bf16 GEMM as torch.mm runs it (cublasGemmEx, fp32 accumulation, tensor cores):
// column-major C (m x n) = op(A) op(B).
static int gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const bf16 *A,
                int lda, const bf16 *B, int ldb, bf16 *C, int ldc) {
    const float one = 1.f, zero = 0.f;
    return cublasGemmEx(g_blas, ta, tb, m, n, k, &one, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb,
                        &zero, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT_TENSOR_OP) == CUBLAS_STATUS_SUCCESS
               ? 0
               : 6;
}

// F.mse_loss(out, y) (mean) backward with grad_output 1, as PyTorch's bf16 kernel computes
// it: alpha * (a - b) * c with every operand and result a c10::BFloat16 (each op rounds).
__global__ void __launch_bounds__(THREADS)
    mse_backward(bf16 *out_to_grad, const bf16 *y, size_t n, float alpha) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS) {
        const float d = r16(f32(out_to_grad[i]) - f32(y[i]));
        out_to_grad[i] = __float2bfloat16_rn(r16(alpha * d) * 1.0f);
    }
}

// ReLU backward (threshold_backward on the activation): the gradient where h > 0, else 0.
__global__ void __launch_bounds__(THREADS) relu_backward(bf16 *g, const bf16 *h, size_t n) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS)
        if (!(f32(h[i]) > 0.f))
            g[i] = __float2bfloat16_rn(0.f);
}

// Bias gradient = column sums of a row-major (rows x cols) bf16 matrix, fp32 accumulation,
// one bf16 rounding (PyTorch's grad.sum(0)). Two passes with a fixed order.
__global__ void __launch_bounds__(THREADS)
    colsum_partial(const bf16 *x, float *part, int rows, int cols) {
    const int j = blockIdx.x * THREADS + threadIdx.x;
    if (j >= cols)
        return;
    const int r0 = blockIdx.y * COLSUM_ROWS, r1 = min(rows, r0 + COLSUM_ROWS);
    float s = 0.f;
    for (int i = r0; i < r1; i++)
        s += f32(x[(size_t)i * cols + j]);
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

static int colsum(cudaStream_t s, const bf16 *x, float *part, int rows, int cols, bf16 *out) {
    const int chunks = (rows + COLSUM_ROWS - 1) / COLSUM_ROWS;
    const dim3 grid((cols + THREADS - 1) / THREADS, chunks);
    colsum_partial<<<grid, THREADS, 0, s>>>(x, part, rows, cols);
    colsum_final<<<(cols + THREADS - 1) / THREADS, THREADS, 0, s>>>(part, chunks, cols, out);
    return cudaGetLastError() == cudaSuccess ? 0 : 7;
}

static size_t mlp_workspace_bytes(const mlp_dims &d) {
    const size_t chunks = (d.rows + COLSUM_ROWS - 1) / COLSUM_ROWS;
    const size_t wide = d.hidden > d.d_out ? d.hidden : d.d_out;
    return 2 * (2 * (size_t)d.rows * d.hidden + (size_t)d.rows * d.d_out) + 4 * chunks * wide + 256;
}

static lt_plan g_plan1, g_plan2;

// loss = mse_loss(relu(F.linear(X, W1, b1)) -> F.linear(., W2, b2), y); loss.backward():
// writes the flat gradient [gW1 | gb1 | gW2 | gb2] of the rank's rows into `grad`. `work` holds
// mlp_workspace_bytes(d). Kernels and cuBLAS calls in PyTorch's order, one after another.
static int mlp_grads(cudaStream_t s, const mlp_dims &d, const bf16 *X, const bf16 *y, const bf16 *p,
                     bf16 *grad, void *work) {
    const size_t rh = (size_t)d.rows * d.hidden, ro = (size_t)d.rows * d.d_out;
    bf16 *h = static_cast<bf16 *>(work), *gh = h + rh, *go = gh + rh;
    float *part = reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(go + ro) + 255) &
                                            ~static_cast<uintptr_t>(255));
    const bf16 *W1 = p, *b1 = p + d.off_b1(), *W2 = p + d.off_W2(), *b2 = p + d.off_b2();
    bf16 *gW1 = grad, *gb1 = grad + d.off_b1(), *gW2 = grad + d.off_W2(), *gb2 = grad + d.off_b2();
    int rc;
    if (cublasSetStream(g_blas, s) != CUBLAS_STATUS_SUCCESS)
        return 8;
    // h = relu(X W1^T + b1): (rows x hidden); out = h W2^T + b2: (rows x d_out), kept in go.
    if ((rc = linear_bias(&g_plan1, s, d.hidden, d.rows, d.d_in, W1, X, b1, h,
                          CUBLASLT_EPILOGUE_RELU_BIAS)) ||
        (rc = linear_bias(&g_plan2, s, d.d_out, d.rows, d.hidden, W2, h, b2, go,
                          CUBLASLT_EPILOGUE_BIAS)))
        return 10 + rc;
    // d loss / d out, with PyTorch's bf16 constant 2 / numel.
    const float alpha = __bfloat162float(__float2bfloat16_rn((float)(2.0 / (double)ro)));
    mse_backward<<<grid_for(ro), THREADS, 0, s>>>(go, y, ro, alpha);
    if (cudaGetLastError() != cudaSuccess)
        return 20;
    // gb2 = sum over rows of go; gW2 = go^T h (d_out x hidden): column-major hidden x d_out.
    if ((rc = colsum(s, go, part, d.rows, d.d_out, gb2)) ||
        (rc = gemm(CUBLAS_OP_N, CUBLAS_OP_T, d.hidden, d.d_out, d.rows, h, d.hidden, go, d.d_out,
                   gW2, d.hidden)))
        return 30 + rc;
    // gh = go W2 (rows x hidden): column-major hidden x rows = W2^T(storage N) go^T(storage N).
    if ((rc = gemm(CUBLAS_OP_N, CUBLAS_OP_N, d.hidden, d.rows, d.d_out, W2, d.hidden, go, d.d_out,
                   gh, d.hidden)))
        return 40 + rc;
    relu_backward<<<grid_for(rh), THREADS, 0, s>>>(gh, h, rh);
    if (cudaGetLastError() != cudaSuccess)
        return 50;
    // gb1 = sum over rows of gh; gW1 = gh^T X (hidden x d_in): column-major d_in x hidden.
    if ((rc = colsum(s, gh, part, d.rows, d.hidden, gb1)) ||
        (rc = gemm(CUBLAS_OP_N, CUBLAS_OP_T, d.d_in, d.hidden, d.rows, X, d.d_in, gh, d.hidden, gW1,
                   d.d_in)))
        return 60 + rc;
    return 0;
}

// ---- Adam, PyTorch's bf16 chain (problems 40-43, 47) ----

// Every op computes in fp32 and rounds to bf16 once; a Python scalar enters as (float)scalar;
// division by a Python scalar multiplies by (float)(1.0 / scalar); tensor / tensor and sqrt
// are IEEE.
struct adam_consts {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, inv_bc1, inv_bc2, eps, neg_lr, inv_world;
};

static adam_consts make_consts(double lr, double beta1, double beta2, double eps, int step,
                               int world) {
    const double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step); // math.pow
    return {(float)beta1,         (float)(1.0 - beta1), (float)beta2,
            (float)(1.0 - beta2), (float)(1.0 / bc1),   (float)(1.0 / bc2),
            (float)eps,           (float)(-lr),         (float)(1.0 / world)};
}

// g = flat_grad.div_(world) of the summed gradient, then
//   m.mul_(beta1).add_(g, alpha=1-beta1); v.mul_(beta2).addcmul_(g, g, value=1-beta2)
//   p.add_((m / bc1).div((v / bc2).sqrt().add(eps)).mul(-lr))
// Outputs may alias inputs (each element is read before it is written, by the same thread).
__global__ void __launch_bounds__(THREADS)
    adam(const bf16 *p_in, const bf16 *m_in, const bf16 *v_in, const bf16 *grad_sum, bf16 *p_out,
         bf16 *m_out, bf16 *v_out, size_t n, adam_consts c) {
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (size_t)gridDim.x * THREADS) {
        const float g = r16(f32(grad_sum[i]) * c.inv_world);
        const float m = r16(fmaf(c.one_minus_beta1, g, r16(f32(m_in[i]) * c.beta1)));
        const float v = r16(fmaf(c.one_minus_beta2, g * g, r16(f32(v_in[i]) * c.beta2)));
        const float m_hat = r16(m * c.inv_bc1), v_hat = r16(v * c.inv_bc2);
        const float denom = r16(r16(__fsqrt_rn(v_hat)) + c.eps);
        const float step = r16(r16(__fdiv_rn(m_hat, denom)) * c.neg_lr);
        p_out[i] = __float2bfloat16_rn(f32(p_in[i]) + step);
        m_out[i] = __float2bfloat16_rn(m);
        v_out[i] = __float2bfloat16_rn(v);
    }
}

// ---- Problem 41 ----

// Baseline, in PKB's order: broadcast of the parameters from rank 0 into params_out, forward
// and backward, all-reduce of the flat gradient, Adam on this rank's partition (in place in
// params_out), in-place all-gather of the partitions.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const mlp_dims d = {(int)call->dims[4], (int)call->dims[1], (int)call->dims[2],
                        (int)call->dims[3]};
    const size_t P = d.P(), part = (size_t)call->dims[6];
    bf16 *p = static_cast<bf16 *>(call->args[5]);
    bf16 *mine = p + (size_t)ctx->rank * part;
    const size_t work_bytes = mlp_workspace_bytes(d);
    char *buf = static_cast<char *>(workspace(work_bytes + 2 * P + 256));
    if (!buf)
        return 3000;
    bf16 *grad = reinterpret_cast<bf16 *>(buf + ((work_bytes + 255) & ~(size_t)255));
    ncclResult_t r = ncclBroadcast(call->args[2], p, P, ncclBfloat16, 0, ctx->comm, ctx->stream);
    if (r != ncclSuccess)
        return 1000 + (int)r;
    int rc = mlp_grads(ctx->stream, d, static_cast<const bf16 *>(call->args[0]),
                       static_cast<const bf16 *>(call->args[1]), p, grad, buf);
    if (rc)
        return 2000 + rc;
    if ((r = ncclAllReduce(grad, grad, P, ncclBfloat16, ncclSum, ctx->comm, ctx->stream)))
        return 1000 + (int)r;
    adam<<<grid_for(part), THREADS, 0, ctx->stream>>>(
        mine, static_cast<const bf16 *>(call->args[3]), static_cast<const bf16 *>(call->args[4]),
        grad + (size_t)ctx->rank * part, mine, static_cast<bf16 *>(call->args[6]),
        static_cast<bf16 *>(call->args[7]), part,
        make_consts(call->params[0], call->params[1], call->params[2], call->params[3],
                    (int)call->params[4], ctx->world_size));
    if (cudaGetLastError() != cudaSuccess)
        return 2100;
    r = ncclAllGather(mine, p, part, ncclBfloat16, ctx->comm, ctx->stream);
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 8 || c->n_dims < 7 || c->n_params < 5)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<const bf16 *>(c->args[4]), static_cast<bf16 *>(c->args[5]),
        static_cast<bf16 *>(c->args[6]), static_cast<bf16 *>(c->args[7]), (size_t)c->dims[4],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3], c->params[0], c->params[1],
        c->params[2], c->params[3], (int)c->params[4]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, NULL};
    return &module;
}
