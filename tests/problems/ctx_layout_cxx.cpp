// The C++ view of pk_ctx with NCCL's device API (compiled with PK_DEVICE_API=1, as candidates
// of problems with "device_api": true and the runner are), for test_ctx_layout.c.
#include <cstddef>

#include "candidate/pk_ctx.h"

extern "C" size_t pk_test_ctx_layout_cxx(int field) {
    const size_t cxx[] = {offsetof(pk_ctx, stream),
                          offsetof(pk_ctx, comm),
                          offsetof(pk_ctx, peer_base),
                          offsetof(pk_ctx, window),
                          offsetof(pk_ctx, lsa_barrier_count),
                          offsetof(pk_ctx, dev_comm),
                          offsetof(pk_ctx, mpi_comm),
                          sizeof(pk_ctx)};
    return field >= 0 && field < (int)(sizeof cxx / sizeof *cxx) ? cxx[field] : 0;
}

extern "C" int pk_test_ctx_device_headers(void) {
    int n = 0;
#ifdef _NCCL_DEVICE_CORE_H_
    n |= 1;
#endif
#ifdef _CUDA_ATOMIC /* nvcc only: a host compiler's view of nccl_device.h has no libcu++ */
    n |= 2;
#endif
    return n;
}
