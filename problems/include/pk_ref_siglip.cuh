// pk_ref_siglip.cuh: the batches pkb/58_openclip_contrastive_loss's generate() draws (issue 33),
// for problem.cu's generate() and the host simulation bench/pkb/sim_58_siglip_loss.c (C).
//
// Prompt: the input generator's batches (not timed).
//
// PKB's image and text features are independent random unit vectors on every rank: every
// cosine is ~N(0, 1/D), every negative pair's term of the sigmoid loss is ~e^bias, and a kernel
// can skip the other ranks' texts (the local negatives times W), read half of them, or assume
// the expectation without reading any, and still be judged correct. On odd call keys the batch
// looks like a real one instead:
//   - runs: rank r's B samples come in 8 runs of B/8 (a data loader's shards), each run one
//     cluster of 16, drawn skewed (about a third of the runs in the rank's first cluster)
//     through a permutation of the clusters that differs per rank;
//   - a sample's image and text both lean towards its cluster's centre (a +-1 vector, the
//     same on every rank), by `boost` times the row's rms (1..2: same-cluster cosines ~0.5-0.8);
//   - a text also leans towards its own image (`pair`, 1..3 times the row's rms): positive
//     pairs have cosines near 1, as a trained model's do.
// Then every row is normalised as F.normalize does in bf16: v / bf16(||v||) (the norm summed in
// fp32), rounded to bf16. Even keys only normalise (PKB's inputs on the iid regime). Everything
// derives from (seed, key, rank), the same on every rank for the centres.
#ifndef PK_REF_SIGLIP_CUH
#define PK_REF_SIGLIP_CUH

#include "pk_splitmix.h"

#include <stdint.h>

#define PK_SIGLIP_CLUSTERS 8
#define PK_SIGLIP_RUNS 4

typedef struct pk_siglip_gen {
    int clustered;
    float boost, pair; // leans, in units of the row's rms
    uint64_t a, sh;    // this rank's permutation of the clusters: c = (a j + sh) % 16, a odd
    uint64_t kb, kc;   // keys of the runs' draws (per rank) and of the centres (every rank)
} pk_siglip_gen;

static inline PK_HD void pk_siglip_gen_params(pk_siglip_gen *g, uint64_t seed, int key, int rank) {
    const uint64_t k0 = pk_splitmix64(seed ^ pk_splitmix64(0x58c1ull << 32 ^ (uint64_t)key));
    g->clustered = key % 2 != 0;
    g->boost = (float)(1.5 + pk_splitmix_unit(k0));
    g->pair = (float)(1.0 + 2.0 * pk_splitmix_unit(k0 + 1));
    g->a = 2 * (pk_splitmix64(k0 + 2 + (uint64_t)rank) % (PK_SIGLIP_CLUSTERS / 2)) + 1;
    g->sh = pk_splitmix64(k0 + 100 + (uint64_t)rank) % PK_SIGLIP_CLUSTERS;
    g->kb = pk_splitmix64(k0 + 1000 + (uint64_t)rank);
    g->kc = pk_splitmix64(k0 + 5);
}

// The cluster of sample b of B (its run's draw, skewed towards the rank's first cluster).
static inline PK_HD int pk_siglip_cluster(const pk_siglip_gen *g, long long b, long long B) {
    const long long run = b * PK_SIGLIP_RUNS / B;
    const double u = pk_splitmix_unit(g->kb + (uint64_t)run);
    const uint64_t j = (uint64_t)(PK_SIGLIP_CLUSTERS * u * u) % PK_SIGLIP_CLUSTERS;
    return (int)((j * g->a + g->sh) % PK_SIGLIP_CLUSTERS);
}

// Element d of cluster c's centre: +-1.
static inline PK_HD float pk_siglip_centre(const pk_siglip_gen *g, int c, long long d) {
    return (pk_splitmix64(g->kc + (uint64_t)c * 1000003ull + (uint64_t)d) & 1) ? 1.f : -1.f;
}

#endif
