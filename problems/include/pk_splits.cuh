// pk_splits.cuh: skewed all-to-all split matrices and skewed node degrees for the generate() of
// the exchange problems (issue 33: pkb/66 and later ports).
//
// Prompt: the input generator's split sizes and node degrees (not timed).
//
// PKB splits every all-to-all evenly and draws every index uniformly, so a kernel that assumes
// equal splits or spread-out indices passes. Here a call's split matrix S (S[i][j] rows rank i
// sends to rank j; every row sums to M, every column to at most C) is drawn from (seed, salt,
// key) alone, the same on every rank, in one of four modes by key % 4:
//   balanced     PKB's equal counts, the remainder to the last rank;
//   skewed       random weights, about 30% of them zero (zero splits);
//   hot          every rank sends C / W rows to one rank, which receives C rows (at W = 2 the
//                other receives none);
//   local        80% of the rows stay on their rank, the rest go to one peer.
// Columns above C are then evened out. This is pkb/27's make_splits (and pkb/65's copy of it,
// with its salt); those two keep their own copies (their GPU checks ran on them): the same
// function, bit for bit, with salts 0x61326100 and 0x65326100.
//
// pk_skewed_id draws an index in [0, n) from one 64-bit hash, in one of three degree modes by
// key % 3 (pkb/65's ids_kernel): uniform (PKB's randint), power law (n u^4: ids below n / 16
// take half of the draws) and hubs (four rows, 0, n/4, n/2, 3n/4, take half of the draws).
#ifndef PK_SPLITS_CUH
#define PK_SPLITS_CUH

#include "candidate/pk_ctx.h"
#include "pk_splitmix.h"

#include <math.h>

enum { PK_SPLITS_BALANCED = 0, PK_SPLITS_SKEWED, PK_SPLITS_HOT, PK_SPLITS_LOCAL };
enum { PK_DEGREE_UNIFORM = 0, PK_DEGREE_POWER, PK_DEGREE_HUBS };

struct PkSplits {
    long long s[PK_MAX_RANKS][PK_MAX_RANKS];
};

static inline int pk_splits_mode(int key) {
    return ((key % 4) + 4) % 4;
}

static inline int pk_degree_mode(int key) {
    return ((key % 3) + 3) % 3;
}

// total split over n slots in proportion to w (some w > 0), the remainder to the largest weight.
static inline void pk_splits_apportion(long long total, const double *w, int n, long long *out) {
    double sum = 0;
    int big = 0;
    for (int j = 0; j < n; j++) {
        sum += w[j];
        big = w[j] > w[big] ? j : big;
    }
    long long used = 0;
    for (int j = 0; j < n; j++) {
        out[j] = (long long)floor((double)total * (w[j] / sum));
        used += out[j];
    }
    out[big] += total - used;
}

// The split matrix of one call: 2 <= W <= PK_MAX_RANKS, M >= 0, C >= M (column capacity).
static inline void pk_splits_make(uint64_t seed, uint64_t salt, int key, int W, long long M,
                                  long long C, PkSplits *S) {
    const uint64_t base = pk_splitmix64(seed ^ pk_splitmix64(salt + (uint64_t)(unsigned)key));
    const int mode = pk_splits_mode(key);
    const int hot = (int)(pk_splitmix64(base + 1) % (uint64_t)W);
    for (int i = 0; i < W; i++) {
        double w[PK_MAX_RANKS];
        long long *row = S->s[i];
        for (int j = 0; j < W; j++) {
            const uint64_t k = 16 + (uint64_t)i * PK_MAX_RANKS + (uint64_t)j;
            w[j] = pk_splitmix_unit(base + 1000 + k) < 0.3 ? 0.0
                                                           : exp(4.0 * pk_splitmix_unit(base + k));
        }
        w[(int)(pk_splitmix64(base + 2000 + (uint64_t)i) % (uint64_t)W)] += 1.0; // some w > 0
        if (mode == PK_SPLITS_BALANCED) {
            for (int j = 0; j < W; j++)
                row[j] = M / W;
            row[W - 1] += M % W;
        } else if (mode == PK_SPLITS_SKEWED) {
            pk_splits_apportion(M, w, W, row);
        } else if (mode == PK_SPLITS_HOT) {
            const long long to_hot = C / W < M ? C / W : M;
            w[hot] = 0.0;
            double rest = 0;
            for (int j = 0; j < W; j++)
                rest += w[j];
            if (rest <= 0.0)
                w[(hot + 1) % W] = 1.0;
            pk_splits_apportion(M - to_hot, w, W, row);
            row[hot] += to_hot;
        } else if (W == 1) { // local, no peer (the single-GPU diagnostic)
            row[0] = M;
        } else {
            const int peer =
                (i + 1 + (int)(pk_splitmix64(base + 3000 + (uint64_t)i) % (uint64_t)(W - 1))) % W;
            for (int j = 0; j < W; j++)
                row[j] = 0;
            row[peer] = M / 5;
            row[i] = M - M / 5;
        }
    }
    for (int j = 0; j < W; j++) { // move rows of full columns to columns with room
        long long col[PK_MAX_RANKS] = {0};
        for (int i = 0; i < W; i++)
            for (int k = 0; k < W; k++)
                col[k] += S->s[i][k];
        for (int i = 0; i < W && col[j] > C; i++)
            for (int k = 0; k < W && col[j] > C; k++) {
                if (k == j || col[k] >= C)
                    continue;
                long long mv = col[j] - C;
                mv = mv < S->s[i][j] ? mv : S->s[i][j];
                mv = mv < C - col[k] ? mv : C - col[k];
                S->s[i][j] -= mv;
                S->s[i][k] += mv;
                col[j] -= mv;
                col[k] += mv;
            }
    }
}

// An index in [0, n) (n >= 4) from the hash h of (seed, key, rank, element), by degree mode.
static inline PK_HD long long pk_skewed_id(uint64_t h, int mode, long long n) {
    const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
    long long id;
    if (mode == PK_DEGREE_POWER)
        id = (long long)((double)n * u * u * u * u);
    else if (mode == PK_DEGREE_HUBS && (h & 1))
        id = (long long)((h >> 1) % 4 * (uint64_t)(n / 4));
    else
        id = (long long)(pk_splitmix64(h) % (uint64_t)n);
    return id < n ? id : n - 1;
}

#endif
