// Subtly wrong: adds rank + 1 on the last rank only.
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    int extra = ctx->rank == ctx->world_size - 1 ? 1 : 0;
    for (size_t i = 0; i < n; i++)
        y[i] = 3.0f * x[i] + (float)(ctx->rank + extra);
    return 0;
}
