// Shortcut twin (issue 26, skip the exchange): the correct kernel, but the Frobenius norm that
// starts the iteration comes from this rank's own column block, scaled by W (the trace of the
// local partial Gram x W), as a kernel that drops the reference's norm all-reduce would do. On
// i.i.d. N(0, 1) blocks the two agree to ~0.1% (one sigma); a norm off by more than ~5e-4 moves
// over 5% of the bf16 outputs by one ulp or some by more (host simulation), so this fails today
// unless all 5 trials land within that (~0.5% of runs at W = 2). Blocks with different scales
// per rank make it fail by far. Expected: incorrect.
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>
#include <math.h>

static const double k_quintic[5][3] = {{4.0848, -6.8946, 2.9270},
                                       {3.9505, -6.3029, 2.6377},
                                       {3.7418, -5.5913, 2.3037},
                                       {2.8769, -3.1427, 1.2046},
                                       {2.8366, -3.0525, 1.2012}};

static cublasHandle_t g_blas;
static unsigned long long g_steps; // Gram reductions so far: same count on every rank

struct Partials {
    const float4 *p[PK_MAX_RANKS];
};

__global__ void to_f32(const __nv_bfloat16 *x, float *x32, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x32[i] = __bfloat162float(x[i]);
}

__global__ void to_bf16(const float *x32, __nv_bfloat16 *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x32[i]);
}

// G = sum over ranks of the partials (rank order). With `first`, also ns = trace(G) (every CTA
// computes it the same way), G /= ns, and scal = {1/sqrt(ns), a/sqrt(ns)} for the update GEMM.
__global__ void __launch_bounds__(512)
    reduce_gram(ncclDevComm comm, Partials parts, const float *own, int world, int R, float *G,
                int first, float a, float *scal) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel); // every rank's partial is written
    float scale = 1.f;
    if (first) {
        __shared__ float red[512];
        float t = 0.f;
        for (int i = threadIdx.x; i < R; i += blockDim.x) // this rank's columns stand for all
            t += own[(size_t)i * R + i] * (float)world;
        red[threadIdx.x] = t;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s)
                red[threadIdx.x] += red[threadIdx.x + s];
            __syncthreads();
        }
        const float nrm = fmaxf(sqrtf(red[0]), 1e-7f);
        scale = 1.f / (nrm * nrm);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            scal[0] = 1.f / nrm;
            scal[1] = a / nrm;
        }
    }
    const size_t n4 = (size_t)R * R / 4;
    float4 *g4 = reinterpret_cast<float4 *>(G);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = parts.p[0][i];
        for (int q = 1; q < world; q++) {
            float4 w = parts.p[q][i];
            v.x += w.x;
            v.y += w.y;
            v.z += w.z;
            v.w += w.w;
        }
        if (first) {
            v.x *= scale;
            v.y *= scale;
            v.z *= scale;
            v.w *= scale;
        }
        g4[i] = v;
    }
}

static int gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                const float *a, int lda, const float *b, int ldb, const float *beta, float *c,
                int ldc) {
    return cublasSgemm(g_blas, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) ==
                   CUBLAS_STATUS_SUCCESS
               ? 0
               : 1;
}

extern "C" int solution_init(const pk_ctx *ctx) {
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cublasSetStream(g_blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) // no TF32
        return 1;
    return 0;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (g_blas)
        cublasDestroy(g_blas);
    g_blas = NULL;
    return 0;
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t rows,
                        size_t cols) {
    const int R = (int)rows, world = ctx->world_size, lc = (int)(cols / (size_t)world);
    const size_t n = (size_t)R * lc, rr = (size_t)R * R;
    // scratch: partial G x 2 (symmetric, read by peers), G, U, x32 x 2, scalars
    const size_t need = (4 * rr + 2 * n + 64) * sizeof(float);
    if (!g_blas || need > ctx->scratch_size || rr % 4 != 0)
        return 1;
    float *part[2] = {static_cast<float *>(ctx->scratch), static_cast<float *>(ctx->scratch) + rr};
    float *G = part[1] + rr, *U = G + rr, *xa = U + rr, *xb = xa + n, *scal = xb + n;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 2;
    const float one = 1.f, zero = 0.f;
    to_f32<<<1024, 256, 0, ctx->stream>>>(x, xa, n);
    int rc = cudaGetLastError() == cudaSuccess ? 0 : 3;
    for (int s = 0; s < 5 && !rc; s++) {
        const float a = (float)k_quintic[s][0], b = (float)k_quintic[s][1],
                    c = (float)k_quintic[s][2];
        float *mine = part[g_steps++ & 1ull];
        rc = gemm(CUBLAS_OP_T, CUBLAS_OP_N, R, R, lc, &one, xa, lc, xa, lc, &zero, mine, R);
        if (rc)
            break;
        Partials parts = {};
        for (int q = 0; q < world; q++)
            parts.p[q] = static_cast<const float4 *>(pk_peer(ctx, mine, q));
        reduce_gram<<<grid, 512, 0, ctx->stream>>>(ctx->dev_comm, parts, mine, world, R, G, s == 0,
                                                   a, scal);
        if (cudaGetLastError() != cudaSuccess)
            return 4;
        // U = b G + c G G
        if (cudaMemcpyAsync(U, G, rr * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream) !=
            cudaSuccess)
            return 5;
        rc = gemm(CUBLAS_OP_N, CUBLAS_OP_N, R, R, R, &c, G, R, G, R, &b, U, R);
        if (rc)
            break;
        // x' = a x + U x (step 0: both scaled by 1/sqrt(ns), from device memory)
        if (cudaMemcpyAsync(xb, xa, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream) !=
            cudaSuccess)
            return 6;
        if (s == 0) {
            cublasSetPointerMode(g_blas, CUBLAS_POINTER_MODE_DEVICE);
            rc = gemm(CUBLAS_OP_N, CUBLAS_OP_N, lc, R, R, &scal[0], xa, lc, U, R, &scal[1], xb, lc);
            cublasSetPointerMode(g_blas, CUBLAS_POINTER_MODE_HOST);
        } else {
            rc = gemm(CUBLAS_OP_N, CUBLAS_OP_N, lc, R, R, &one, xa, lc, U, R, &a, xb, lc);
        }
        float *t = xa;
        xa = xb;
        xb = t;
    }
    if (rc)
        return 7;
    to_bf16<<<1024, 256, 0, ctx->stream>>>(xa, y, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 8;
}
