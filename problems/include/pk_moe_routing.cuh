// pk_moe_routing.cuh: token-to-expert routings for the MoE problems' generate() (issue #29).
//
// Prompt: the input generator's token-to-expert routings (not timed).
//
// PKB draws every token's experts uniformly, so every expert gets about the same share and no
// split is ever zero: a kernel that assumes balance passes. Here a call's routing is one of
// four modes, chosen by the call's key (trial or timed call), drawn from (seed, key) the same
// way on every rank, so a rank can recompute any other rank's routing and the harness can
// regenerate it:
//   balanced     every expert equally likely (PKB's distribution);
//   skewed       a weight per (rank, expert) between 1 and e^4, different on every rank;
//   hot_empty    one expert (the same on every rank) takes ~95% of the slot-0 choices, one
//                other expert gets no token at all;
//   group_empty  skewed, and every rank routes nothing to the experts of one rank (its own
//                choice), so split sizes of zero appear.
// A token's K experts are distinct (top-k never picks an expert twice), drawn slot by slot
// from the weights of the experts not yet chosen.
#ifndef PK_MOE_ROUTING_CUH
#define PK_MOE_ROUTING_CUH

#include "candidate/pk_ctx.h"
#include "pk_splitmix.h"

#include <math.h>

#define PK_MOE_MAX_E 64
#define PK_MOE_MODES 4

enum { PK_MOE_BALANCED = 0, PK_MOE_SKEWED, PK_MOE_HOT_EMPTY, PK_MOE_GROUP_EMPTY };

struct PkMoeRouting {
    uint64_t stream; // key of the token draws
    int E, K, mode;
    float w[PK_MAX_RANKS][PK_MOE_MAX_E]; // weight of (sending rank, expert), >= 0
};

static inline int pk_moe_mode(int key) {
    return ((key % PK_MOE_MODES) + PK_MOE_MODES) % PK_MOE_MODES;
}

// The routing of every rank for one call. E <= PK_MOE_MAX_E, 1 <= K < E, world <= PK_MAX_RANKS.
static inline void pk_moe_routing_make(uint64_t seed, int key, int world, int E, int K,
                                       PkMoeRouting *r) {
    const uint64_t base =
        pk_splitmix64(seed ^ pk_splitmix64(0x6d6f6500ULL + (uint64_t)(unsigned)key));
    r->stream = pk_splitmix64(base + 1);
    r->E = E;
    r->K = K;
    r->mode = pk_moe_mode(key);
    const int hot = (int)(pk_splitmix64(base + 2) % (uint64_t)E);
    const int empty = (hot + 1 + (int)(pk_splitmix64(base + 3) % (uint64_t)(E - 1))) % E;
    const int per_rank = E / world; // the experts of rank g are [g * per_rank, (g + 1) * per_rank)
    for (int s = 0; s < PK_MAX_RANKS; s++)
        for (int e = 0; e < PK_MOE_MAX_E; e++) {
            const uint64_t k = base + 16 + (uint64_t)s * PK_MOE_MAX_E + (uint64_t)e;
            float w = 1.f;
            if (r->mode == PK_MOE_SKEWED || r->mode == PK_MOE_GROUP_EMPTY)
                w = (float)exp(4.0 * pk_splitmix_unit(k));
            else if (r->mode == PK_MOE_HOT_EMPTY)
                w = e == hot ? 20.f * (float)E : e == empty ? 0.f : 1.f;
            r->w[s][e] = e < E ? w : 0.f;
        }
    if (r->mode == PK_MOE_GROUP_EMPTY && E - per_rank >= K)
        for (int s = 0; s < world; s++) {
            const int g = (int)(pk_splitmix64(base + 4 + 0x100 * (uint64_t)s) % (uint64_t)world);
            for (int e = g * per_rank; e < (g + 1) * per_rank; e++)
                r->w[s][e] = 0.f;
        }
}

// The K distinct experts of token `token` of rank `rank`, in slot order.
static inline PK_HD void pk_moe_route(const PkMoeRouting &r, int rank, uint64_t token,
                                      int *experts) {
    const float *w = r.w[rank];
    float left = 0.f;
    for (int e = 0; e < r.E; e++)
        left += w[e];
    uint64_t used = 0;
    for (int k = 0; k < r.K; k++) {
        const float t = (float)pk_splitmix_unit(r.stream + ((uint64_t)rank << 48) +
                                                token * (uint64_t)r.K + (uint64_t)k) *
                        left;
        int pick = -1, last = -1;
        float acc = 0.f;
        for (int e = 0; e < r.E; e++) {
            if ((used >> e) & 1 || w[e] <= 0.f)
                continue;
            last = e;
            acc += w[e];
            if (pick < 0 && t <= acc)
                pick = e;
        }
        pick = pick < 0 ? last : pick; // rounding left t above the running sum
        experts[k] = pick;
        used |= 1ULL << pick;
        left -= w[pick];
    }
}

#if defined(__CUDACC__)
// The one-hot mask of rank `rank`'s routing, as PKB lays it out: mask[(e * K + k) * M + m] is 1
// where token m's slot-k expert is e. K <= 8.
__global__ void pk_moe_mask_kernel(float *mask, size_t M, int rank, PkMoeRouting r) {
    for (size_t m = (size_t)blockIdx.x * blockDim.x + threadIdx.x; m < M;
         m += (size_t)gridDim.x * blockDim.x) {
        int ex[8];
        pk_moe_route(r, rank, m, ex);
        for (int e = 0; e < r.E; e++)
            for (int k = 0; k < r.K; k++)
                mask[((size_t)e * r.K + k) * M + m] = ex[k] == e ? 1.f : 0.f;
    }
}
#endif

#endif
