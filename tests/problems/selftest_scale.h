/* The selftest/scale problem as the harness and scheduler tests use it: a correct solution, and
 * the problem loaded beside a scratch directory. Needs PK_TEST_PROBLEMS and PK_TEST_MODULES. */
#ifndef PK_TEST_SELFTEST_SCALE_H
#define PK_TEST_SELFTEST_SCALE_H

#include <stdio.h>
#include <stdlib.h>

#include "pk_problems.h"

/* y = 3 x + rank, what selftest/scale asks. */
#define SELFTEST_SCALE_CORRECT                                                                     \
    "#include \"pk_ctx.h\"\n"                                                                      \
    "extern \"C\" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {\n"         \
    "    for (size_t i = 0; i < n; i++)\n"                                                         \
    "        y[i] = 3.0f * x[i] + (float)ctx->rank;\n"                                             \
    "    return 0;\n"                                                                              \
    "}\n"

/* Loads the problem set, finds selftest/scale and makes the scratch directory from the mkdtemp
 * template dir; -1 (said on stderr when the set does not load) on failure. */
static inline int selftest_scale_load(pk_problem_set **set, const pk_problem **scale, char *dir) {
    pk_error err;
    if (pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, set, &err)) {
        fprintf(stderr, "problem set: %s\n", err.message);
        return -1;
    }
    *scale = pk_problem_set_find(*set, "selftest/scale");
    return *scale && mkdtemp(dir) ? 0 : -1;
}

#endif
