// Hostile (test data): rank 1 never returns from its first call; the other ranks return at
// once without communicating. Expected: timeout naming rank 1.
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    volatile int spin = 1;
    while (ctx->rank == 1 && spin) {
    }
    return 0;
}
