/* Input regimes (issue #26; docs/problems.md, "Input regimes"): which regime each call draws,
 * what each regime guarantees (ranks apart, signs kept, replicated inputs equal on every rank),
 * the meta.json fields, and the norm-wise check's pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_runner.h"
#include "rn_elem.h"

enum { N_ELEMS = 4096, ROW = 64 };

typedef struct fixture {
    rn_opts o;
    rn_group g;
    pk_problem p;
    rank_state rs;
} fixture;

/* One rank's state with two inputs: x (normal, per rank, rows of ROW) and u (uniform(0, 1),
 * replicated), and a lattice input z. */
static void fixture_make(fixture *f, uint64_t seed, int rank, int world) {
    memset(f, 0, sizeof *f);
    f->o.seed = seed;
    f->o.regime = -1;
    f->g.rank = rank;
    f->g.world = world;
    f->p.n_args = 3;
    pk_gen_default(PK_DTYPE_F32, &f->p.args[0].gen);
    assert_int_equal(pk_gen_parse("uniform(0, 1)", PK_DTYPE_F32, &f->p.args[1].gen, NULL), PK_OK);
    f->p.args[1].gen.scope = PK_GEN_REPLICATED;
    assert_int_equal(pk_gen_parse("lattice", PK_DTYPE_F32, &f->p.args[2].gen, NULL), PK_OK);
    f->rs.o = &f->o;
    f->rs.g = &f->g;
    f->rs.p = &f->p;
    f->rs.ctx.rank = rank;
    f->rs.ctx.world_size = world;
    for (int i = 0; i < 3; i++) {
        f->rs.sz.counts[i] = N_ELEMS;
        f->rs.sz.row_len[i] = i == 0 ? ROW : N_ELEMS;
        f->rs.gen[i].kind = (int)f->p.args[i].gen.kind;
        f->rs.gen[i].a = f->p.args[i].gen.a;
        f->rs.gen[i].b = f->p.args[i].gen.b;
    }
}

static void defaults_and_names(void **state) {
    (void)state;
    pk_gen_spec g;
    pk_gen_default(PK_DTYPE_BF16, &g);
    assert_int_equal(g.regimes, PK_REGIMES_DEFAULT);
    assert_false(g.regimes & (1u << PK_REGIME_CANCEL)); /* opt-in only */
    pk_gen_default(PK_DTYPE_I32, &g);
    assert_int_equal(g.regimes, 1u << PK_REGIME_IID);
    assert_int_equal(pk_gen_parse("index(n)", PK_DTYPE_I64, &g, NULL), PK_OK);
    assert_int_equal(g.regimes, 1u << PK_REGIME_IID);
    assert_int_equal(pk_gen_parse("normal(0, 2)", PK_DTYPE_F16, &g, NULL), PK_OK);
    assert_int_equal(g.regimes, PK_REGIMES_DEFAULT);
    for (int r = 0; r < PK_REGIME_COUNT; r++)
        assert_int_equal(pk_regime_from_name(pk_regime_name((pk_regime)r)), r);
    assert_int_equal(pk_regime_from_name("column"), -1);
}

/* Every step's first five trials see all five default regimes, whatever the seed; timing uses
 * one regime for all its calls; a lattice input stays iid. */
static void trials_see_every_regime(void **state) {
    (void)state;
    static fixture f;
    int timed_seen[PK_REGIME_COUNT] = {0};
    for (uint64_t seed = 1; seed <= 200; seed++) {
        fixture_make(&f, seed, 0, 2);
        unsigned seen = 0;
        for (int t = 0; t < 5; t++) {
            seen |= 1u << rn_regime_of(&f.rs, t, 0);
            assert_int_equal(rn_regime_of(&f.rs, t, 2), PK_REGIME_IID);
        }
        assert_int_equal(seen, PK_REGIMES_DEFAULT);
        int timed = rn_regime_of(&f.rs, RN_KEY_TIMED_BASE, 0);
        for (int k = 1; k < 50; k++)
            assert_int_equal(rn_regime_of(&f.rs, RN_KEY_TIMED_BASE + k, 0), timed);
        timed_seen[timed]++;
    }
    /* The timing regime is drawn per step, not fixed. */
    for (int r = 0; r < PK_REGIME_CANCEL; r++)
        assert_true(timed_seen[r] > 10);
    fixture_make(&f, 7, 0, 2);
    f.o.regime = PK_REGIME_HEAVY;
    assert_int_equal(rn_regime_of(&f.rs, 3, 0), PK_REGIME_HEAVY);
    assert_int_equal(rn_regime_of(&f.rs, RN_KEY_TIMED_BASE, 0), PK_REGIME_HEAVY);
    assert_int_equal(rn_regime_of(&f.rs, 3, 2), PK_REGIME_IID); /* not allowed: its own */
}

/* The trial whose regime is `want`, for this seed (the rotation covers the five). */
static int trial_of(fixture *f, int arg, int want) {
    for (int t = 0; t < 5; t++)
        if (rn_regime_of(&f->rs, t, arg) == want)
            return t;
    fail();
    return -1;
}

/* Rank scales: in every regime but iid any two ranks at least 2^(2/W) apart (no shard stands
 * for another's); within 2^-8..2^-2 in the rank regime, 2^-2..2^2 in the others. */
static void rank_scales_keep_ranks_apart(void **state) {
    (void)state;
    static fixture f;
    const int worlds[] = {2, 4, 8};
    const int regimes[] = {PK_REGIME_RANK, PK_REGIME_ROW, PK_REGIME_HEAVY, PK_REGIME_PEAKED};
    for (int ri = 0; ri < 4; ri++)
        for (int wi = 0; wi < 3; wi++)
            for (uint64_t seed = 1; seed <= 100; seed++) {
                int world = worlds[wi], rank_regime = regimes[ri] == PK_REGIME_RANK;
                double scale[8];
                int t = -1;
                for (int r = 0; r < world; r++) {
                    fixture_make(&f, seed, r, world);
                    if (t < 0)
                        t = trial_of(&f, 0, regimes[ri]);
                    rn_gen g;
                    rn_gen_for_call(&f.rs, t, 0, &g);
                    assert_int_equal(g.regime, regimes[ri]);
                    scale[r] = g.scale;
                    /* rank: 2^-8..2^-2 (below any fixed threshold); others 2^-2..2^2 */
                    assert_true(rank_regime ? log2(scale[r]) >= -8 && log2(scale[r]) <= -2
                                            : fabs(log2(scale[r])) <= 2);
                }
                for (int a = 0; a < world; a++)
                    for (int b = a + 1; b < world; b++)
                        assert_true(fabs(log2(scale[a]) - log2(scale[b])) >= 2.0 / world - 1e-9);
            }
}

/* What the regimes do to values: a replicated input is the same on every rank; a
 * non-negative generator stays non-negative; heavy and row regimes spread the values. */
static void regimes_shape_values(void **state) {
    (void)state;
    static fixture f0, f1;
    static float a[N_ELEMS], b[N_ELEMS];
    rn_backend be;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    assert_int_equal(rn_backend_host_init(&be, &ctx), 0);
    for (uint64_t seed = 1; seed <= 20; seed++)
        for (int t = 0; t < 5; t++) {
            fixture_make(&f0, seed, 0, 2);
            fixture_make(&f1, seed, 1, 2);
            rn_gen g0, g1;
            rn_gen_for_call(&f0.rs, t, 1, &g0);
            rn_gen_for_call(&f1.rs, t, 1, &g1);
            uint64_t key = rn_stream_key(seed, t, 0, 1); /* replicated: rank 0's stream */
            be.generate(&be, a, PK_DTYPE_F32, N_ELEMS, key, &g0);
            be.generate(&be, b, PK_DTYPE_F32, N_ELEMS, key, &g1);
            assert_memory_equal(a, b, sizeof a);
            for (int i = 0; i < N_ELEMS; i++)
                assert_true(a[i] >= 0 && isfinite(a[i]));
        }
    /* Row scales: row RMS spread far beyond the iid draw's (~9% for 64 elements). */
    fixture_make(&f0, 99, 0, 2);
    rn_gen g;
    rn_gen_for_call(&f0.rs, trial_of(&f0, 0, PK_REGIME_ROW), 0, &g);
    be.generate(&be, a, PK_DTYPE_F32, N_ELEMS, rn_stream_key(99, 0, 0, 0), &g);
    double lo = INFINITY, hi = 0;
    for (int r = 0; r < N_ELEMS / ROW; r++) {
        double ss = 0;
        for (int j = 0; j < ROW; j++)
            ss += (double)a[r * ROW + j] * a[r * ROW + j];
        lo = fmin(lo, ss);
        hi = fmax(hi, ss);
    }
    assert_true(hi / lo > 16); /* rows ramp 2 to 4 octaves apart, 2^-1..2^1 each */
    /* Heavy tails: the largest |value| far above an N(0, s) sample's ~4 s. */
    rn_gen_for_call(&f0.rs, trial_of(&f0, 0, PK_REGIME_HEAVY), 0, &g);
    be.generate(&be, a, PK_DTYPE_F32, N_ELEMS, rn_stream_key(99, 1, 0, 0), &g);
    double ss = 0, peak = 0;
    for (int i = 0; i < N_ELEMS; i++) {
        ss += (double)a[i] * a[i];
        peak = fmax(peak, fabs(a[i]));
    }
    assert_true(peak > 8 * sqrt(ss / N_ELEMS));
    /* Peaked: at least one entry per 64-element row far above the rest. */
    rn_gen_for_call(&f0.rs, trial_of(&f0, 0, PK_REGIME_PEAKED), 0, &g);
    assert_true(g.amp >= 6 * g.scale && g.p > 0 && g.p <= 4.0 / ROW);
}

/* Cancel (opt-in): the same large terms on ranks 0 and 1 with opposite signs. */
static void cancel_pairs_ranks(void **state) {
    (void)state;
    static fixture f0, f1;
    static float a[N_ELEMS], b[N_ELEMS];
    rn_backend be;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    assert_int_equal(rn_backend_host_init(&be, &ctx), 0);
    fixture_make(&f0, 5, 0, 2);
    fixture_make(&f1, 5, 1, 2);
    f0.o.regime = f1.o.regime = PK_REGIME_CANCEL;
    f0.p.args[0].gen.regimes = f1.p.args[0].gen.regimes = 1u << PK_REGIME_CANCEL;
    rn_gen g0, g1;
    rn_gen_for_call(&f0.rs, 0, 0, &g0);
    rn_gen_for_call(&f1.rs, 0, 0, &g1);
    be.generate(&be, a, PK_DTYPE_F32, N_ELEMS, rn_stream_key(5, 0, 0, 0), &g0);
    be.generate(&be, b, PK_DTYPE_F32, N_ELEMS, rn_stream_key(5, 0, 1, 0), &g1);
    double sum_abs = 0, abs_sum = 0;
    for (int i = 0; i < N_ELEMS; i++) {
        sum_abs += fabs(a[i]) + fabs(b[i]);
        abs_sum += fabs((double)a[i] + b[i]);
    }
    assert_true(abs_sum * 2 < sum_abs); /* the pairs' sums are much smaller than their terms */
}

/* The host backend's compare sums what the norm-wise check needs, over the elements where the
 * relative tolerance is the larger part; the default norm tolerance is half the element-wise
 * one. */
static void norm_wise_pieces(void **state) {
    (void)state;
    rn_backend be;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    assert_int_equal(rn_backend_host_init(&be, &ctx), 0);
    float want[4] = {1, -2, 2, 0}, got[4] = {1.03f, -2.06f, 2.06f, 0};
    rn_compare c;
    assert_int_equal(be.compare(&be, got, want, PK_DTYPE_F32, 4, 0, 0.05, &c), 0);
    assert_int_equal(c.bad_index, -1); /* each within 5% */
    assert_true(fabs(c.want_sq - 9) < 1e-9);
    assert_true(fabs(sqrt(c.err_sq / c.want_sq) - 0.03) < 1e-6); /* 3% off as a whole */
    /* Elements where atol is the larger part stay out of the norm-wise sums. */
    float want_small[4] = {1, -2, 0.001f, 0}, got_small[4] = {1.03f, -2.06f, 0.0015f, 0.0004f};
    assert_int_equal(be.compare(&be, got_small, want_small, PK_DTYPE_F32, 4, 1e-3, 0.05, &c), 0);
    assert_int_equal(c.bad_index, -1);
    assert_true(fabs(c.want_sq - 5) < 1e-9);
    assert_true(fabs(sqrt(c.err_sq / c.want_sq) - 0.03) < 1e-6);
    static pk_problem p;
    memset(&p, 0, sizeof p);
    p.atol = p.rtol = -1;
    p.n_args = 1;
    p.args[0].dtype = PK_DTYPE_BF16;
    p.args[0].role = PK_ARG_OUTPUT;
    p.args[0].atol = 1e-3;
    p.args[0].rtol = 0.05;
    p.args[0].norm_rtol = -1;
    assert_true(fabs(pk_arg_norm_rtol(&p, 0) - 0.025) < 1e-12);
    p.args[0].atol_rms = 0.2;
    assert_true(fabs(pk_arg_norm_rtol(&p, 0) - 0.1) < 1e-12);
    p.args[0].norm_rtol = 0.004;
    assert_true(pk_arg_norm_rtol(&p, 0) == 0.004);
    p.args[0].checker = PK_CHECKER_CUSTOM;
    assert_true(pk_arg_norm_rtol(&p, 0) == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_and_names),           cmocka_unit_test(trials_see_every_regime),
        cmocka_unit_test(rank_scales_keep_ranks_apart), cmocka_unit_test(regimes_shape_values),
        cmocka_unit_test(cancel_pairs_ranks),           cmocka_unit_test(norm_wise_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
