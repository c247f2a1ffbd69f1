/* Pieces of pk-runner that need no processes: timing statistics, the input generator, the
 * host backend's poisoning and comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "pk_runner.h"

static void timing_statistics(void **state) {
    (void)state;
    const double us[] = {10, 12, 11, 100, 9};
    pk_timing t;
    rn_timing_stats(us, 5, &t);
    assert_true(t.median_us == 11);
    assert_true(t.min_us == 9);
    assert_true(fabs(t.mean_us - 28.4) < 1e-9);
    assert_true(t.cv > 1.0); /* one outlier dominates the spread, not the median */
    assert_int_equal(t.iters, 5);
    const double even[] = {4, 1, 3, 2};
    rn_timing_stats(even, 4, &t);
    assert_true(t.median_us == 2.5);
    const double flat[] = {7, 7, 7};
    rn_timing_stats(flat, 3, &t);
    assert_true(t.cv == 0);
}

static void generator_is_deterministic_and_exact(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    assert_int_equal(rn_backend_host_init(&b, &ctx), 0);
    float a[4096], again[4096], other_rank[4096], other_trial[4096];
    b.generate(&b, a, PK_DTYPE_F32, 4096, rn_stream_key(42, 0, 0, 0));
    b.generate(&b, again, PK_DTYPE_F32, 4096, rn_stream_key(42, 0, 0, 0));
    b.generate(&b, other_rank, PK_DTYPE_F32, 4096, rn_stream_key(42, 0, 1, 0));
    b.generate(&b, other_trial, PK_DTYPE_F32, 4096, rn_stream_key(42, 1, 0, 0));
    assert_memory_equal(a, again, sizeof a);
    assert_memory_not_equal(a, other_rank, sizeof a);
    assert_memory_not_equal(a, other_trial, sizeof a);
    int seen_min = 0, seen_max = 0;
    for (int i = 0; i < 4096; i++) {
        assert_true(a[i] >= -1 && a[i] <= 1);
        assert_true(a[i] * 16 == floorf(a[i] * 16)); /* multiples of 1/16: sums stay exact */
        seen_min |= a[i] == -1;
        seen_max |= a[i] == 1;
    }
    assert_true(seen_min && seen_max);
}

static void poison_and_compare(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    float want[8] = {1, 2, 3, 4, 5, 6, 7, 8}, got[8];
    b.poison(&b, got, PK_DTYPE_F32, 8);
    for (int i = 0; i < 8; i++)
        assert_true(isnan(got[i]));
    rn_compare c;
    b.compare(&b, got, want, PK_DTYPE_F32, 8, 1e-5, 1e-5, &c);
    assert_int_equal(c.bad_index, 0); /* NaN never passes */
    memcpy(got, want, sizeof got);
    got[5] = 6.5f;
    b.compare(&b, got, want, PK_DTYPE_F32, 8, 1e-5, 1e-5, &c);
    assert_int_equal(c.bad_index, 5);
    assert_true(c.expected == 6 && c.got == 6.5);
    assert_true(fabs(c.max_abs - 0.5) < 1e-12);
    got[5] = 6.0f * (1 + 1e-6f); /* inside the tolerance */
    b.compare(&b, got, want, PK_DTYPE_F32, 8, 1e-5, 1e-5, &c);
    assert_int_equal(c.bad_index, -1);
    int32_t ints[4];
    b.poison(&b, ints, PK_DTYPE_I32, 4);
    assert_int_equal(ints[3], 0x7f7f7f7f);
    uint16_t bf[4];
    b.generate(&b, bf, PK_DTYPE_BF16, 4, 7);
    float asf[4];
    b.generate(&b, asf, PK_DTYPE_F32, 4, 7);
    b.compare(&b, bf, asf, PK_DTYPE_BF16, 0, 0, 0, &c); /* zero elements: nothing to fail */
    assert_int_equal(c.bad_index, -1);
    for (int i = 0; i < 4; i++) { /* bf16 holds the generator's values exactly */
        uint32_t bits = (uint32_t)bf[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        assert_true(f == asf[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timing_statistics),
        cmocka_unit_test(generator_is_deterministic_and_exact),
        cmocka_unit_test(poison_and_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
