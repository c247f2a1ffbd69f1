// Shortcut (incorrect): skips the halo exchange and pads every shard with zeros, as if each
// rank's shard were the whole image (no communication at all). On smooth images zero or
// replicated padding at the shard edges is a small error; here it is not, on any input (i.i.d.
// ones included): the halo row carries 3 of the 9 kernel taps, a third of the output's variance
// at the first and last rows of every shard (errors ~60 against a tolerance of ~2.7).
#include "pk_ctx.h"

#include <cublas_v2.h>
#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 256
#define BLAS_WS_BYTES ((size_t)32 << 20)

static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;
static bf16 *g_xs, *g_wr; // shifted copies [dx][ci][H + 2][Wd]; weight [dy][co][dx C + ci]
static float *g_acc;      // [co][H Wd]
static size_t g_xs_bytes, g_wr_bytes, g_acc_bytes;

static int grow(void **p, size_t *have, size_t bytes) {
    if (*have >= bytes)
        return 0;
    cudaFree(*p);
    *p = NULL;
    *have = 0;
    if (cudaMalloc(p, bytes) != cudaSuccess)
        return 1;
    *have = bytes;
    return 0;
}

extern "C" int solution_init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_blas)
        return 0;
    if (cublasCreate(&g_blas) != CUBLAS_STATUS_SUCCESS ||
        cudaMalloc(&g_blas_ws, BLAS_WS_BYTES) != cudaSuccess)
        return 1;
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

__device__ __forceinline__ long long clamp_rows(long long h, long long H) {
    return h < 1 ? 1 : h > H ? H : h;
}

// xs[dx][ci][t][j] = xp[ci][t][j + dx - 1] (zero outside the image), xp = [top; shard; bottom;
// zeros], t < H + 2. The halo rows are read from the neighbours' x in place (NVLink loads).
__global__ void __launch_bounds__(THREADS)
    pull_build(ncclDevComm comm, ncclWindow_t win, size_t x_off, size_t rows_off, const bf16 *x,
               const int64_t *rows, bf16 *xs, int me, int world, long long C, long long H,
               long long Wd) {
    __shared__ const bf16 *top, *bottom; // the halo rows of channel 0; NULL at the image's edge
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x == 0) {
        top = bottom = NULL;
        if (false) { // the exchange skipped: no halo from rank r-1
            const long long hq = clamp_rows(
                *static_cast<const int64_t *>(ncclGetLsaPointer(win, rows_off, me - 1)), H);
            top = static_cast<const bf16 *>(ncclGetLsaPointer(win, x_off, me - 1)) + (hq - 1) * Wd;
        }
        if (false) // nor from rank r+1
            bottom = static_cast<const bf16 *>(ncclGetLsaPointer(win, x_off, me + 1));
    }
    __syncthreads();
    const long long h = clamp_rows(*rows, H), plane = (H + 2) * Wd, n = 3 * C * plane;
    const bf16 zero = __float2bfloat16(0.f);
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        const long long dx = i / (C * plane), ci = i / plane % C, t = i % plane / Wd;
        const long long j = i % Wd + dx - 1;
        bf16 v = zero;
        if (j >= 0 && j < Wd) {
            if (t == 0)
                v = top ? top[ci * H * Wd + j] : zero;
            else if (t <= h)
                v = x[(ci * H + t - 1) * Wd + j];
            else if (t == h + 1)
                v = bottom ? bottom[ci * H * Wd + j] : zero;
        }
        xs[i] = v;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

__global__ void rearrange_weight(const bf16 *w, bf16 *wr, long long C) {
    const long long n = 9 * C * C;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long dy = i / (3 * C * C), co = i / (3 * C) % C, dx = i % (3 * C) / C,
                        ci = i % C;
        wr[i] = w[((co * C + ci) * 3 + dy) * 3 + dx];
    }
}

__global__ void bias_out(const float *acc, const int64_t *rows, const bf16 *bias, bf16 *y,
                         long long C, long long H, long long Wd) {
    const long long h = clamp_rows(*rows, H), n = C * H * Wd;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long co = i / (H * Wd), t = i % (H * Wd) / Wd;
        y[i] =
            t < h ? __float2bfloat16(acc[i] + __bfloat162float(bias[co])) : __float2bfloat16(0.f);
    }
}

static unsigned blocks_for(long long n) {
    const long long b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 8192 ? b : 8192);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *x, const int64_t *rows, const bf16 *weight,
                        const bf16 *bias, bf16 *y, size_t C, size_t H, size_t Wd) {
    if (solution_init(ctx) || blas_on(ctx->stream))
        return 1;
    if (grow((void **)&g_xs, &g_xs_bytes, 3 * C * (H + 2) * Wd * sizeof(bf16)) ||
        grow((void **)&g_wr, &g_wr_bytes, 9 * C * C * sizeof(bf16)) ||
        grow((void **)&g_acc, &g_acc_bytes, C * H * Wd * sizeof(float)))
        return 2;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 3;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 4;
    cudaStream_t s = ctx->stream;
    const long long c = (long long)C, h = (long long)H, wd = (long long)Wd;
    pull_build<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, x),
                                        pk_sym_offset(ctx, rows), x, rows, g_xs, ctx->rank,
                                        ctx->world_size, c, h, wd);
    rearrange_weight<<<blocks_for(9 * c * c), THREADS, 0, s>>>(weight, g_wr, c);
    if (cudaGetLastError() != cudaSuccess)
        return 5;
    const int P = (int)(H * Wd), K = (int)(3 * C), N = (int)C, lda = (int)((H + 2) * Wd);
    for (int dy = 0; dy < 3; dy++) {
        const float one = 1.f, beta = dy ? 1.f : 0.f;
        if (cublasGemmEx(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, P, N, K, &one, g_xs + (size_t)dy * Wd,
                         CUDA_R_16BF, lda, g_wr + (size_t)dy * C * K, CUDA_R_16BF, K, &beta, g_acc,
                         CUDA_R_32F, P, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT_TENSOR_OP) != CUBLAS_STATUS_SUCCESS)
            return 6;
    }
    bias_out<<<blocks_for(c * h * wd), THREADS, 0, s>>>(g_acc, rows, bias, y, c, h, wd);
    return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
