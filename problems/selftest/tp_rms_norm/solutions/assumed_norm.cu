// Shortcut twin (issue #26), assume the distribution: the mean square of N(0, 1) data is 1, so
// rstd = rsqrt(1 + eps) without reading the data or exchanging anything. On PKB's i.i.d.
// N(0, 1) inputs the measured mean square of 16384 values is within ~1% of 1; on data of
// another scale it is not.
#include <math.h>
#include <stdlib.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                        __nv_bfloat16 *out, size_t M, size_t N, float eps) {
    float *ss = static_cast<float *>(malloc(M * sizeof(float)));
    if (!ss)
        return 1;
    for (size_t i = 0; i < M; i++)
        ss[i] = (float)(N * (size_t)ctx->world_size); /* the shortcut: E[x^2] = 1 */
    int rc = 0;
    const float inv_hidden = 1.0f / (float)(N * (size_t)ctx->world_size);
    for (size_t i = 0; i < M && !rc; i++) {
        const float rstd = 1.0f / sqrtf(ss[i] * inv_hidden + eps);
        for (size_t j = 0; j < N; j++) {
            float y = __bfloat162float(__float2bfloat16(__bfloat162float(x[i * N + j]) * rstd));
            out[i * N + j] = __float2bfloat16(__bfloat162float(w[j]) * y);
        }
    }
    free(ss);
    return rc;
}
