/* Contract between the harness and rewards: pk_eval_result_to_json (problems/) produces the
 * keys pk_turn_facts_from_result_json (reward/) reads, for every status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "near.h"
#include "pk_harness.h"
#include "pk_reward.h"

static void timed_correct_result(void **state) {
    (void)state;
    pk_eval_result r;
    pk_eval_result_init(&r);
    r.status = PK_STATUS_CORRECT;
    r.has_timing = 1;
    r.candidate.median_us = 80.0;
    r.candidate.cv = 0.02;
    r.reference.median_us = 100.0;
    r.speedup = 1.25;
    r.roofline_floor_us = 20.0;
    r.roofline_no_overlap_us = 35.0; /* the reward's roofline baseline is the floor */
    char *json = pk_eval_result_to_json(&r);
    assert_non_null(json);
    pk_turn_facts f;
    pk_error err = {0};
    assert_int_equal(pk_turn_facts_from_result_json(json, &f, &err), PK_OK);
    assert_int_equal(f.status, PK_STATUS_CORRECT);
    assert_near(f.speedup, 1.25, 1e-12);
    assert_near(f.time_us, 80.0, 1e-12);
    assert_near(f.baseline_us, 100.0, 1e-12);
    assert_near(f.roofline_floor_us, 20.0, 1e-12);
    pk_reward_config c;
    pk_reward_config_default(&c);
    assert_near(pk_reward_score(&c, &f), 1.55, 1e-12);
    strcpy(c.baseline, "roofline");
    assert_near(pk_reward_score(&c, &f), 0.55, 1e-12);
    free(json);
    pk_eval_result_free(&r);
}

static void every_status_round_trips(void **state) {
    (void)state;
    for (int st = 0; st < PK_STATUS_COUNT; st++) {
        pk_eval_result r;
        pk_eval_result_init(&r);
        r.status = (pk_status)st;
        char *json = pk_eval_result_to_json(&r);
        assert_non_null(json);
        pk_turn_facts f;
        pk_error err = {0};
        assert_int_equal(pk_turn_facts_from_result_json(json, &f, &err), PK_OK);
        assert_int_equal(f.status, st);
        assert_near(f.speedup, 0.0, 0.0); /* untimed */
        free(json);
        pk_eval_result_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(timed_correct_result),
        cmocka_unit_test(every_status_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
