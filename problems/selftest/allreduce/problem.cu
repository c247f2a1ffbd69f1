// selftest/allreduce: the reference is MPI_Allreduce; the candidate writes it by hand.
#include <mpi.h>

#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const float *, float *, size_t);

static int reference(const pk_problem_call *c) {
    return MPI_Allreduce(c->args[0], c->args[1], (int)c->counts[0], MPI_FLOAT, MPI_SUM,
                         (MPI_Comm)c->ctx->mpi_comm) != MPI_SUCCESS;
}

static int invoke(void *fn, const pk_problem_call *c) {
    return ((entry_fn)fn)(c->ctx, (const float *)c->args[0], (float *)c->args[1], c->counts[0]);
}

static const pk_problem_module module = {
    PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return &module;
}
