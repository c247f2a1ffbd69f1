// Format error: the entry point has the wrong name (solution_v2 instead of the required one).
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution_v2(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    memcpy(y, x, n * sizeof *y);
    return 0;
}
