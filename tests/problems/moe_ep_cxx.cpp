// The C++ half of test_moe_ep: pk_moe_ep.cuh is C++ (templates shared with the problem modules'
// kernels), compiled here for the host.
#include <stdint.h>

#include "pk_moe_ep.cuh"

extern "C" void pk_test_moe_ep_group(int world, int E, int rank, int *size, int *first, int *El,
                                     int *owner0) {
    const PkMoeEpGroup g = pk_moe_ep_group(world, E, rank);
    *size = g.size;
    *first = g.first;
    *El = g.El;
    *owner0 = pk_moe_ep_owner(g, 0);
}

extern "C" int pk_test_moe_ep_narrow(int world) {
    return pk_moe_ep_narrow_experts(world);
}

extern "C" void pk_test_moe_ep_admissible(const float *z, int E, int K, float margin,
                                          uint64_t *must, uint64_t *tied, int *pick) {
    const PkMoeEpAdmissible a = pk_moe_ep_admissible(z, E, K, margin);
    *must = a.must;
    *tied = a.tied;
    *pick = a.pick;
}

extern "C" uint64_t pk_test_moe_ep_topk(const float *z, int E, int K) {
    return pk_moe_ep_topk(z, E, K);
}

extern "C" float pk_test_moe_ep_margin(const float *z, int E, int K) {
    return pk_moe_ep_margin(z, E, K);
}

extern "C" void pk_test_moe_ep_softmax(const float *z, int E, float *p) {
    pk_moe_ep_softmax(z, E, p);
}

extern "C" uint64_t pk_test_moe_ep_first_subset(uint64_t of, int k) {
    return pk_moe_ep_first_subset(of, k);
}

extern "C" uint64_t pk_test_moe_ep_next_subset(uint64_t s, uint64_t of) {
    return pk_moe_ep_next_subset(s, of);
}

// F is E x N row-major (expert e's output for the token), p the E probabilities.
extern "C" int pk_test_moe_ep_row_match(const float *got, const float *F, int E, int N,
                                        const float *p, uint64_t must, uint64_t tied, int pick,
                                        float atol, float rtol, float wtol, float *worst) {
    (void)E;
    PkMoeEpAdmissible a;
    a.must = must;
    a.tied = tied;
    a.pick = pick;
    const PkMoeEpTol tol = {atol, rtol, wtol};
    uint64_t matched;
    return pk_moe_ep_row_match([&](int n) { return got[n]; },
                               [&](int e, int n) { return F[(size_t)e * N + n]; }, N, p, a, tol,
                               worst, &matched, 4096);
}

extern "C" float pk_test_moe_ep_router(uint64_t seed, int key, int rank, int E, int El, int N,
                                       int e, int n) {
    return pk_moe_ep_router(seed, key, rank, E, El, N, e, n);
}
