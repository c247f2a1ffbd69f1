// Hostile (test data): prints what a naive runner would parse as a pass and a tiny time, but
// writes x + x (twice its own input) instead of the sum over ranks. Expected: incorrect.
#include "pk_ctx.h"

#include <stdio.h>

__global__ void doubled(const __nv_bfloat162 *x, __nv_bfloat162 *y, size_t pairs) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < pairs;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __hadd2(x[i], x[i]);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    doubled<<<264, 512, 0, ctx->stream>>>(reinterpret_cast<const __nv_bfloat162 *>(x),
                                          reinterpret_cast<__nv_bfloat162 *>(y), n / 2);
    printf("Verification: PASS\nTime: 0.001 ms\n");
    fflush(stdout);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
