/* The routing design and router of pkb/31 and 32 (problems/include/pk_moe_ffn.cuh, issue #29):
 * PyTorch's router (bf16 logits accumulated in fp32, in either order; bf16 softmax; top-k)
 * picks exactly pk_moe_route's experts in slot order on generate()'s inputs, with a margin of
 * at least 0.45 between the K-th and (K+1)-th logit (6 in the balanced mode) at W = 2, 4, 8 and
 * in every mode; the hot_empty mode keeps an expert without a token and one with most; top-k
 * ties go to the lower index; pk_bf16r rounds to nearest even. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

float pk_test_bf16r(float x); /* moe_ffn_cxx.cpp */
int pk_test_moe_router(const float *logits, int E, int K, int *sel);
long pk_test_moe_design(uint64_t seed, int key, int world, int E, int K, int rank, long M, long N,
                        int rev, double *margin, long *tokens);

#define E 8
#define K 2

static void bf16_rounds_to_nearest_even(void **state) {
    (void)state;
    assert_true(pk_test_bf16r(1.0f + 1.0f / 256) == 1.0f);              /* tie: even */
    assert_true(pk_test_bf16r(1.0f + 3.0f / 256) == 1.0f + 4.0f / 256); /* tie: even */
    assert_true(pk_test_bf16r(1.0f + 1.5f / 256) == 1.0f + 2.0f / 256); /* above the tie */
    assert_true(pk_test_bf16r(-3.0f) == -3.0f);
}

static void router_ties_take_the_lower_index(void **state) {
    (void)state;
    const float l[E] = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, 0.f, 1.0f, -1.f};
    int sel[3];
    pk_test_moe_router(l, E, 3, sel);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 3);
    assert_int_equal(sel[2], 2);
}

static void design_routes_exactly(void **state) {
    (void)state;
    for (int world = 2; world <= 8; world *= 2)
        for (int key = 0; key < 8; key++)
            for (int rev = 0; rev < 2; rev++) {
                const int rank = (key + rev) % world;
                double margin;
                long tokens[E];
                assert_int_equal(pk_test_moe_design(100 + (uint64_t)world, key, world, E, K, rank,
                                                    400, 96, rev, &margin, tokens),
                                 0);
                assert_true(margin >= (key % 4 == 0 ? 5.9 : 0.45));
                if (key % 4 == 2) { /* hot_empty: one expert without a token, one with most */
                    int empty = 0;
                    long hot = 0;
                    for (int e = 0; e < E; e++) {
                        empty += tokens[e] == 0;
                        hot = tokens[e] > hot ? tokens[e] : hot;
                    }
                    assert_true(empty >= 1);
                    assert_true(hot > 300);
                }
            }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(bf16_rounds_to_nearest_even),
                                       cmocka_unit_test(router_ties_take_the_lower_index),
                                       cmocka_unit_test(design_routes_exactly)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
