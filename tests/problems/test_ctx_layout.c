/* pk_ctx must have the same layout in C (the runner) and C++ (candidates, problem modules). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "candidate/pk_ctx.h"

size_t pk_test_ctx_layout_cxx(int field); /* ctx_layout_cxx.cpp */

static void same_layout_in_c_and_cxx(void **state) {
    (void)state;
    const size_t c[] = {offsetof(pk_ctx, stream),
                        offsetof(pk_ctx, comm),
                        offsetof(pk_ctx, peer_base),
                        offsetof(pk_ctx, window),
                        offsetof(pk_ctx, lsa_barrier_count),
                        offsetof(pk_ctx, dev_comm_opaque),
                        offsetof(pk_ctx, mpi_comm),
                        sizeof(pk_ctx)};
    for (int i = 0; i < (int)(sizeof c / sizeof *c); i++)
        assert_int_equal(c[i], pk_test_ctx_layout_cxx(i));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(same_layout_in_c_and_cxx)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
