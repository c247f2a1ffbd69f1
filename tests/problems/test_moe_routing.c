/* The MoE routings of pkb/26-28 (problems/include/pk_moe_routing.cuh, issue #29): every token's
 * experts are distinct; balanced stays near 1/E; skewed differs across ranks; hot_empty has an
 * expert that takes most tokens and one that gets none, on every rank; group_empty leaves each
 * rank's chosen rank group without a token, so split sizes of zero appear. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

long pk_test_moe_counts(uint64_t seed, int key, int world, int E, int K, int rank, long M,
                        long *counts); /* moe_routing_cxx.cpp */
int pk_test_moe_mode(int key);

#define E 8
#define K 2
#define M 20000

static void expert_totals(uint64_t seed, int key, int world, int rank, long tot[E]) {
    long c[K * E];
    assert_int_equal(pk_test_moe_counts(seed, key, world, E, K, rank, M, c), 0);
    for (int e = 0; e < E; e++)
        tot[e] = c[e] + c[E + e];
}

static void modes_follow_the_key(void **state) {
    (void)state;
    for (int key = -8; key < 8; key++)
        assert_int_equal(pk_test_moe_mode(key), ((key % 4) + 4) % 4);
}

static void balanced_is_near_uniform(void **state) {
    (void)state;
    long tot[E];
    expert_totals(7, 0, 2, 1, tot);
    for (int e = 0; e < E; e++) /* K * M / E = 5000 each, binomial sd ~ 66 */
        assert_true(tot[e] > 4700 && tot[e] < 5300);
}

static void hot_and_empty_experts(void **state) {
    (void)state;
    for (int world = 2; world <= 8; world *= 2)
        for (uint64_t seed = 1; seed < 4; seed++) {
            int hot = -1, empty = -1;
            for (int rank = 0; rank < world; rank++) {
                long tot[E];
                expert_totals(seed, 2 + 4 * (int)seed, world, rank, tot);
                int h = 0, z = -1;
                for (int e = 0; e < E; e++) {
                    h = tot[e] > tot[h] ? e : h;
                    z = tot[e] == 0 ? e : z;
                }
                assert_true(tot[h] > 9 * M / 10); /* most tokens, in one of their slots */
                assert_true(z >= 0);
                if (rank == 0) {
                    hot = h;
                    empty = z;
                }
                assert_int_equal(h, hot); /* the same experts on every rank */
                assert_int_equal(z, empty);
            }
        }
}

static void group_empty_has_zero_splits(void **state) {
    (void)state;
    for (int world = 2; world <= 8; world *= 2) {
        int zero = 0;
        for (int rank = 0; rank < world; rank++) {
            long tot[E];
            expert_totals(11, 3, world, rank, tot);
            for (int g = 0; g < world; g++) {
                long split = 0;
                for (int e = g * (E / world); e < (g + 1) * (E / world); e++)
                    split += tot[e];
                zero += split == 0;
            }
        }
        assert_true(zero >= world); /* every rank leaves one rank group out */
    }
}

static void skewed_differs_across_ranks(void **state) {
    (void)state;
    long a[E], b[E];
    expert_totals(5, 1, 4, 0, a);
    expert_totals(5, 1, 4, 1, b);
    long lo = a[0], hi = a[0], diff = 0;
    for (int e = 0; e < E; e++) {
        lo = a[e] < lo ? a[e] : lo;
        hi = a[e] > hi ? a[e] : hi;
        diff += a[e] > b[e] ? a[e] - b[e] : b[e] - a[e];
    }
    assert_true(hi > 3 * lo);  /* skewed within a rank */
    assert_true(diff > M / 5); /* and differently on another rank */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modes_follow_the_key), cmocka_unit_test(balanced_is_near_uniform),
        cmocka_unit_test(hot_and_empty_experts), cmocka_unit_test(group_empty_has_zero_splits),
        cmocka_unit_test(skewed_differs_across_ranks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
