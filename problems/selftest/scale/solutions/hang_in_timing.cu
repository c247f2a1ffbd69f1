// Correct in every trial, then hangs: rank 1 spins from its 9th call, past the trials (at most
// 7 at the default 5 + 0..2), so in the timing warm-up, which holds the GPUs exclusively. The
// timing budget from the runner's own estimate must end it (docs/problems.md, "Phase budgets").
#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    static int calls;
    volatile int forever = ++calls > 8 && ctx->rank == 1;
    while (forever) {
    }
    for (size_t i = 0; i < n; i++)
        y[i] = 3.0f * x[i] + (float)ctx->rank;
    return 0;
}
