/* Pieces of pk-runner that need no processes: timing statistics, the input generators, the
 * host backend's poisoning and comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "pk_runner.h"
#include "rn_elem.h"

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

static const rn_gen lattice = {.kind = PK_GEN_LATTICE};
static const rn_gen normal01 = {.kind = PK_GEN_NORMAL, .b = 1};

static void generator_is_deterministic_and_exact(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    assert_int_equal(rn_backend_host_init(&b, &ctx), 0);
    float a[4096], again[4096], other_rank[4096], other_trial[4096];
    b.generate(&b, a, PK_DTYPE_F32, 4096, rn_stream_key(42, 0, 0, 0), &lattice);
    b.generate(&b, again, PK_DTYPE_F32, 4096, rn_stream_key(42, 0, 0, 0), &lattice);
    b.generate(&b, other_rank, PK_DTYPE_F32, 4096, rn_stream_key(42, 0, 1, 0), &lattice);
    b.generate(&b, other_trial, PK_DTYPE_F32, 4096, rn_stream_key(42, 1, 0, 0), &lattice);
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
    b.generate(&b, bf, PK_DTYPE_BF16, 4, 7, &lattice);
    float asf[4];
    b.generate(&b, asf, PK_DTYPE_F32, 4, 7, &lattice);
    b.compare(&b, bf, asf, PK_DTYPE_BF16, 0, 0, 0, &c); /* zero elements: nothing to fail */
    assert_int_equal(c.bad_index, -1);
    for (int i = 0; i < 4; i++) { /* bf16 holds the generator's values exactly */
        uint32_t bits = (uint32_t)bf[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        assert_true(f == asf[i]);
    }
}

/* normal(0, 1) uses the full mantissa (unlike the lattice) and has the right moments. */
static void normal_generator_moments(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    enum { N = 200000 };
    static float x[N];
    b.generate(&b, x, PK_DTYPE_F32, N, rn_stream_key(7, 0, 0, 0), &normal01);
    double sum = 0, sq = 0;
    int off_lattice = 0;
    for (int i = 0; i < N; i++) {
        sum += x[i];
        sq += (double)x[i] * x[i];
        off_lattice += x[i] * 16 != floorf(x[i] * 16);
    }
    double mean = sum / N, var = sq / N - mean * mean;
    assert_true(fabs(mean) < 0.01);
    assert_true(fabs(var - 1) < 0.02);
    assert_true(off_lattice > N * 9 / 10);
    rn_gen shifted = {.kind = PK_GEN_NORMAL, .a = 5, .b = 0.5},
           unif = {.kind = PK_GEN_UNIFORM, .a = -2, .b = 3};
    b.generate(&b, x, PK_DTYPE_F32, N, 11, &shifted);
    sum = 0;
    for (int i = 0; i < N; i++)
        sum += x[i];
    assert_true(fabs(sum / N - 5) < 0.01);
    b.generate(&b, x, PK_DTYPE_F32, N, 12, &unif);
    float lo = 1e9f, hi = -1e9f;
    for (int i = 0; i < N; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    assert_true(lo >= -2 && lo < -1.99f && hi <= 3 && hi > 2.99f);
}

static void integer_and_index_generators(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    int64_t idx[5000];
    int32_t ints[5000];
    rn_gen index = {.kind = PK_GEN_INDEX, .hi = 37},
           range = {.kind = PK_GEN_INT, .lo = -3, .hi = 4};
    b.generate(&b, idx, PK_DTYPE_I64, 5000, 3, &index);
    b.generate(&b, ints, PK_DTYPE_I32, 5000, 4, &range);
    int seen_top = 0, seen_lo = 0, seen_hi = 0;
    for (int i = 0; i < 5000; i++) {
        assert_true(idx[i] >= 0 && idx[i] < 37);
        assert_true(ints[i] >= -3 && ints[i] <= 4);
        seen_top |= idx[i] == 36;
        seen_lo |= ints[i] == -3;
        seen_hi |= ints[i] == 4;
    }
    assert_true(seen_top && seen_lo && seen_hi);
}

/* The element codecs: round to nearest even, fp8 e4m3fn's range and NaN, f16 subnormals. */
static void element_codecs(void **state) {
    (void)state;
    /* fp8 e4m3fn: 448 is the largest, 0x7f NaN, 2^-9 the smallest subnormal. */
    assert_int_equal(rn_f64_to_fp8(448.0), 0x7e);
    assert_true(rn_fp8_to_f64(0x7e) == 448.0);
    assert_int_equal(rn_f64_to_fp8(1000.0), 0x7e); /* saturates */
    assert_int_equal(rn_f64_to_fp8(-1000.0), 0xfe);
    assert_true(isnan(rn_fp8_to_f64(0x7f)) && isnan(rn_fp8_to_f64(0xff)));
    assert_int_equal(rn_f64_to_fp8(NAN), 0x7f);
    assert_true(rn_fp8_to_f64(0x01) == 1.0 / 512);
    assert_int_equal(rn_f64_to_fp8(1.0), 0x38);
    assert_int_equal(rn_f64_to_fp8(1.0625), 0x38); /* a tie between 1 and 1.125: even */
    assert_int_equal(rn_f64_to_fp8(1.1875), 0x3a); /* a tie between 1.125 and 1.25: even */
    for (int b = 0; b < 256; b++) {                /* every finite code round-trips */
        double v = rn_fp8_to_f64((uint8_t)b);
        if (!isnan(v) && b != 0x80) /* -0 encodes as +0 */
            assert_int_equal(rn_f64_to_fp8(v), b);
    }
    /* f16 and bf16, ties to even, and the f16 subnormal range. */
    assert_int_equal(rn_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(rn_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(rn_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(rn_f32_to_f16(5.9604645e-8f), 0x0001); /* 2^-24 */
    assert_int_equal(rn_f32_to_f16(2.9802322e-8f), 0x0000); /* 2^-25: the tie goes to 0 */
    assert_true(rn_f16_to_f64(0x0001) == ldexp(1.0, -24));
    assert_int_equal(rn_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(rn_f32_to_bf16(1.00390625f), 0x3f80); /* 1 + 2^-8: tie to even */
    assert_int_equal(rn_f32_to_bf16(1.01171875f), 0x3f82); /* 1 + 3 2^-8: tie to even, up */
    /* ulp distances: adjacent codes are 1 apart across zero too. */
    uint8_t a8[2] = {0x01, 0x81};
    assert_int_equal(rn_ulp_distance(a8, a8 + 1, PK_DTYPE_F8E4M3, 0), 2);
    int8_t i8a = -3, i8b = 4;
    assert_int_equal(rn_ulp_distance(&i8a, &i8b, PK_DTYPE_I8, 0), 7);
    uint8_t p = 0;
    rn_poison(&p, PK_DTYPE_F8E4M3, 0);
    assert_true(isnan(rn_load(&p, PK_DTYPE_F8E4M3, 0)));
}

/* The budget checker's inputs: how many elements miss, and by how many representable values. */
static void compare_counts_misses_and_ulps(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    int8_t want[6] = {1, 2, 3, 4, 5, 6}, got[6] = {1, 3, 3, 4, 2, 6};
    rn_compare c;
    b.compare(&b, got, want, PK_DTYPE_I8, 6, 0, 0, &c);
    assert_int_equal(c.n_bad, 2);
    assert_int_equal(c.max_ulp, 3);
    assert_int_equal(c.bad_index, 1);
    double rms;
    float v[4] = {3, 4, 0, 0};
    b.rms(&b, v, PK_DTYPE_F32, 4, &rms);
    assert_true(fabs(rms - 2.5) < 1e-12);
}

/* A sharded argument is one global draw: rank r's element i is global element r*count + i. */
static void sharded_generator_slices_one_draw(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    float global[64], r1[16];
    rn_gen g = {.kind = PK_GEN_NORMAL, .b = 1};
    b.generate(&b, global, PK_DTYPE_F32, 64, 77, &g);
    g.offset = 16; /* rank 1 of 4, 16 elements each */
    b.generate(&b, r1, PK_DTYPE_F32, 16, 77, &g);
    assert_memory_equal(r1, global + 16, sizeof r1);
}

/* Sample positions and gather: every element when the argument is small, else in range. */
static void samples_and_gather(void **state) {
    (void)state;
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    uint64_t pos[64];
    b.sample_positions(&b, pos, 99, 10, 10);
    for (uint64_t k = 0; k < 10; k++)
        assert_true(pos[k] == k);
    b.sample_positions(&b, pos, 99, 1000000, 64);
    int distinct = 0;
    for (int k = 0; k < 64; k++) {
        assert_true(pos[k] < 1000000);
        distinct += k == 0 || pos[k] != pos[k - 1];
    }
    assert_true(distinct > 60);
    int32_t src[100], dst[4];
    for (int i = 0; i < 100; i++)
        src[i] = i * 3;
    uint64_t p4[4] = {7, 0, 99, 7};
    b.gather(&b, dst, src, 4, p4, 4);
    assert_true(dst[0] == 21 && dst[1] == 0 && dst[2] == 297 && dst[3] == 21);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timing_statistics),
        cmocka_unit_test(generator_is_deterministic_and_exact),
        cmocka_unit_test(poison_and_compare),
        cmocka_unit_test(normal_generator_moments),
        cmocka_unit_test(integer_and_index_generators),
        cmocka_unit_test(samples_and_gather),
        cmocka_unit_test(sharded_generator_slices_one_draw),
        cmocka_unit_test(element_codecs),
        cmocka_unit_test(compare_counts_misses_and_ulps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
