// Hostile (test data): hands the work to the library collective the task forbids.
// Expected: rejected (forbidden_call).
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n) {
    return ncclAllReduce(x, y, n, ncclBfloat16, ncclSum, ctx->comm, ctx->stream) == ncclSuccess ? 0
                                                                                                : 1;
}
