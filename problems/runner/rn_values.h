/* Values the runner computes identically on the host and on the GPU: generated inputs, guard
 * zone patterns and sample positions. Every value is a pure function of (key, index), so the
 * harness can regenerate any input or pattern byte later to check it. */
#ifndef RN_VALUES_H
#define RN_VALUES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "pk_splitmix.h"

/* An argument's generator with its integer bounds evaluated (pk_gen_spec at one size), and the
 * regime of one call (pk_regime) with its parameters, drawn per step and call key (rank.c). */
typedef struct rn_gen {
    int kind; /* pk_gen_kind */
    double a, b;
    long long lo, hi; /* int: [lo, hi]; index: [0, hi) */
    uint64_t offset;  /* element i is drawn as element offset + i (sharded scope) */
    int regime;       /* pk_regime; PK_REGIME_IID leaves the draw as it is */
    int shift_ok;     /* normal generators only: offsets and sign changes keep no constraint */
    double scale;     /* the call's overall scale (rank: this rank's) */
    double shift;     /* rank: this rank's offset; cancel: the sign of this rank's terms */
    double p, amp;    /* heavy: outlier share and factor; peaked: peak share and height; cancel:
                         the cancelling terms' size */
    uint64_t rkey;    /* this rank's stream of row, column and element factors */
    uint64_t ckey;    /* row: column factors; heavy: outliers; cancel: the stream all ranks
                         share (the others are this rank's) */
    uint64_t row_len; /* elements per row */
    uint64_t n_rows;  /* rows of the argument on this rank (count / row_len) */
    double ramp_r, ramp_c; /* row: octaves the scale climbs over the rows and the columns */
} rn_gen;

/* A standard normal from two uniforms of stream `key` at slot j (Box-Muller). */
static inline PK_HD double rn_std_normal(uint64_t key, uint64_t j) {
    double u1 = pk_splitmix_unit(key + 2 * j), u2 = pk_splitmix_unit(key + 2 * j + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The row, heavy and peaked regimes' ramp, as an exponent of 2: the scale climbs ramp_r octaves
 * over the rows and ramp_c over the columns, so that no prefix of the rows or of a row stands
 * for the whole. (One exp2 per element: generation is on every call's path.) */
static inline PK_HD double rn_ramp_log2(const rn_gen *g, uint64_t i) {
    const uint64_t row = i / g->row_len, col = i % g->row_len;
    double y = g->n_rows > 1 ? (double)row / (double)(g->n_rows - 1) - 0.5 : 0.0;
    double x = g->row_len > 1 ? (double)col / (double)(g->row_len - 1) - 0.5 : 0.0;
    return g->ramp_r * y + g->ramp_c * x;
}

/* Shapes draw v of (global) element i by the call's regime. Factors are positive, so a
 * non-negative generator stays non-negative; only normal generators get offsets and signs. */
static inline PK_HD double rn_regime_apply(const rn_gen *g, double v, uint64_t i) {
    switch (g->regime) {
    case 1: /* rank */
        return g->scale * v + (g->shift_ok ? g->shift : 0.0);
    case 2: /* row: the ramp, and a factor in 2^-1..2^1 per row and per column */
        return g->scale * v *
               exp2(rn_ramp_log2(g, i) + 2.0 * pk_splitmix_unit(g->rkey + i / g->row_len) +
                    2.0 * pk_splitmix_unit(g->ckey + i % g->row_len) - 2.0);
    case 3: { /* heavy: a factor per element with a tail like 1/f^2 (0.24..16, mean square ~4),
                 outliers amp times larger, the factor at most 2^11 (an f16 input stays finite),
                 on the ramp */
        double f = 1.0 / (4.0 * pk_splitmix_unit(g->rkey + i) + 0.0625);
        if (pk_splitmix_unit(g->ckey + i) <= g->p)
            f *= g->amp;
        return fmin(g->scale * f, 2048.0) * exp2(rn_ramp_log2(g, i)) * v;
    }
    case 4: /* peaked: a share p of the entries raised by amp, on the ramp */
        return g->scale * exp2(rn_ramp_log2(g, i)) * v +
               (pk_splitmix_unit(g->rkey + i) <= g->p ? g->amp : 0.0);
    case 5: /* cancel: terms of size amp, opposite on ranks 2k, 2k+1 and elements 2j, 2j+1 */
        if (!g->shift_ok)
            return g->scale * v;
        return g->shift * (i & 1 ? -1.0 : 1.0) * g->amp * rn_std_normal(g->ckey, i >> 1) + v;
    default:
        return v;
    }
}

/* Element i of the stream `key`, as a double (integers are exact up to 2^53). */
static inline PK_HD double rn_gen_value(const rn_gen *g, int integer, uint64_t key, size_t i) {
    i += g->offset;
    switch (g->kind) {
    case 0: { /* normal: Box-Muller from two independent uniforms */
        double u1 = pk_splitmix_unit(key + 2 * (uint64_t)i);
        double u2 = pk_splitmix_unit(key + 2 * (uint64_t)i + 1);
        return rn_regime_apply(g, g->a + g->b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2),
                               i);
    }
    case 1: /* uniform */
        return rn_regime_apply(g, g->a + (g->b - g->a) * pk_splitmix_unit(key + i), i);
    case 2: { /* lattice: k/16, k in [-16, 16]; sums of 8 stay exact in bf16 */
        int k = (int)(pk_splitmix64(key + i) % 33) - 16;
        return integer ? (double)k : k / 16.0;
    }
    case 3: /* int */
        return (double)(g->lo + (long long)(pk_splitmix64(key + i) %
                                            (unsigned long long)(g->hi - g->lo + 1)));
    default: /* index */
        return (double)(pk_splitmix64(key + i) % (unsigned long long)g->hi);
    }
}

/* The secret byte a guard zone holds at arena offset `off`. */
static inline PK_HD uint8_t rn_guard_byte(uint64_t seed, size_t off) {
    return (uint8_t)(pk_splitmix64(seed + (off >> 3)) >> ((off & 7) * 8));
}

/* Sample position k of an argument with `count` elements: every element when count <= n. */
static inline PK_HD size_t rn_sample_pos(uint64_t key, size_t count, size_t n, size_t k) {
    return count <= n ? k : (size_t)(pk_splitmix64(key + k) % count);
}

#endif
