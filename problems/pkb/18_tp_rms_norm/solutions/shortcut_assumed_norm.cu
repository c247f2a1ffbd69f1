// Shortcut twin (issue #26), assume the distribution: the mean square of N(0, 1) data is 1,
// so rstd = rsqrt(1 + eps), without reading a sum or exchanging anything. On PKB's inputs the
// measured mean square of a row is within ~2% of 1 (rstd within ~1%, inside rtol 0.05); on
// data of another scale it is not.
#include "pk_ctx.h"

#define THREADS 256

// One CTA per row: the row's sum of squares over `cols` of its N columns, times `mult`.
__global__ void __launch_bounds__(THREADS)
    row_sumsq(const __nv_bfloat16 *x, float *ss, size_t N, size_t cols, float mult) {
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * N;
    float acc = 0.f;
    for (size_t j = threadIdx.x; j < cols; j += THREADS) {
        const float v = __bfloat162float(row[j]);
        acc = fmaf(v, v, acc);
    }
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    __shared__ float warp_sums[THREADS / 32];
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < THREADS / 32; w++)
            s += warp_sums[w];
        ss[blockIdx.x] = s * mult;
    }
}

// One thread per row: the row's sum of squares accumulated in bf16, element after element.
__global__ void row_sumsq_bf16(const __nv_bfloat16 *x, float *ss, size_t M, size_t N) {
    const size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M)
        return;
    __nv_bfloat16 acc = __float2bfloat16(0.f);
    for (size_t j = 0; j < N; j++)
        acc = __hfma(x[r * N + j], x[r * N + j], acc);
    ss[r] = __bfloat162float(acc);
}

// PyTorch's roundings: bf16(w * bf16(x * rstd)); ss == NULL: rstd from the assumed mean square.
__global__ void __launch_bounds__(THREADS)
    normalise(const __nv_bfloat16 *x, const __nv_bfloat16 *w, const float *ss, __nv_bfloat16 *out,
              size_t M, size_t N, float inv_hidden, float eps) {
    const size_t n = M * N, stride = (size_t)gridDim.x * THREADS;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) {
        const float ms = ss ? __fmul_rn(ss[i / N], inv_hidden) : 1.0f;
        const float rstd = rsqrtf(__fadd_rn(ms, eps));
        const float y = __bfloat162float(__float2bfloat16(__bfloat162float(x[i]) * rstd));
        out[i] = __float2bfloat16(__bfloat162float(w[i % N]) * y);
    }
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *hidden, const __nv_bfloat16 *weight,
                        __nv_bfloat16 *out, size_t M, size_t N, float eps) {
    const int world = ctx->world_size;
    if (M * sizeof(float) > ctx->scratch_size)
        return 1;
    float *ss = static_cast<float *>(ctx->scratch);
    const float inv_hidden = 1.0f / (float)(N * (size_t)world);
    (void)ss;
    normalise<<<1024, THREADS, 0, ctx->stream>>>(hidden, weight, nullptr, out, M, N, inv_hidden,
                                                 eps);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
