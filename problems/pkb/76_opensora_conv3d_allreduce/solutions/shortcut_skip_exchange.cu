// Shortcut twin (issue #26, "skip the exchange"): no communication at all. Each rank computes
// its own partial convolution (correct.cu's im2col and one GEMM with K = 27 Cl, fp32
// accumulation) scaled by W (alpha = W: the local partial standing for the sum of the W
// partials), rounds it to bf16 and adds the bias. It fails on every input, i.i.d. ones included:
// the W partials are convolutions of independent input-channel slices with independent weight
// slices, so no rank's partial estimates the sum (the error is ~sqrt(W - 1) to W times the
// output's rms under iid, rank and peaked data, against a tolerance of 0.1 rms:
// bench/pkb/sim_76_opensora_conv3d_allreduce.c).
#include "pk_ctx.h"

#include <cublas_v2.h>

typedef __nv_bfloat16 bf16;

#define BLAS_WS_BYTES ((size_t)32 << 20)

static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;
static bf16 *g_col;
static size_t g_col_bytes;

extern "C" int solution_init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_blas)
        return 0;
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&g_blas_ws, BLAS_WS_BYTES) != cudaSuccess)
        return 1;
    return 0;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    cudaStreamSynchronize(ctx->stream);
    if (g_blas)
        cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    cudaFree(g_col);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
    g_col = NULL;
    g_col_bytes = 0;
    return 0;
}

static int blas_on(cudaStream_t s) {
    if (g_blas_stream == s)
        return 0;
    if (cublasSetStream(g_blas, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g_blas, g_blas_ws, BLAS_WS_BYTES) != CUBLAS_STATUS_SUCCESS)
        return 1;
    g_blas_stream = s;
    return 0;
}

// col[k][p] (ld P), k = 27 ci + 9 dt + 3 dy + dx: x[ci][t + dt][i + dy][j + dx].
__global__ void im2col(const bf16 *x, bf16 *col, long long Cl, long long T, long long Hh,
                       long long Wd) {
    const long long Ho = Hh - 2, Wo = Wd - 2, plane = Ho * Wo, P = (T - 2) * plane, n = 27 * Cl * P;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        const long long k = e / P, p = e % P, ci = k / 27, tap = k % 27;
        const long long t = p / plane, i = p % plane / Wo, j = p % Wo;
        col[e] = x[((ci * T + t + tap / 9) * Hh + i + tap / 3 % 3) * Wd + j + tap % 3];
    }
}

__global__ void add_bias(bf16 *y, const bf16 *bias, long long P, long long n) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x)
        y[e] = __float2bfloat16(__bfloat162float(y[e]) + __bfloat162float(bias[e / P]));
}

static unsigned blocks_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 16384 ? b : 16384);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *x, const bf16 *weight, const bf16 *bias,
                        bf16 *y, size_t Co, size_t Cl, size_t T, size_t Hh, size_t Wd) {
    if (solution_init(ctx) || blas_on(ctx->stream))
        return 1;
    const long long P = (long long)(T - 2) * (long long)(Hh - 2) * (long long)(Wd - 2),
                    K = 27LL * (long long)Cl, ny = (long long)Co * P;
    const size_t col_bytes = (size_t)(K * P) * sizeof(bf16);
    if (g_col_bytes < col_bytes) {
        cudaFree(g_col);
        g_col = NULL;
        g_col_bytes = 0;
        if (cudaMalloc(&g_col, col_bytes) != cudaSuccess)
            return 2;
        g_col_bytes = col_bytes;
    }
    cudaStream_t s = ctx->stream;
    im2col<<<blocks_for(K * P), 256, 0, s>>>(x, g_col, (long long)Cl, (long long)T, (long long)Hh,
                                             (long long)Wd);
    const float alpha = (float)ctx->world_size, zero = 0.f;
    if (cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, (int)Co, (int)K, &alpha, g_col,
                     CUDA_R_16BF, (int)P, weight, CUDA_R_16BF, (int)K, &zero, y, CUDA_R_16BF,
                     (int)P, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
        return 3;
    add_bias<<<blocks_for(ny), 256, 0, s>>>(y, bias, P, ny);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
