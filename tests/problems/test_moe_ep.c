/* The expert-parallel MoE pieces of pkb/49-51 (problems/include/pk_moe_ep.cuh, issue #29): EP
 * groups and expert owners at W = 2, 4, 8 for E = W, 2W and PKB's narrow E; the admissible top-K
 * sets under ties and near ties; the subset enumeration; the row checker, which accepts every
 * admissible choice among tied experts and rejects what a lax checker would let through (the
 * average of two choices, the tied slot dropped, weights assumed 1/K, a NaN); the router's modes
 * (an empty expert and a hot one, an exact tie at the K-th place, ranks that differ). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pk_splitmix.h"

void pk_test_moe_ep_group(int world, int E, int rank, int *size, int *first, int *El,
                          int *owner0); /* moe_ep_cxx.cpp */
int pk_test_moe_ep_narrow(int world);
void pk_test_moe_ep_admissible(const float *z, int E, int K, float margin, uint64_t *must,
                               uint64_t *tied, int *pick);
uint64_t pk_test_moe_ep_topk(const float *z, int E, int K);
float pk_test_moe_ep_margin(const float *z, int E, int K);
void pk_test_moe_ep_softmax(const float *z, int E, float *p);
uint64_t pk_test_moe_ep_first_subset(uint64_t of, int k);
uint64_t pk_test_moe_ep_next_subset(uint64_t s, uint64_t of);
int pk_test_moe_ep_row_match(const float *got, const float *F, int E, int N, const float *p,
                             uint64_t must, uint64_t tied, int pick, float atol, float rtol,
                             float wtol, float *worst);
float pk_test_moe_ep_router(uint64_t seed, int key, int rank, int E, int El, int N, int e, int n);

static double normal(uint64_t k) {
    double u1 = pk_splitmix_unit(k), u2 = pk_splitmix_unit(k ^ 0x9e37ULL);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void groups_and_owners(void **state) {
    (void)state;
    for (int W = 2; W <= 8; W *= 2) {
        int narrow = pk_test_moe_ep_narrow(W);
        assert_int_equal(narrow, W == 2 ? 1 : W / 2); /* PKB: the largest E < W dividing W */
        for (int r = 0; r < W; r++) {
            int size, first, El, o0;
            pk_test_moe_ep_group(W, W, r, &size, &first, &El, &o0); /* 49 */
            assert_int_equal(size, W);
            assert_int_equal(first, 0);
            assert_int_equal(El, 1);
            pk_test_moe_ep_group(W, 2 * W, r, &size, &first, &El, &o0); /* 50 */
            assert_int_equal(size, W);
            assert_int_equal(El, 2);
            pk_test_moe_ep_group(W, narrow, r, &size, &first, &El, &o0); /* 51 */
            assert_int_equal(size, narrow);
            assert_int_equal(first, r / narrow * narrow);
            assert_int_equal(El, 1);
            assert_int_equal(o0, first);
        }
    }
}

static void admissible_sets(void **state) {
    (void)state;
    uint64_t must, tied;
    int pick;
    const float clear[4] = {3.f, -1.f, 2.f, 0.f};
    pk_test_moe_ep_admissible(clear, 4, 2, 0.1f, &must, &tied, &pick);
    assert_int_equal(must, 0x5);
    assert_int_equal(tied, 0);
    assert_int_equal(pick, 0);
    assert_int_equal(pk_test_moe_ep_topk(clear, 4, 2), 0x5);
    const float tie[4] = {3.f, 1.f, 0.f, 1.f}; /* 1 and 3 tie for the 2nd place */
    pk_test_moe_ep_admissible(tie, 4, 2, 0.f, &must, &tied, &pick);
    assert_int_equal(must, 0x1);
    assert_int_equal(tied, 0xa);
    assert_int_equal(pick, 1);
    assert_int_equal(pk_test_moe_ep_topk(tie, 4, 2), 0x3); /* the lower index */
    const float both[4] = {1.f, 1.f, 0.f, -1.f};           /* a tie inside the top 2: no choice */
    pk_test_moe_ep_admissible(both, 4, 2, 0.f, &must, &tied, &pick);
    assert_int_equal(must, 0x3);
    assert_int_equal(pick, 0);
    const float near[4] = {3.f, 1.f, 0.f, 0.99f}; /* within the margin */
    pk_test_moe_ep_admissible(near, 4, 2, pk_test_moe_ep_margin(near, 4, 2), &must, &tied, &pick);
    assert_int_equal(must, 0x1);
    assert_int_equal(tied, 0xa);
    pk_test_moe_ep_admissible(near, 4, 2, 0.001f, &must, &tied, &pick); /* outside it */
    assert_int_equal(must, 0x3);
    assert_int_equal(tied, 0);
    /* the margin is taken at the K-th place: an expert at -60 does not widen it */
    const float far[4] = {1.f, 0.9f, 0.f, -60.f};
    assert_true(pk_test_moe_ep_margin(far, 4, 2) < 0.04f);
    const float flat[8] = {0}; /* every expert ties: any 2 of 8 */
    pk_test_moe_ep_admissible(flat, 8, 2, 0.f, &must, &tied, &pick);
    assert_int_equal(must, 0);
    assert_int_equal(tied, 0xff);
    assert_int_equal(pick, 2);
    const float two[2] = {5.f, -5.f}; /* E = K: both always */
    pk_test_moe_ep_admissible(two, 2, 2, 1.f, &must, &tied, &pick);
    assert_int_equal(must, 0x3);
    assert_int_equal(pick, 0);
}

static void subsets_enumerated_once(void **state) {
    (void)state;
    const uint64_t sets[3] = {0xffULL, 0x8000000000000a51ULL, 0xffffULL};
    for (int t = 0; t < 3; t++) {
        int n = 0;
        for (uint64_t o = sets[t]; o; o &= o - 1)
            n++;
        for (int k = 1; k <= 4 && k <= n; k++) {
            long count = 0, want = 1;
            for (int i = 0; i < k; i++)
                want = want * (n - i) / (i + 1);
            uint64_t prev = 0;
            for (uint64_t s = pk_test_moe_ep_first_subset(sets[t], k); s;
                 s = pk_test_moe_ep_next_subset(s, sets[t])) {
                int c = 0;
                for (uint64_t x = s; x; x &= x - 1)
                    c++;
                assert_int_equal(c, k);
                assert_int_equal(s & ~sets[t], 0);
                assert_true(s != prev);
                prev = s;
                count++;
                assert_true(count <= want);
            }
            assert_int_equal(count, want);
        }
    }
    assert_int_equal(pk_test_moe_ep_first_subset(0x3, 3), 0);
}

#define RE 4
#define RN 64

static void row_checker(void **state) {
    (void)state;
    float F[RE * RN], z[RE] = {2.f, 0.5f, -1.f, 0.5f}, p[RE], got[RN], worst;
    for (int i = 0; i < RE * RN; i++)
        F[i] = (float)normal(1000 + (uint64_t)i);
    pk_test_moe_ep_softmax(z, RE, p);
    uint64_t must, tied;
    int pick;
    pk_test_moe_ep_admissible(z, RE, 2, pk_test_moe_ep_margin(z, RE, 2), &must, &tied, &pick);
    assert_int_equal(must, 0x1);
    assert_int_equal(tied, 0xa);
    const float atol = 1e-3f, rtol = 0.02f, wtol = 0.02f;
    for (int alt = 1; alt <= 3; alt += 2) { /* either tied expert: accepted */
        for (int n = 0; n < RN; n++)
            got[n] = p[0] * F[n] + p[alt] * F[alt * RN + n];
        assert_true(pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol,
                                             &worst) >= 0);
        assert_true(worst <= 1.f);
        got[7] *= 1.01f; /* rounding-size changes still pass */
        assert_true(pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol,
                                             &worst) >= 0);
    }
    /* What an exemption of tied tokens would accept, and this checker must not. */
    for (int n = 0; n < RN; n++) /* the average of the two admissible rows */
        got[n] = p[0] * F[n] + 0.5f * p[1] * (F[RN + n] + F[3 * RN + n]);
    assert_int_equal(
        pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol, &worst),
        -1);
    assert_true(worst > 1.f);
    for (int n = 0; n < RN; n++) /* the tied slot dropped */
        got[n] = p[0] * F[n];
    assert_int_equal(
        pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol, &worst),
        -1);
    for (int n = 0; n < RN; n++) /* a non-admissible expert (2) */
        got[n] = p[0] * F[n] + p[2] * F[2 * RN + n];
    assert_int_equal(
        pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol, &worst),
        -1);
    for (int n = 0; n < RN; n++) /* weights assumed 1/K */
        got[n] = 0.5f * F[n] + 0.5f * F[RN + n];
    assert_int_equal(
        pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol, &worst),
        -1);
    float q[RE]; /* the normaliser over a subsample: softmax of experts 0-1 only */
    pk_test_moe_ep_softmax(z, 2, q);
    for (int n = 0; n < RN; n++)
        got[n] = q[0] * F[n] + q[1] * F[RN + n];
    assert_int_equal(
        pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol, &worst),
        -1);
    for (int n = 0; n < RN; n++)
        got[n] = p[0] * F[n] + p[1] * F[RN + n];
    got[RN - 1] = NAN;
    assert_int_equal(
        pk_test_moe_ep_row_match(got, F, RE, RN, p, must, tied, pick, atol, rtol, wtol, &worst),
        -1);
}

#define XN 256
#define XM 4000

/* Routes XM tokens of N(0, 1) data through rank's router for (seed, key): per expert, the tokens
 * whose top K holds it; the tokens with a choice (pick > 0) at the K-th place. */
static void route_counts(uint64_t seed, int key, int rank, int E, int El, int K, long *cnt,
                         long *choice, uint64_t *tied_union) {
    static float Wg[16 * XN];
    float b[16];
    for (int e = 0; e < E; e++) {
        for (int n = 0; n < XN; n++)
            Wg[e * XN + n] = pk_test_moe_ep_router(seed, key, rank, E, El, XN, e, n);
        b[e] = pk_test_moe_ep_router(seed, key, rank, E, El, XN, e, -1);
        cnt[e] = 0;
    }
    *choice = 0;
    *tied_union = 0;
    for (int m = 0; m < XM; m++) {
        float z[16];
        for (int e = 0; e < E; e++) {
            float s = b[e];
            for (int n = 0; n < XN; n++)
                s += (float)normal(((uint64_t)rank << 40) + (uint64_t)m * XN + (uint64_t)n) *
                     Wg[e * XN + n];
            z[e] = s;
        }
        uint64_t top = pk_test_moe_ep_topk(z, E, K), must, tied;
        int pick;
        for (int e = 0; e < E; e++)
            cnt[e] += (top >> e) & 1;
        pk_test_moe_ep_admissible(z, E, K, pk_test_moe_ep_margin(z, E, K), &must, &tied, &pick);
        if (pick > 0) {
            (*choice)++;
            *tied_union |= tied;
        }
    }
}

static void router_modes(void **state) {
    (void)state;
    for (int E = 4; E <= 16; E *= 2) {
        const int El = E > 8 ? 2 : 1;
        long cnt[16], choice;
        uint64_t tu;
        /* mode 2: one expert in (almost) every token's top 2, one in none */
        route_counts(11, 2, 1, E, El, 2, cnt, &choice, &tu);
        int hot = 0, empty = 0;
        for (int e = 0; e < E; e++) {
            hot += cnt[e] > XM * 95 / 100;
            empty += cnt[e] == 0;
        }
        assert_int_equal(hot, 1);
        assert_true(empty >= 1);
        /* mode 3: an exact tie of two experts of different ranks at the K-th place */
        route_counts(11, 3, 0, E, El, 2, cnt, &choice, &tu);
        assert_true(choice > XM / 20);
        int pairs = 0;
        for (int e = 0; e < E; e++)
            for (int f = e + 1; f < E; f++) {
                int same = 1;
                for (int n = -1; n < 8 && same; n++)
                    same = pk_test_moe_ep_router(11, 3, 0, E, El, XN, e, n) ==
                           pk_test_moe_ep_router(11, 3, 0, E, El, XN, f, n);
                if (same) {
                    pairs++;
                    assert_int_equal(f - e == El || e + E - f == El, 1); /* neighbouring ranks */
                }
            }
        assert_int_equal(pairs, 1);
        /* mode 1: the biases differ across ranks */
        assert_true(pk_test_moe_ep_router(11, 1, 0, E, El, XN, 0, -1) !=
                    pk_test_moe_ep_router(11, 1, 1, E, El, XN, 0, -1));
        /* mode 0: near-balanced */
        route_counts(11, 0, 0, E, El, 2, cnt, &choice, &tu);
        for (int e = 0; e < E; e++)
            assert_true(cnt[e] > 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(groups_and_owners), cmocka_unit_test(admissible_sets),
        cmocka_unit_test(subsets_enumerated_once), cmocka_unit_test(row_checker),
        cmocka_unit_test(router_modes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
