// Shortcut twin (issue #26), skip the exchange: each rank uses its own sum of squares times W
// for the whole row's, with no MPI call. On i.i.d. N(0, 1) inputs one shard stands for all of
// them (rstd off by ~0.5% on 8192 columns); with a different scale per rank it is far off.
#include <math.h>
#include <stdlib.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                        __nv_bfloat16 *out, size_t M, size_t N, float eps) {
    float *ss = static_cast<float *>(malloc(M * sizeof(float)));
    if (!ss)
        return 1;
    for (size_t i = 0; i < M; i++) {
        float acc = 0.f;
        for (size_t j = 0; j < N; j++) {
            float v = __bfloat162float(x[i * N + j]);
            acc += v * v;
        }
        ss[i] = acc * (float)ctx->world_size; /* the shortcut: no exchange */
    }
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
