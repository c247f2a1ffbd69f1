// The C++ half of test_moe_routing: pk_moe_routing.cuh is C++ (references, shared with the
// problem modules' kernels), compiled here for the host.
#include <stdint.h>

#include "pk_moe_routing.cuh"

// Routes M tokens of `rank` for (seed, key); counts[k * E + e] = tokens whose slot-k expert is e.
// Returns the number of tokens whose K experts were not distinct or out of range.
extern "C" long pk_test_moe_counts(uint64_t seed, int key, int world, int E, int K, int rank,
                                   long M, long *counts) {
    static PkMoeRouting r;
    pk_moe_routing_make(seed, key, world, E, K, &r);
    long bad = 0;
    for (long i = 0; i < (long)K * E; i++)
        counts[i] = 0;
    for (long m = 0; m < M; m++) {
        int ex[8];
        pk_moe_route(r, rank, (uint64_t)m, ex);
        uint64_t seen = 0;
        for (int k = 0; k < K; k++) {
            if (ex[k] < 0 || ex[k] >= E || ((seen >> ex[k]) & 1)) {
                bad++;
                break;
            }
            seen |= 1ULL << ex[k];
            counts[k * E + ex[k]]++;
        }
    }
    return bad;
}

extern "C" int pk_test_moe_mode(int key) {
    return pk_moe_mode(key);
}
