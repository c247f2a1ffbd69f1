// pk_moe_routing_grouped.cuh: DeepSeek-V3's group-limited routing, for generate() of the cuco/
// MoE problems (issue 29) and their host simulations (plain C++ on the host, the same code).
//
// Prompt: the input generator's group-limited routings (not timed).
//
// DeepSeek-V3 routes each token to K = 8 of E = 256 experts, which sit in G = 8 groups of 32,
// and only within TG = 4 groups (node-limited routing: each token reaches at most TG groups).
// pk_moe_routing.cuh (pkb/26-29) holds at most 64 experts and knows no groups, so this is a
// separate routing; its modes follow that header's and CUCo's "routing imbalance ratios":
//   balanced     every expert equally likely;
//   skewed       a weight per (rank, expert) between 1 and e^2, and the experts of one rank
//                (drawn) ratio x heavier, ratio in {2, 3, 4, 5} (CUCo's 2:1 ... 5:1);
//   hot_empty    one expert (the same on every rank) in almost every token (its group always
//                chosen, its weight 20 E), one other expert in none;
//   group_empty  skewed, and every rank routes nothing to one rank's experts (its own choice):
//                zero splits between ranks (kept only where enough groups stay: G - G/W >= TG).
// A token first draws TG distinct groups, each with the probability of its total weight among
// those left, then K distinct experts of those groups, slot by slot, from the weights of the
// experts not yet chosen. Weights are made on the host; the device only adds and compares, so
// host and device give the same experts.
#ifndef PK_MOE_ROUTING_GROUPED_CUH
#define PK_MOE_ROUTING_GROUPED_CUH

#include "candidate/pk_ctx.h"
#include "pk_splitmix.h"

#include <math.h>

#define PK_GR_MAX_E 256
#define PK_GR_MAX_G 32
#define PK_GR_MAX_K 8
#define PK_GR_MODES 4

enum { PK_GR_BALANCED = 0, PK_GR_SKEWED, PK_GR_HOT_EMPTY, PK_GR_GROUP_EMPTY };

struct PkGroupedRouting {
    uint64_t stream; // key of the token draws
    int E, G, TG, K, mode;
    int hot, empty, heavy_rank, ratio;  // hot_empty's experts; skewed's heavy rank and ratio
    float w[PK_MAX_RANKS][PK_GR_MAX_E]; // weight of (sending rank, expert), >= 0
};

static inline int pk_gr_mode(int key) {
    return ((key % PK_GR_MODES) + PK_GR_MODES) % PK_GR_MODES;
}

// The routing of every rank for one call. E <= 256, G <= 32, E % G == 0, E % world == 0,
// 1 <= TG <= G, 1 <= K <= min(8, TG E / G), world <= PK_MAX_RANKS.
static inline void pk_gr_make(uint64_t seed, int key, int world, int E, int G, int TG, int K,
                              PkGroupedRouting *r) {
    const uint64_t base =
        pk_splitmix64(seed ^ pk_splitmix64(0x67727400ULL + (uint64_t)(unsigned)key));
    r->stream = pk_splitmix64(base + 1);
    r->E = E;
    r->G = G;
    r->TG = TG;
    r->K = K;
    r->mode = pk_gr_mode(key);
    r->hot = (int)(pk_splitmix64(base + 2) % (uint64_t)E);
    r->empty = (r->hot + 1 + (int)(pk_splitmix64(base + 3) % (uint64_t)(E - 1))) % E;
    r->heavy_rank = (int)(pk_splitmix64(base + 5) % (uint64_t)world);
    r->ratio = 2 + (int)(pk_splitmix64(base + 6) % 4);
    const int per_rank = E / world; // rank g holds experts [g * per_rank, (g + 1) * per_rank)
    for (int s = 0; s < PK_MAX_RANKS; s++)
        for (int e = 0; e < PK_GR_MAX_E; e++) {
            const uint64_t k = base + 16 + (uint64_t)s * PK_GR_MAX_E + (uint64_t)e;
            float w = 1.f;
            if (r->mode == PK_GR_SKEWED || r->mode == PK_GR_GROUP_EMPTY)
                w = (float)exp(2.0 * pk_splitmix_unit(k)) *
                    (e / per_rank == r->heavy_rank ? (float)r->ratio : 1.f);
            else if (r->mode == PK_GR_HOT_EMPTY)
                w = e == r->hot ? 20.f * (float)E : e == r->empty ? 0.f : 1.f;
            r->w[s][e] = e < E ? w : 0.f;
        }
    const int groups_per_rank = per_rank / (E / G);
    if (r->mode == PK_GR_GROUP_EMPTY && G - groups_per_rank >= TG && E - per_rank >= K)
        for (int s = 0; s < world; s++) {
            const int g = (int)(pk_splitmix64(base + 4 + 0x100 * (uint64_t)s) % (uint64_t)world);
            for (int e = g * per_rank; e < (g + 1) * per_rank; e++)
                r->w[s][e] = 0.f;
        }
}

// Draws one of the n candidates (weights cw[i] > 0 where avail, sum `left`) from u in (0, 1].
static inline PK_HD int pk_gr_pick(const double *cw, const int *avail, int n, double left,
                                   double u) {
    const double t = u * left;
    int pick = -1, last = -1;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        if (!avail[i] || cw[i] <= 0.0)
            continue;
        last = i;
        acc += cw[i];
        if (pick < 0 && t <= acc)
            pick = i;
    }
    return pick < 0 ? last : pick; // rounding left t above the running sum
}

// The K distinct experts of token `token` of rank `rank`, in slot order (not sorted).
static inline PK_HD void pk_gr_route(const PkGroupedRouting &r, int rank, uint64_t token,
                                     int *experts) {
    const float *w = r.w[rank];
    const int per = r.E / r.G;
    const uint64_t key = r.stream + ((uint64_t)rank << 48) + token * 32;
    double gw[PK_GR_MAX_G], gleft = 0.0;
    int gav[PK_GR_MAX_G];
    for (int g = 0; g < r.G; g++) {
        gw[g] = 0.0;
        for (int e = g * per; e < (g + 1) * per; e++)
            gw[g] += (double)w[e];
        gav[g] = 1;
        gleft += gw[g];
    }
    int chosen[PK_GR_MAX_G];
    for (int g = 0; g < r.G; g++)
        chosen[g] = 0;
    for (int t = 0; t < r.TG && gleft > 0.0; t++) {
        const int g = pk_gr_pick(gw, gav, r.G, gleft, pk_splitmix_unit(key + (uint64_t)t));
        if (g < 0)
            break;
        chosen[g] = 1;
        gav[g] = 0;
        gleft -= gw[g];
    }
    double ew[PK_GR_MAX_E], left = 0.0;
    int eav[PK_GR_MAX_E];
    for (int e = 0; e < r.E; e++) {
        eav[e] = chosen[e / per];
        ew[e] = (double)w[e];
        left += eav[e] && ew[e] > 0.0 ? ew[e] : 0.0;
    }
    for (int k = 0; k < r.K; k++) {
        const int e = pk_gr_pick(ew, eav, r.E, left, pk_splitmix_unit(key + 16 + (uint64_t)k));
        experts[k] = e;
        if (e < 0)
            continue; // cannot happen with the constraints above; a checked error in the sim
        eav[e] = 0;
        left -= ew[e];
    }
}

#if defined(__CUDACC__)
// topk_idx[m * K + k] = token m's slot-k expert (int64, as DeepSeek-V3's gate returns it).
__global__ void pk_gr_topk_kernel(int64_t *topk_idx, size_t M, int rank, PkGroupedRouting r) {
    for (size_t m = (size_t)blockIdx.x * blockDim.x + threadIdx.x; m < M;
         m += (size_t)gridDim.x * blockDim.x) {
        int ex[PK_GR_MAX_K];
        pk_gr_route(r, rank, m, ex);
        for (int k = 0; k < r.K; k++)
            topk_idx[m * r.K + k] = ex[k];
    }
}
#endif

#endif
