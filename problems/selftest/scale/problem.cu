// selftest/scale: y = 3x + rank on every rank, no communication.
#include "pk_problem_module.h"

typedef int (*entry_fn)(const pk_ctx *, const float *, float *, size_t);

static int reference(const pk_problem_call *c) {
    const float *x = (const float *)c->args[0];
    float *y = (float *)c->args[1];
    for (size_t i = 0; i < c->counts[0]; i++)
        y[i] = 3.0f * x[i] + (float)c->ctx->rank;
    return 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    return ((entry_fn)fn)(c->ctx, (const float *)c->args[0], (float *)c->args[1], c->counts[0]);
}

static const pk_problem_module module = {
    PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    return &module;
}
