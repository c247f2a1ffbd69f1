// selftest/tp_rms_norm: the host twin of pkb/18_tp_rms_norm. Rank r holds its N columns of every
// row of the hidden states (M x N, bf16) and its N weights; every rank needs, for its columns,
//   out[i, j] = bf16(w[j] * bf16(x[i, j] * rsqrt(ss[i] / (N * W) + eps)))
// where ss[i] is the fp32 sum of x^2 over the row's N * W columns on all ranks (MPI_Allreduce).
#include <mpi.h>

#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>

#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const __nv_bfloat16 *,
                        __nv_bfloat16 *, size_t, size_t, float);

static int reference(const pk_problem_call *c) {
    const size_t M = (size_t)c->dims[0], N = (size_t)c->dims[1];
    const __nv_bfloat16 *x = static_cast<const __nv_bfloat16 *>(c->args[0]);
    const __nv_bfloat16 *w = static_cast<const __nv_bfloat16 *>(c->args[1]);
    __nv_bfloat16 *out = static_cast<__nv_bfloat16 *>(c->args[2]);
    const float eps = (float)c->params[0];
    float *ss = static_cast<float *>(malloc(M * sizeof(float)));
    if (!ss)
        return 1;
    for (size_t i = 0; i < M; i++) {
        float acc = 0.f;
        for (size_t j = 0; j < N; j++) {
            float v = __bfloat162float(x[i * N + j]);
            acc += v * v;
        }
        ss[i] = acc;
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, ss, (int)M, MPI_FLOAT, MPI_SUM,
                           (MPI_Comm)c->ctx->mpi_comm) != MPI_SUCCESS;
    const float inv_hidden = 1.0f / (float)(N * (size_t)c->ctx->world_size);
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

static int invoke(void *fn, const pk_problem_call *c) {
    return ((entry_fn)fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                          static_cast<const __nv_bfloat16 *>(c->args[1]),
                          static_cast<__nv_bfloat16 *>(c->args[2]), (size_t)c->dims[0],
                          (size_t)c->dims[1], (float)c->params[0]);
}

static const pk_problem_module module = {
    PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return &module;
}
