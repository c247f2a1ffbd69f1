// selftest/sumsq_allreduce: the host twin of primitives/sumsq_allreduce. Local row sums of
// squares in fp32, then MPI_Allreduce of them.
#include <mpi.h>

#include <cuda_bf16.h>

#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, float *, size_t, size_t);

static int reference(const pk_problem_call *c) {
    const size_t rows = (size_t)c->dims[0], cols = (size_t)c->dims[1];
    const __nv_bfloat16 *x = static_cast<const __nv_bfloat16 *>(c->args[0]);
    float *y = static_cast<float *>(c->args[1]);
    for (size_t r = 0; r < rows; r++) {
        float acc = 0.f;
        for (size_t k = 0; k < cols; k++) {
            float v = __bfloat162float(x[r * cols + k]);
            acc += v * v;
        }
        y[r] = acc;
    }
    return MPI_Allreduce(MPI_IN_PLACE, y, (int)rows, MPI_FLOAT, MPI_SUM,
                         (MPI_Comm)c->ctx->mpi_comm) != MPI_SUCCESS;
}

static int invoke(void *fn, const pk_problem_call *c) {
    return ((entry_fn)fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                          static_cast<float *>(c->args[1]), (size_t)c->dims[0], (size_t)c->dims[1]);
}

static const pk_problem_module module = {
    PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return &module;
}
