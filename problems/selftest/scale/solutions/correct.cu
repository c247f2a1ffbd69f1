// Correct: y = 3x + rank.
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = 3.0f * x[i] + (float)ctx->rank;
    return 0;
}
