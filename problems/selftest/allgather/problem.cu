// selftest/allgather: the reference is MPI_Allgather.
#include <mpi.h>

#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const int32_t *, int32_t *, size_t);

static int reference(const pk_problem_call *c) {
    int n = (int)c->counts[0];
    return MPI_Allgather(c->args[0], n, MPI_INT32_T, c->args[1], n, MPI_INT32_T,
                         (MPI_Comm)c->ctx->mpi_comm) != MPI_SUCCESS;
}

static int invoke(void *fn, const pk_problem_call *c) {
    return ((entry_fn)fn)(c->ctx, (const int32_t *)c->args[0], (int32_t *)c->args[1], c->counts[0]);
}

static const pk_problem_module module = {
    PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return &module;
}
