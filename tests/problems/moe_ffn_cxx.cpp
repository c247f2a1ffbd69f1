// The C++ half of test_moe_ffn: the host functions of pk_moe_ffn.cuh (pkb/31 and 32's routing
// design and PyTorch's router), compiled here for the host.
#include <stdint.h>

#include "pk_moe_ffn.cuh"

extern "C" float pk_test_bf16r(float x) {
    return pk_bf16r(x);
}

// PyTorch's router on E given logits: writes the K experts; returns 0.
extern "C" int pk_test_moe_router(const float *logits, int E, int K, int *sel) {
    float w[8];
    pk_moe_router_token(logits, E, K, w, sel);
    return 0;
}

// generate()'s design for M tokens of `rank` (N hidden, N >= 2E), then PyTorch's router on
// the bf16 logits, accumulated in fp32 forwards (rev = 0) or backwards (rev = 1). Returns the
// number of tokens whose experts differ from pk_moe_route's (slot order); *margin = the
// smallest fp64 gap between the K-th and (K+1)-th logit; tokens[e] = tokens routed to e.
extern "C" long pk_test_moe_design(uint64_t seed, int key, int world, int E, int K, int rank,
                                   long M, long N, int rev, double *margin, long *tokens) {
    static PkMoeRouting r;
    pk_moe_routing_make(seed, key, world, E, K, &r);
    static float x[1 << 12], gw[PK_MOE_MAX_E << 12], gb[PK_MOE_MAX_E];
    if (N > (1 << 12) || N < 2 * E)
        return -1;
    for (int e = 0; e < E; e++) {
        gb[e] = pk_bf16r((float)pk_moe_normal(seed * 977 + (uint64_t)e));
        for (long j = 0; j < N; j++)
            gw[e * N + j] = pk_bf16r(pk_moe_gate_weight(r, rank, e, (size_t)j, (size_t)N));
        tokens[e] = 0;
    }
    long bad = 0;
    *margin = 1e30;
    for (long m = 0; m < M; m++) {
        for (long j = 0; j < N; j++) // a heavy-ish row: N(0, 1) times 1..16
            x[j] = pk_bf16r((float)(pk_moe_normal(seed + 0x100000ULL * (uint64_t)m + (uint64_t)j) *
                                    (1.0 + 15.0 * pk_splitmix_unit(seed ^ (uint64_t)(m * N + j)))));
        double d[PK_MOE_MAX_E];
        float hi[PK_MOE_MAX_E], lo[PK_MOE_MAX_E];
        for (int e = 0; e < E; e++) {
            d[e] = gb[e];
            for (long j = 2 * E; j < N; j++)
                d[e] += (double)x[j] * gw[e * N + j];
        }
        pk_moe_design_cols(r, rank, (uint64_t)m, d, hi, lo);
        for (int e = 0; e < E; e++) {
            x[2 * e] = hi[e];
            x[2 * e + 1] = lo[e];
        }
        float l[PK_MOE_MAX_E], w[8];
        double l64[PK_MOE_MAX_E];
        int sel[8], ex[8];
        for (int e = 0; e < E; e++) {
            float a = 0.f;
            l64[e] = gb[e];
            for (long i = 0; i < N; i++) {
                const long j = rev ? N - 1 - i : i;
                a += x[j] * gw[e * N + j];
                l64[e] += (double)x[j] * gw[e * N + j];
            }
            l[e] = pk_bf16r(a + gb[e]);
        }
        pk_moe_router_token(l, E, K, w, sel);
        pk_moe_route(r, rank, (uint64_t)m, ex);
        double kth = 1e30, above = -1e30;
        uint64_t chosen = 0;
        for (int k = 0; k < K; k++) {
            bad += sel[k] != ex[k] ? 1 : 0;
            kth = l64[ex[k]] < kth ? l64[ex[k]] : kth;
            chosen |= 1ULL << ex[k];
            tokens[ex[k]]++;
        }
        for (int e = 0; e < E; e++)
            if (!((chosen >> e) & 1) && l64[e] > above)
                above = l64[e];
        *margin = kth - above < *margin ? kth - above : *margin;
    }
    return bad;
}
