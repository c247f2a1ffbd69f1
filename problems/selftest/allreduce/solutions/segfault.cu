// Crashes: rank 1 writes through a null pointer.
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    volatile float *bad = ctx->rank == 1 ? (float *)0 : y;
    for (size_t i = 0; i < n; i++)
        bad[i] = x[i];
    return 0;
}
