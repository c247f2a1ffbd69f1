// Hostile: returns its own input as the result.
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    memcpy(y, x, n * sizeof *y);
    return 0;
}
