// pkb/63_deepmd_kalman_filter_optimizer (ParallelKernelBench problem 63): one step of DeePMD's
// Kalman filter optimizer over a model split across ranks (fp64). Rank r holds nb blocks of
// `block` weights w_i, their gradients H_i (block x 1), their error covariances P_i (block x
// block, symmetric positive definite) and its error e (a scalar); with lam = kalman_lambda:
//   tmp = sum over ranks of sum_i (lam + H_i^T P_i H_i)    (lam counted per block and rank: PKB)
//   A = 1 / tmp;  K_i = P_i H_i
//   w_i' = w_i + (A e) K_i;  P_i' = (1 / lam) (P_i - A (K_i K_i^T))
// then every rank's updated weights are all-gathered (weights_out: W nb blocks, rank order),
// P' stays local, and lambda_next = nue lam + 1 - nue. PyTorch's rounding points are kept (A e
// first; K K^T, A times it, the difference and 1/lam each rounded), in fp64.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cublas_v2.h>
#include <math.h>

typedef int (*entry_fn)(const pk_ctx *, const double *, const double *, const double *,
                        const double *, double *, double *, double *, size_t, size_t, double,
                        double);

#define THREADS 256

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}
static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

// cuBLAS handle (init()); the reference's buffers, sized on the first call (a correctness
// trial, which every rank makes): K (nb x block) in plain memory, the all-reduced tmp in its
// own registered window (NCCL 2.28 can hang between registered and plain memory:
// docs/problems.md, known issues).
static cublasHandle_t g_blas;
static cudaStream_t g_blas_stream;
static struct {
    double *K;
    size_t K_bytes;
    double *tmp;
    ncclWindow_t win;
} g_ref;

static int init(const pk_ctx *ctx) {
    if (g_blas)
        return 0;
    int rc = blas_code(cublasCreate(&g_blas));
    if (!rc)
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.tmp, 256));
    if (!rc)
        rc = nccl_code(
            ncclCommWindowRegister(ctx->comm, g_ref.tmp, 256, &g_ref.win, NCCL_WIN_COLL_SYMMETRIC));
    return rc;
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.tmp) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.tmp);
    }
    cudaFree(g_ref.K);
    g_ref = {};
    if (g_blas)
        cublasDestroy(g_blas);
    g_blas = NULL;
    g_blas_stream = NULL;
}

__device__ double block_sum(double v) {
    __shared__ double part[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < THREADS / 32; w++)
        s += part[w];
    return s;
}

// tmp = sum_i (lam + H_i . K_i), the blocks in order (PKB: tmp = tmp + (lam + H^T P H)); one CTA.
__global__ void local_tmp(const double *H, const double *K, long long nb, long long block,
                          double lam, double *tmp) {
    double t = 0.0;
    for (long long i = 0; i < nb; i++) {
        double s = 0.0;
        for (long long a = threadIdx.x; a < block; a += THREADS)
            s += H[i * block + a] * K[i * block + a];
        s = block_sum(s);
        t = t + (lam + s);
    }
    if (threadIdx.x == 0)
        *tmp = t;
}

// w' = w + (A e) K into this rank's slot of weights_out, A = 1 / tmp.
__global__ void update_weights(const double *w, const double *K, const double *tmp,
                               const double *err, double *wout, long long n) {
    const double A = 1.0 / *tmp, c = A * *err;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        wout[i] = w[i] + c * K[i];
}

// P' = (1/lam) (P - A (K K^T)), per block.
__global__ void update_P(const double *P, const double *K, const double *tmp, double *Pout,
                         long long nb, long long block, double rlam) {
    const double A = 1.0 / *tmp;
    const long long bb = block * block, n = nb * bb;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const long long i = e / bb, a = e / block % block, b = e % block;
        const double kk = K[i * block + a] * K[i * block + b];
        Pout[e] = rlam * (P[e] - A * kk);
    }
}

__global__ void set_value(double *p, double v) {
    *p = v;
}

static unsigned grid_for(long long n) {
    const long long b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 4 * 132 * 8 ? b : 4 * 132 * 8);
}

// Baseline, PKB's steps one after another: K_i = P_i H_i (cuBLAS, one strided-batched dgemv:
// what torch.matmul calls), the local tmp, an NCCL all-reduce of it, the weights' update into
// this rank's slot of weights_out, the covariances' update (one pass over P), an in-place NCCL
// all-gather of the weights, lambda_next. PKB computes H^T P H as (H^T P) H, a second pass over
// P; P is symmetric (bit for bit, by construction), so H . (P H) is the same number up to fp64
// rounding.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long nb = call->dims[0], block = call->dims[1], n = nb * block;
    const double lam = call->params[0], nue = call->params[1];
    const double *H = static_cast<const double *>(call->args[0]);
    const double *err = static_cast<const double *>(call->args[1]);
    const double *w = static_cast<const double *>(call->args[2]);
    const double *P = static_cast<const double *>(call->args[3]);
    double *wout = static_cast<double *>(call->args[4]);
    double *Pout = static_cast<double *>(call->args[5]);
    double *lnext = static_cast<double *>(call->args[6]);
    cudaStream_t s = ctx->stream;
    int rc = 0;
    if (g_ref.K_bytes < (size_t)n * sizeof(double)) {
        cudaFree(g_ref.K);
        g_ref.K = NULL;
        g_ref.K_bytes = 0;
        rc = cuda_code(cudaMalloc((void **)&g_ref.K, (size_t)n * sizeof(double)));
        if (rc)
            return rc;
        g_ref.K_bytes = (size_t)n * sizeof(double);
    }
    if (g_blas_stream != s) {
        rc = blas_code(cublasSetStream(g_blas, s));
        if (rc)
            return rc;
        g_blas_stream = s;
    }
    const double one = 1.0, zero = 0.0;
    // row-major P_i is column-major P_i^T: K = (P^T)^T H
    rc = blas_code(cublasDgemvStridedBatched(g_blas, CUBLAS_OP_T, (int)block, (int)block, &one, P,
                                             (int)block, block * block, H, 1, block, &zero, g_ref.K,
                                             1, block, (int)nb));
    if (rc)
        return rc;
    local_tmp<<<1, THREADS, 0, s>>>(H, g_ref.K, nb, block, lam, g_ref.tmp);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclAllReduce(g_ref.tmp, g_ref.tmp, 1, ncclDouble, ncclSum, ctx->comm, s));
    if (rc)
        return rc;
    double *mine = wout + (long long)ctx->rank * n;
    update_weights<<<grid_for(n), THREADS, 0, s>>>(w, g_ref.K, g_ref.tmp, err, mine, n);
    update_P<<<grid_for(nb * block * block), THREADS, 0, s>>>(P, g_ref.K, g_ref.tmp, Pout, nb,
                                                              block, 1.0 / lam);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclAllGather(mine, wout, (size_t)n, ncclDouble, ctx->comm, s));
    if (rc)
        return rc;
    set_value<<<1, 1, 0, s>>>(lnext, nue * lam + 1.0 - nue);
    return cuda_code(cudaGetLastError());
}

// generate(): P_i = c (I + D_i + u_i u_i^T) on odd call keys, symmetric positive definite and
// dense, with c, the diagonal D_i >= 0 and the vector u_i drawn per (call, rank, block); the
// identity (PKB's P, every step's first) on even keys. P[a][b] and P[b][a] are computed by the
// same expression, so P is symmetric bit for bit. From (seed, key, rank) alone.
__global__ void make_P(double *P, long long nb, long long block, uint64_t k, int dense) {
    const long long bb = block * block, n = nb * bb;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const long long i = e / bb, a = e / block % block, b = e % block;
        double v = a == b ? 1.0 : 0.0;
        if (dense) {
            const uint64_t ki = pk_splitmix64(k + (uint64_t)i);
            const double c = exp2(-2.0 + 4.0 * pk_splitmix_unit(ki)),
                         amp = 0.5 + 2.5 * pk_splitmix_unit(ki + 1);
            const long long lo = a < b ? a : b, hi = a < b ? b : a;
            const double ua = pk_splitmix_unit(ki + 100 + (uint64_t)lo) - 0.5,
                         ub = pk_splitmix_unit(ki + 100 + (uint64_t)hi) - 0.5;
            const double d = a == b ? 3.0 * pk_splitmix_unit(ki + 100 + (uint64_t)block + a) : 0.0;
            v = c * (v + d + amp * ua * ub * 4.0 / sqrt((double)block) * 8.0);
        }
        P[e] = v;
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const long long nb = call->dims[0], block = call->dims[1];
    const uint64_t k = pk_splitmix64(seed ^ pk_splitmix64(0x63ca1ull << 32 ^ (uint64_t)key)) +
                       1000003ull * (uint64_t)call->ctx->rank;
    make_P<<<grid_for(nb * block * block), THREADS, 0, call->ctx->stream>>>(
        static_cast<double *>(call->args[3]), nb, block, k, key % 2 != 0);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 7 || c->n_dims < 2 || c->n_params < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const double *>(c->args[0]), static_cast<const double *>(c->args[1]),
        static_cast<const double *>(c->args[2]), static_cast<const double *>(c->args[3]),
        static_cast<double *>(c->args[4]), static_cast<double *>(c->args[5]),
        static_cast<double *>(c->args[6]), (size_t)c->dims[0], (size_t)c->dims[1], c->params[0],
        c->params[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
