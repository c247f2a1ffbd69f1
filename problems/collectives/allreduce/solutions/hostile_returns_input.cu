// Hostile (test data): copies this rank's x to y, no communication at all.
// Expected: incorrect.
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    return cudaMemcpyAsync(y, x, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToDevice,
                           ctx->stream) == cudaSuccess
               ? 0
               : 1;
}
