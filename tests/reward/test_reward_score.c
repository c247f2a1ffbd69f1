/* Scores, returns, transforms, config JSON and advantages against hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "near.h"
#include "pk_reward.h"

#define EPS 1e-12

static pk_turn_facts correct(double speedup) {
    return (pk_turn_facts){.status = PK_STATUS_CORRECT, .speedup = speedup};
}

static void kevin_sum_returns(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    /* Kevin's worked example: speedups 1.0 and 1.7 give scores 1.3 and 2.0. */
    pk_turn_facts f1 = correct(1.0), f2 = correct(1.7);
    pk_turn_facts f0 = {.status = PK_STATUS_COMPILE_ERROR};
    pk_turn_facts f3 = {.status = PK_STATUS_INCORRECT, .speedup = 3.0};
    double s[4] = {pk_reward_score(&c, &f0), pk_reward_score(&c, &f1), pk_reward_score(&c, &f2),
                   pk_reward_score(&c, &f3)};
    assert_near(s[0], 0.0, EPS);
    assert_near(s[1], 1.3, EPS);
    assert_near(s[2], 2.0, EPS);
    assert_near(s[3], 0.0, EPS);
    double r[4];
    pk_reward_returns(&c, s, 4, r);
    assert_near(r[0], 0.84, EPS);
    assert_near(r[1], 2.1, EPS);
    assert_near(r[2], 2.0, EPS);
    assert_near(r[3], 0.0, EPS);
    /* In place. */
    pk_reward_returns(&c, s, 4, s);
    assert_near(s[0], 0.84, EPS);
}

static void max_returns(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    c.mode = PK_RETURN_MAX;
    const double s[4] = {0, 1.3, 2.0, 0};
    double r[4];
    pk_reward_returns(&c, s, 4, r);
    /* R2 = 2.0; R1 = max(1.3, 0.4*2.0) = 1.3; R0 = max(0, 0.4*1.3) = 0.52. */
    assert_near(r[0], 0.52, EPS);
    assert_near(r[1], 1.3, EPS);
    assert_near(r[2], 2.0, EPS);
    assert_near(r[3], 0.0, EPS);
    c.gamma = 0.8;
    pk_reward_returns(&c, s, 4, r);
    /* R1 = max(1.3, 0.8*2.0) = 1.6; R0 = max(0, 0.8*1.6) = 1.28. */
    assert_near(r[0], 1.28, EPS);
    assert_near(r[1], 1.6, EPS);
    c.mode = PK_RETURN_SUM;
    pk_reward_returns(&c, s, 4, r);
    /* R1 = 1.3 + 0.8*2.0 = 2.9; R0 = 0.8*2.9 = 2.32. */
    assert_near(r[0], 2.32, EPS);
    assert_near(r[1], 2.9, EPS);
}

static void failures_score_zero(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    for (int st = 0; st < PK_STATUS_COUNT; st++) {
        pk_turn_facts f = {.status = (pk_status)st, .speedup = 2.0};
        double want = st == PK_STATUS_CORRECT ? 2.3 : 0.0;
        assert_near(pk_reward_score(&c, &f), want, EPS);
    }
}

static void transforms(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    pk_turn_facts fast = correct(4.0), slow = correct(0.5), untimed = correct(0.0);
    c.transform = PK_SPEEDUP_LOG2;
    assert_near(pk_reward_score(&c, &fast), 2.3, EPS);
    assert_near(pk_reward_score(&c, &slow), -0.7, EPS);
    assert_near(pk_reward_score(&c, &untimed), 0.3, EPS);
    c.transform = PK_SPEEDUP_CLIP;
    c.clip_lo = 0.75;
    c.clip_hi = 2.0;
    assert_near(pk_reward_score(&c, &fast), 2.3, EPS);
    assert_near(pk_reward_score(&c, &slow), 1.05, EPS);
    assert_near(pk_reward_score(&c, &untimed), 0.3, EPS);
    pk_turn_facts mid = correct(1.25);
    assert_near(pk_reward_score(&c, &mid), 1.55, EPS);
    c.transform = PK_SPEEDUP_RAW;
    assert_near(pk_reward_score(&c, &slow), 0.8, EPS);
    c.w_correct = 0.0;
    assert_near(pk_reward_score(&c, &fast), 4.0, EPS);
}

static void intermediate_rewards_and_penalties(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    c.r_compile = 0.1;
    c.r_run = 0.2;
    c.penalty_rejected = 0.5;
    c.penalty_format = 0.25;
    const double want[PK_STATUS_COUNT] = {
        [PK_STATUS_FORMAT_ERROR] = -0.25, [PK_STATUS_REJECTED] = -0.5,
        [PK_STATUS_COMPILE_ERROR] = 0.0,  [PK_STATUS_RUNTIME_ERROR] = 0.1,
        [PK_STATUS_TIMEOUT] = 0.1,        [PK_STATUS_INCORRECT] = 0.3,
        [PK_STATUS_CORRECT] = 1.6,
    };
    for (int st = 0; st < PK_STATUS_COUNT; st++) {
        pk_turn_facts f = {.status = (pk_status)st, .speedup = 1.0};
        assert_near(pk_reward_score(&c, &f), want[st], EPS);
    }
}

static void baselines(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    pk_turn_facts f = {
        .status = PK_STATUS_CORRECT, .time_us = 100, .baseline_us = 150, .roofline_floor_us = 50};
    /* No stored ratio: reference / candidate from the two times. */
    assert_near(pk_reward_score(&c, &f), 1.8, EPS);
    f.speedup = 1.4;
    assert_near(pk_reward_score(&c, &f), 1.7, EPS);
    strcpy(c.baseline, "roofline");
    assert_near(pk_reward_score(&c, &f), 0.8, EPS);
}

static void facts_from_result_json(void **state) {
    (void)state;
    pk_turn_facts f;
    pk_error err = {0};
    const char *json = "{\"status\":\"correct\",\"speedup\":1.5,\"roofline_us\":20,"
                       "\"candidate\":{\"median_us\":100.0,\"cv\":0.01},"
                       "\"reference\":{\"median_us\":150},\"trials\":[{\"passed\":true}]}";
    assert_int_equal(pk_turn_facts_from_result_json(json, &f, &err), PK_OK);
    assert_int_equal(f.status, PK_STATUS_CORRECT);
    assert_near(f.speedup, 1.5, EPS);
    assert_near(f.time_us, 100.0, EPS);
    assert_near(f.baseline_us, 150.0, EPS);
    assert_near(f.roofline_floor_us, 20.0, EPS); /* an old result: roofline_us was the floor */
    /* A current result: the floor, never the no-overlap roofline. */
    assert_int_equal(pk_turn_facts_from_result_json(
                         "{\"status\":\"correct\",\"roofline_floor_us\":30,"
                         "\"roofline_no_overlap_us\":45,\"candidate\":{\"median_us\":60}}",
                         &f, &err),
                     PK_OK);
    assert_near(f.roofline_floor_us, 30.0, EPS);
    assert_int_equal(pk_turn_facts_from_result_json("{\"status\":\"timeout\"}", &f, &err), PK_OK);
    assert_int_equal(f.status, PK_STATUS_TIMEOUT);
    assert_near(f.speedup, 0.0, EPS);
    assert_int_equal(pk_turn_facts_from_result_json("{\"status\":\"great\"}", &f, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "status"));
    assert_int_equal(pk_turn_facts_from_result_json("[1]", &f, &err), PK_ERR_INVALID);
    assert_int_equal(pk_turn_facts_from_result_json("{\"status\":", &f, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "invalid JSON"));
    assert_int_equal(pk_turn_facts_from_result_json(NULL, &f, &err), PK_ERR_INVALID);
}

static void config_json(void **state) {
    (void)state;
    pk_reward_config c, d;
    pk_error err = {0};
    pk_reward_config_default(&c);
    assert_int_equal(pk_reward_config_merge_json(
                         &c,
                         "{\"gamma\":0.8,\"mode\":\"max\",\"transform\":\"clip\",\"clip_lo\":0,"
                         "\"clip_hi\":3,\"r_compile\":0.05,\"penalty_rejected\":1,"
                         "\"baseline\":\"roofline\"}",
                         &err),
                     PK_OK);
    assert_near(c.gamma, 0.8, EPS);
    assert_int_equal(c.mode, PK_RETURN_MAX);
    assert_int_equal(c.transform, PK_SPEEDUP_CLIP);
    assert_near(c.clip_hi, 3.0, EPS);
    assert_near(c.w_correct, 0.3, EPS); /* untouched keys keep their value */
    assert_string_equal(c.baseline, "roofline");
    /* The JSON form is readable (shortest round-trip numbers) and round-trips. */
    pk_reward_config_default(&d);
    char *text = pk_reward_config_to_json(&d);
    assert_string_equal(text, "{\"gamma\":0.4,\"mode\":\"sum\",\"w_correct\":0.3,"
                              "\"transform\":\"raw\",\"clip_lo\":0.0,\"clip_hi\":10.0,"
                              "\"r_compile\":0.0,\"r_run\":0.0,\"penalty_rejected\":0.0,"
                              "\"penalty_format\":0.0,\"baseline\":\"reference\"}");
    free(text);
    c.r_run = 1.0 / 3.0;
    char *json = pk_reward_config_to_json(&c);
    assert_non_null(json);
    pk_reward_config_default(&d);
    assert_int_equal(pk_reward_config_merge_json(&d, json, &err), PK_OK);
    free(json);
    assert_memory_equal(&c, &d, sizeof c);
    /* Errors name the key and leave the config unchanged. */
    const char *bad[][2] = {
        {"{\"gama\":0.5}", "gama"},
        {"{\"gamma\":\"x\"}", "gamma"},
        {"{\"gamma\":1.5}", "gamma"},
        {"{\"mode\":\"mean\"}", "mode"},
        {"{\"transform\":2}", "transform"},
        {"{\"baseline\":\"torch\"}", "baseline"},
        {"{\"w_correct\":null}", "w_correct"},
        {"{\"transform\":\"clip\",\"clip_lo\":3,\"clip_hi\":1}", "clip_lo"},
        {"[]", "object"},
        {"{", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        d = c;
        assert_int_equal(pk_reward_config_merge_json(&d, bad[i][0], &err), PK_ERR_INVALID);
        assert_non_null(strstr(err.message, bad[i][1]));
        assert_memory_equal(&c, &d, sizeof c);
    }
}

static void stored_config(void **state) {
    (void)state;
    pk_reward_config c;
    pk_error err = {0};
    assert_int_equal(
        pk_reward_config_from_stored_json("{\"max_turns\":4,\"reward\":{\"gamma\":0.8}}", &c, &err),
        PK_OK);
    assert_near(c.gamma, 0.8, EPS);
    assert_int_equal(pk_reward_config_from_stored_json("{\"mode\":\"max\"}", &c, &err), PK_OK);
    assert_int_equal(c.mode, PK_RETURN_MAX);
    assert_near(c.gamma, 0.4, EPS);
    assert_int_equal(pk_reward_config_from_stored_json("{\"reward\":3}", &c, &err), PK_ERR_INVALID);
}

/* The parts of a score (step info.reward_parts) are the terms of pk_reward_score: they sum to
 * it exactly, for every status and setting. */
static void breakdown_sums_to_the_score(void **state) {
    (void)state;
    pk_reward_config c;
    pk_reward_config_default(&c);
    c.r_compile = 0.1;
    c.r_run = 0.2;
    c.penalty_rejected = 0.5;
    c.penalty_format = 0.25;
    c.transform = PK_SPEEDUP_LOG2;
    for (int st = 0; st < PK_STATUS_COUNT; st++) {
        pk_turn_facts f = {.status = (pk_status)st, .speedup = 2.5, .time_us = 40};
        pk_reward_parts p;
        pk_reward_breakdown(&c, &f, &p);
        assert_true(p.total == pk_reward_score(&c, &f)); /* the same bits */
        double sum = p.correctness + p.speedup_term + p.compile + p.run + p.penalty_rejected +
                     p.penalty_format;
        assert_near(sum, p.total, EPS);
    }
    pk_turn_facts ok = {.status = PK_STATUS_CORRECT, .speedup = 2.5};
    pk_reward_parts p;
    pk_reward_breakdown(&c, &ok, &p);
    assert_near(p.correctness, 0.3, EPS);
    assert_near(p.speedup, 2.5, EPS);
    assert_near(p.speedup_term, log2(2.5), EPS);
    assert_near(p.compile, 0.1, EPS);
    assert_near(p.run, 0.2, EPS);
    assert_near(p.penalty_rejected, 0.0, EPS);
    pk_turn_facts fmt = {.status = PK_STATUS_FORMAT_ERROR};
    pk_reward_breakdown(&c, &fmt, &p);
    assert_near(p.penalty_format, -0.25, EPS);
    assert_near(p.total, -0.25, EPS);
    assert_near(p.correctness + p.speedup_term + p.compile + p.run, 0.0, EPS);
    pk_turn_facts rej = {.status = PK_STATUS_REJECTED, .speedup = 9};
    pk_reward_breakdown(&c, &rej, &p);
    assert_near(p.penalty_rejected, -0.5, EPS);
    assert_near(p.speedup, 0.0, EPS); /* only a correct turn's speedup counts */
}

/* The terms table (reward/src/terms.c) drives the defaults, the config's JSON form and merge,
 * and the named parts: each weighted term, alone at weight 2, gives its part sign x 2 at a
 * status it applies at and 0 at the others, under its own name. A row added later is checked
 * here without a new test. */
static void terms_table_drives_config_and_parts(void **state) {
    (void)state;
    pk_reward_config d;
    pk_reward_config_default(&d);
    char *defaults = pk_reward_config_to_json(&d);
    assert_non_null(defaults);
    for (int i = 0; i < PK_REWARD_TERM_COUNT; i++) {
        const pk_reward_term *t = &pk_reward_terms[i];
        assert_non_null(t->name);
        assert_true(t->statuses != 0 && t->statuses < PK_REWARD_AT(PK_STATUS_INFRA_ERROR));
        if (t->kind != PK_REWARD_TERM_WEIGHT)
            continue;
        assert_non_null(t->weight);
        assert_true(t->sign == 1 || t->sign == -1);
        assert_true(pk_reward_term_weight(&d, t) == t->weight_default);
        char key[64], only[128];
        snprintf(key, sizeof key, "\"%s\":", t->weight);
        assert_non_null(strstr(defaults, key));
        /* Every other weight off, so the total is this term alone. */
        pk_reward_config c = d;
        for (int k = 0; k < PK_REWARD_TERM_COUNT; k++)
            if (pk_reward_terms[k].kind == PK_REWARD_TERM_WEIGHT) {
                snprintf(only, sizeof only, "{\"%s\": %d}", pk_reward_terms[k].weight,
                         k == i ? 2 : 0);
                assert_int_equal(pk_reward_config_merge_json(&c, only, NULL), PK_OK);
            }
        assert_true(pk_reward_term_weight(&c, t) == 2);
        int named = -1;
        for (int n = 0; n < PK_REWARD_PART_COUNT; n++)
            if (strcmp(pk_reward_part_name(n), t->name) == 0)
                named = n;
        assert_true(named >= 0);
        for (int st = 0; st < PK_STATUS_TURN_COUNT; st++) {
            pk_turn_facts f = {.status = (pk_status)st}; /* untimed: the speedup term is 0 */
            pk_reward_parts p;
            pk_reward_breakdown(&c, &f, &p);
            double want = (t->statuses & PK_REWARD_AT(st)) ? 2 * t->sign : 0.0;
            assert_true(pk_reward_part_value(&p, named) == want);
            assert_true(p.total == want);
        }
    }
    free(defaults);
    /* The parts' names: distinct, the speedup after the speedup term, the total last. */
    for (int n = 0; n < PK_REWARD_PART_COUNT; n++)
        for (int m = 0; m < n; m++)
            assert_string_not_equal(pk_reward_part_name(n), pk_reward_part_name(m));
    assert_string_equal(pk_reward_part_name(PK_REWARD_PART_COUNT - 1), "total");
    assert_null(pk_reward_part_name(PK_REWARD_PART_COUNT));
    assert_null(pk_reward_part_name(-1));
}

/* The baseline of a result: `baseline` (cached or measured), else the reference time, else,
 * for results stored before `baseline` existed with a cached baseline, speedup x time. */
static void facts_baseline(void **state) {
    (void)state;
    pk_turn_facts f;
    pk_error err = {0};
    const char *cached = "{\"status\":\"correct\",\"speedup\":3.2,"
                         "\"candidate\":{\"median_us\":15.3,\"cv\":0.03},"
                         "\"reference\":{\"median_us\":0,\"cv\":0},"
                         "\"baseline\":{\"us\":48.96,\"cv\":0.02,\"iters\":100,"
                         "\"measured_at\":1.7e9,\"source\":\"cached\"}}";
    assert_int_equal(pk_turn_facts_from_result_json(cached, &f, &err), PK_OK);
    assert_near(f.baseline_us, 48.96, EPS);
    assert_near(f.baseline_cv, 0.02, EPS);
    assert_near(f.time_cv, 0.03, EPS);
    assert_int_equal(f.baseline_cached, 1);
    const char *measured = "{\"status\":\"correct\",\"speedup\":1.5,"
                           "\"candidate\":{\"median_us\":100},"
                           "\"reference\":{\"median_us\":150,\"cv\":0.04}}";
    assert_int_equal(pk_turn_facts_from_result_json(measured, &f, &err), PK_OK);
    assert_near(f.baseline_us, 150, EPS);
    assert_near(f.baseline_cv, 0.04, EPS);
    assert_int_equal(f.baseline_cached, 0);
    const char *old_cached = "{\"status\":\"correct\",\"speedup\":2.0,"
                             "\"candidate\":{\"median_us\":20},\"reference\":{\"median_us\":0}}";
    assert_int_equal(pk_turn_facts_from_result_json(old_cached, &f, &err), PK_OK);
    assert_near(f.baseline_us, 40, EPS);
    assert_int_equal(f.baseline_cached, 1);
}

/* `pkgym reward --config` takes the reward keys, or the settings shape {"reward": {...}}. */
static void user_config_shapes(void **state) {
    (void)state;
    pk_reward_config c;
    pk_error err = {0};
    pk_reward_config_default(&c);
    assert_int_equal(pk_reward_config_merge_user_json(&c, "{\"gamma\":0.7}", &err), PK_OK);
    assert_near(c.gamma, 0.7, EPS);
    pk_reward_config_default(&c);
    assert_int_equal(
        pk_reward_config_merge_user_json(
            &c,
            "{\"reward\":{\"gamma\":0.9,\"mode\":\"max\"},\"feedback\":{\"budget_tokens\":10},"
            "\"check\":{},\"stop_on_correct\":false,\"max_turns\":4,\"seed\":3,"
            "\"seed_source\":\"client\",\"group\":null,\"profile\":\"none\"}",
            &err),
        PK_OK);
    assert_near(c.gamma, 0.9, EPS);
    assert_int_equal(c.mode, PK_RETURN_MAX);
    const char *bad[][2] = {
        {"{\"reward\":{\"gama\":1}}", "gama"},
        {"{\"reward\":{},\"gamma\":0.5}", "next to 'reward'"},
        {"{\"reward\":[]}", "'reward' must be an object"},
        {"{\"feedback\":{}}", "feedback"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pk_reward_config_default(&c);
        assert_int_equal(pk_reward_config_merge_user_json(&c, bad[i][0], &err), PK_ERR_INVALID);
        if (!strstr(err.message, bad[i][1]))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.message, bad[i][1]);
    }
}

static void advantages(void **state) {
    (void)state;
    const double r[3] = {1, 2, 3};
    double a[3];
    pk_reward_advantages(r, 3, 0.0, a);
    /* mean 2, population std sqrt(2/3). */
    assert_near(a[0], -1.224744871391589, 1e-12);
    assert_near(a[1], 0.0, EPS);
    assert_near(a[2], 1.224744871391589, 1e-12);
    const double same[2] = {0.5, 0.5};
    pk_reward_advantages(same, 2, 1e-4, a);
    assert_near(a[0], 0.0, EPS);
    assert_near(a[1], 0.0, EPS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kevin_sum_returns),
        cmocka_unit_test(max_returns),
        cmocka_unit_test(failures_score_zero),
        cmocka_unit_test(transforms),
        cmocka_unit_test(intermediate_rewards_and_penalties),
        cmocka_unit_test(baselines),
        cmocka_unit_test(facts_from_result_json),
        cmocka_unit_test(config_json),
        cmocka_unit_test(stored_config),
        cmocka_unit_test(advantages),
        cmocka_unit_test(breakdown_sums_to_the_score),
        cmocka_unit_test(terms_table_drives_config_and_parts),
        cmocka_unit_test(facts_baseline),
        cmocka_unit_test(user_config_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
