/* The `pkgym eval` report shows both rooflines the server reported (roofline floor and
 * no-overlap roofline), each named, with the best correct time against them. The run is
 * built in memory, as the episode driver fills it from step replies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "eval/pk_eval_internal.h"

#define TURNS 2

static char *read_text(const char *dir, const char *name) {
    char *path = pk_path_join(dir, name), *text = NULL;
    pk_error err;
    assert_int_equal(pk_read_file(path, &text, NULL, &err), PK_OK);
    free(path);
    return text;
}

static void report_shows_both_rooflines(void **state) {
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/pk-test-eval-report-%d", (int)getpid());
    pk_eval_args a = {.problems = "all",
                      .trajectories = 1,
                      .turns = TURNS,
                      .policy = "replay:none",
                      .out_dir = dir,
                      .quiet = 1};
    pk_eval_problem problems[2] = {{.id = "collectives/gemm_ar", .world_size = 2},
                                   {.id = "selftest/scale", .world_size = 2}};
    /* gemm_ar: an overlapped kernel (120 us) beats the no-overlap roofline (160 us) and stays
     * above the floor (100 us); the slower first turn (150 us) is not the best. */
    pk_eval_turn gpu_turns[TURNS] = {{.status = PK_STATUS_CORRECT,
                                      .speedup = 1.0,
                                      .time_us = 150.0,
                                      .roofline_floor_us = 100.0,
                                      .roofline_no_overlap_us = 160.0},
                                     {.status = PK_STATUS_CORRECT,
                                      .speedup = 1.25,
                                      .time_us = 120.0,
                                      .roofline_floor_us = 100.0,
                                      .roofline_no_overlap_us = 160.0}};
    pk_eval_turn host_turns[TURNS] = {{.status = PK_STATUS_CORRECT, .speedup = 1.0, .time_us = 9},
                                      {.status = PK_STATUS_INCORRECT}};
    pk_eval_traj trajs[2] = {{.problem = 0, .index = 1, .n_turns = TURNS, .turns = gpu_turns},
                             {.problem = 1, .index = 1, .n_turns = TURNS, .turns = host_turns}};
    pk_eval_run run = {.args = &a,
                       .problems = problems,
                       .n_problems = 2,
                       .trajs = trajs,
                       .n_trajs = 2,
                       .wall_s = 1.0,
                       .steps = 4};
    pk_error err;
    assert_int_equal(pk_eval_report_write(&run, &err), PK_OK);

    char *md = read_text(dir, "report.md");
    assert_non_null(strstr(md, "*roofline floor*"));
    assert_non_null(strstr(md, "*no-overlap roofline*"));
    assert_non_null(strstr(md, "| no-overlap roofline | % of no-overlap | roofline floor | "
                               "% of floor |"));
    assert_non_null(strstr(md, "| collectives/gemm_ar | 120.0 us | 160.0 us | 133% | 100.0 us | "
                               "83% |"));
    assert_null(strstr(md, "| selftest/scale | 9.0 us")); /* no rooflines: no row */
    free(md);

    char *text = read_text(dir, "report.json");
    json_error_t je;
    json_t *report = json_loads(text, 0, &je);
    assert_non_null(report);
    json_t *ps = json_object_get(report, "problems");
    json_t *rl = json_object_get(json_array_get(ps, 0), "roofline");
    assert_true(json_is_object(rl));
    assert_true(json_real_value(json_object_get(rl, "floor_us")) == 100.0);
    assert_true(json_real_value(json_object_get(rl, "no_overlap_us")) == 160.0);
    assert_true(json_real_value(json_object_get(rl, "best_time_us")) == 120.0);
    assert_true(json_real_value(json_object_get(rl, "best_percent_of_no_overlap")) > 133.3);
    assert_true(json_real_value(json_object_get(rl, "best_percent_of_floor")) < 83.4);
    assert_true(json_is_null(json_object_get(json_array_get(ps, 1), "roofline")));
    json_decref(report);
    free(text);
    pk_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(report_shows_both_rooflines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
