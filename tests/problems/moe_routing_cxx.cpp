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

// pk_splits.cuh (the split matrices and skewed degrees of pkb/66 and later ports), for the host.
#include "pk_splits.cuh"

// S row-major into out[W * W].
extern "C" void pk_test_splits(uint64_t seed, uint64_t salt, int key, int world, long long M,
                               long long C, long long *out) {
    PkSplits S;
    pk_splits_make(seed, salt, key, world, M, C, &S);
    for (int i = 0; i < world; i++)
        for (int j = 0; j < world; j++)
            out[i * world + j] = S.s[i][j];
}

extern "C" long long pk_test_skewed_id(uint64_t h, int mode, long long n) {
    return pk_skewed_id(h, mode, n);
}

extern "C" uint64_t pk_test_hash(uint64_t x) {
    return pk_splitmix64(x);
}
