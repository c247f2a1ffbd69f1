/* Values the runner computes identically on the host and on the GPU: generated inputs, guard
 * zone patterns and sample positions. Every value is a pure function of (key, index), so the
 * harness can regenerate any input or pattern byte later to check it. */
#ifndef RN_VALUES_H
#define RN_VALUES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "pk_splitmix.h"

/* An argument's generator with its integer bounds evaluated (pk_gen_spec at one size). */
typedef struct rn_gen {
    int kind; /* pk_gen_kind */
    double a, b;
    long long lo, hi; /* int: [lo, hi]; index: [0, hi) */
    uint64_t offset;  /* element i is drawn as element offset + i (sharded scope) */
} rn_gen;

/* Element i of the stream `key`, as a double (integers are exact up to 2^53). */
static inline PK_HD double rn_gen_value(const rn_gen *g, int integer, uint64_t key, size_t i) {
    i += g->offset;
    switch (g->kind) {
    case 0: { /* normal: Box-Muller from two independent uniforms */
        double u1 = pk_splitmix_unit(key + 2 * (uint64_t)i);
        double u2 = pk_splitmix_unit(key + 2 * (uint64_t)i + 1);
        return g->a + g->b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    }
    case 1: /* uniform */
        return g->a + (g->b - g->a) * pk_splitmix_unit(key + i);
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
