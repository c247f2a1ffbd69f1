// Does not compile: an undeclared identifier.
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] + undeclared_value;
    return 0;
}
