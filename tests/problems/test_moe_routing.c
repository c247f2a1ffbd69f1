/* The MoE routings of pkb/26-28 (problems/include/pk_moe_routing.cuh, issue #29): every token's
 * experts are distinct; balanced stays near 1/E; skewed differs across ranks; hot_empty has an
 * expert that takes most tokens and one that gets none, on every rank; group_empty leaves each
 * rank's chosen rank group without a token, so split sizes of zero appear. The split matrices
 * and skewed degrees of problems/include/pk_splits.cuh (issue 33) too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

long pk_test_moe_counts(uint64_t seed, int key, int world, int E, int K, int rank, long M,
                        long *counts); /* moe_routing_cxx.cpp */
int pk_test_moe_mode(int key);
void pk_test_splits(uint64_t seed, uint64_t salt, int key, int world, long long rows, long long cap,
                    long long *out);
long long pk_test_skewed_id(uint64_t h, int mode, long long n);
uint64_t pk_test_hash(uint64_t x);

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

/* pk_splits.cuh: every mode's matrices are valid (rows sum to M, columns at most C, no
 * negative count) at W = 2..8; skewed gives zeros, hot a full column, local 80% on the diagonal;
 * and salt 0x65326100 gives pkb/65's own matrices (its make_splits, here from
 * bench/pkb/sim_65_gnn_feature_exchange_all2all.py's port: seed 123, W = 4, M = 1000, C = 2000). */
static void splits_are_valid_and_skewed(void **state) {
    (void)state;
    long long S[64];
    int zeros = 0, full = 0;
    for (int world = 2; world <= 8; world++)
        for (int key = 0; key < 40; key++) {
            const long long rows = 1000 + key, cap = 2 * rows;
            pk_test_splits(77 + (uint64_t)key, 0x66326100ULL, key, world, rows, cap, S);
            for (int i = 0; i < world; i++) {
                long long row = 0, col = 0;
                for (int j = 0; j < world; j++) {
                    assert_true(S[i * world + j] >= 0);
                    row += S[i * world + j];
                    col += S[j * world + i];
                    zeros += key % 4 == 1 && S[i * world + j] == 0;
                }
                assert_int_equal(row, rows);
                assert_true(col <= cap);
                full += key % 4 == 2 && col > cap - world; /* cap / W rows from each */
                if (key % 4 == 0)
                    assert_int_equal(S[i * world + i],
                                     rows / world + (i == world - 1) * (rows % world));
                if (key % 4 == 3)
                    assert_int_equal(S[i * world + i], rows - rows / 5);
            }
        }
    assert_true(zeros > 50);
    assert_true(full >= 7 * 10); /* a hot receiver in every hot call */
    static const long long want[3][16] = {
        {535, 412, 53, 0, 74, 436, 468, 22, 22, 44, 0, 934, 48, 952, 0, 0},
        {500, 95, 192, 213, 500, 157, 343, 0, 500, 263, 0, 237, 500, 354, 0, 146},
        {800, 200, 0, 0, 0, 800, 200, 0, 0, 0, 800, 200, 200, 0, 0, 800}};
    for (int key = 1; key < 4; key++) {
        pk_test_splits(123, 0x65326100ULL, key, 4, 1000, 2000, S);
        for (int e = 0; e < 16; e++)
            assert_int_equal(S[e], want[key - 1][e]);
    }
}

/* pk_skewed_id: in range; uniform spread out; power law and hubs put half the draws on few ids. */
static void skewed_ids_have_hubs(void **state) {
    (void)state;
    const long long n = 4096;
    for (int mode = 0; mode < 3; mode++) {
        static long cnt[4096];
        for (long long i = 0; i < n; i++)
            cnt[i] = 0;
        const long draws = 200000;
        for (long d = 0; d < draws; d++) {
            const long long id =
                pk_test_skewed_id(pk_test_hash(1000 * (uint64_t)mode + (uint64_t)d), mode, n);
            assert_true(id >= 0 && id < n);
            cnt[id]++;
        }
        long low = 0, hubs = cnt[0] + cnt[n / 4] + cnt[n / 2] + cnt[3 * n / 4], top = 0;
        for (long long i = 0; i < n; i++) {
            low += i < n / 16 ? cnt[i] : 0;
            top = cnt[i] > top ? cnt[i] : top;
        }
        if (mode == 0) {
            assert_true(top < 100); /* mean 49 */
        } else if (mode == 1) {
            assert_true(low > draws * 45 / 100 && low < draws * 55 / 100);
        } else {
            assert_true(hubs > draws * 48 / 100 && hubs < draws * 53 / 100);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(modes_follow_the_key),
                                       cmocka_unit_test(balanced_is_near_uniform),
                                       cmocka_unit_test(hot_and_empty_experts),
                                       cmocka_unit_test(group_empty_has_zero_splits),
                                       cmocka_unit_test(skewed_differs_across_ranks),
                                       cmocka_unit_test(splits_are_valid_and_skewed),
                                       cmocka_unit_test(skewed_ids_have_hubs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
