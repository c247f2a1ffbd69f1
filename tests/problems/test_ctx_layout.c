/* pk_ctx must have the same layout in C (the runner), C++ with NCCL's device API (candidates of
 * problems with "device_api": true) and C++ without it (every other candidate, the modules); and
 * only the first C++ view may reach nccl_device.h and <cuda/atomic>. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "candidate/pk_ctx.h"

size_t pk_test_ctx_layout_cxx(int field);       /* ctx_layout_cxx.cpp, PK_DEVICE_API=1 */
size_t pk_test_ctx_layout_cxx_plain(int field); /* ctx_layout_cxx_plain.cpp */
/* Bit 0: nccl_device.h was included, bit 1: <cuda/atomic>. */
int pk_test_ctx_device_headers(void);
int pk_test_ctx_device_headers_plain(void);

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
    for (int i = 0; i < (int)(sizeof c / sizeof *c); i++) {
        assert_int_equal(c[i], pk_test_ctx_layout_cxx(i));
        assert_int_equal(c[i], pk_test_ctx_layout_cxx_plain(i));
    }
}

static void device_api_headers_only_on_request(void **state) {
    (void)state;
    assert_true(pk_test_ctx_device_headers() & 1);           /* nccl_device.h */
    assert_int_equal(pk_test_ctx_device_headers_plain(), 0); /* neither header */
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(same_layout_in_c_and_cxx),
                                       cmocka_unit_test(device_api_headers_only_on_request)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
