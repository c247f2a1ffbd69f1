/* Ablation over a store written like the server writes it: the stored configs reproduce the
 * online returns, tampering is caught, and advantages match hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "ablation.h"
#include "near.h"
#include "pk_reward.h"
#include "pk_store.h"

#define EPS 1e-12

static const char *const correct_1x =
    "{\"status\":\"correct\",\"speedup\":1.0,\"candidate\":{\"median_us\":50}}";
static const char *const correct_17x = "{\"status\":\"correct\",\"speedup\":1.7}";
static const char *const compile_error = "{\"status\":\"compile_error\"}";

/* Writes one episode as the server does: online scores and returns from its config. */
static void write_episode(pk_store *s, const char *id, const char *group, const char *config,
                          const pk_status *status, const char *const *results, int n, int finish) {
    pk_error err = {0};
    pk_episode_row e = {.episode_id = id,
                        .problem_id = "allreduce",
                        .group = group,
                        .max_turns = n,
                        .config_json = config};
    assert_int_equal(pk_store_begin_episode(s, &e, &err), PK_OK);
    pk_reward_config c;
    assert_int_equal(pk_reward_config_from_stored_json(config ? config : "{}", &c, &err), PK_OK);
    double scores[8];
    for (int t = 0; t < n; t++) {
        pk_turn_facts f = {.status = status[t]};
        if (results[t])
            assert_int_equal(pk_turn_facts_from_result_json(results[t], &f, &err), PK_OK);
        scores[t] = pk_reward_score(&c, &f);
        pk_turn row = {.turn = t + 1,
                       .status = status[t],
                       .score = scores[t],
                       .result_json = (char *)results[t]}; /* only read */
        assert_int_equal(pk_store_add_turn(s, id, &row, &err), PK_OK);
    }
    if (finish) {
        pk_reward_returns(&c, scores, n, scores);
        assert_int_equal(pk_store_finish_episode(s, id, scores, n, &err), PK_OK);
    }
}

static int setup(void **state) {
    char dir[] = "/tmp/pk-ablation-test-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char *path = pk_path_join(dir, "t.db");
    pk_store *s = NULL;
    if (pk_store_open(path, &s, NULL))
        return -1;
    /* A: 1.0x correct then a compile error. B: a format error then 1.7x. C: max mode,
     * gamma 0.8, unfinished (server killed). */
    const pk_status sa[] = {PK_STATUS_CORRECT, PK_STATUS_COMPILE_ERROR};
    const char *ra[] = {correct_1x, compile_error};
    const pk_status sb[] = {PK_STATUS_FORMAT_ERROR, PK_STATUS_CORRECT};
    const char *rb[] = {NULL, correct_17x};
    write_episode(s, "A", "g0", NULL, sa, ra, 2, 1);
    write_episode(s, "B", "g1", "{\"reward\":{}}", sb, rb, 2, 1);
    pk_store_close(s);
    *state = path;
    return 0;
}

static int teardown(void **state) {
    char *path = *state;
    *strrchr(path, '/') = '\0';
    pk_rm_rf(path);
    free(path);
    return 0;
}

static void run_ablation(const char *path, const pk_ablation_opts *o, pk_ablation *a) {
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open_readonly(path, &s, &err), PK_OK);
    assert_int_equal(pk_ablation_run(s, o, a, &err), PK_OK);
    pk_store_close(s);
}

static void stored_config_reproduces_online(void **state) {
    pk_ablation a;
    pk_ablation_opts o = {.eps = 0.0, .tolerance = 1e-9};
    run_ablation(*state, &o, &a);
    assert_int_equal(a.n_episodes, 2);
    assert_int_equal(a.n_mismatches, 0);
    assert_int_equal(a.n_unfinished, 0);
    const pk_ablation_episode *A = &a.episodes[0], *B = &a.episodes[1];
    assert_string_equal(A->id, "A");
    assert_near(A->turns[0].ret, 1.3, EPS);
    assert_near(A->turns[1].ret, 0.0, EPS);
    assert_near(B->turns[0].ret, 0.8, EPS);
    assert_near(B->turns[1].ret, 2.0, EPS);
    assert_near(B->turns[0].online_return, 0.8, EPS);
    /* One problem: returns (1.3, 0, 0.8, 2.0), mean 1.025, population std sqrt(0.531875). */
    assert_int_equal(a.n_sets, 1);
    assert_near(a.sets[0].mean, 1.025, EPS);
    double sd = sqrt(0.531875);
    assert_near(a.sets[0].std, sd, EPS);
    assert_near(A->turns[0].advantage, 0.275 / sd, 1e-12);
    assert_near(A->turns[1].advantage, -1.025 / sd, 1e-12);
    assert_near(B->turns[1].advantage, 0.975 / sd, 1e-12);
    pk_ablation_free(&a);
}

static void other_config_and_groups(void **state) {
    pk_reward_config c;
    pk_reward_config_default(&c);
    c.gamma = 0.5;
    c.mode = PK_RETURN_MAX;
    c.transform = PK_SPEEDUP_LOG2;
    c.penalty_format = 0.5;
    pk_ablation a;
    pk_ablation_opts o = {
        .config = &c, .normalize = PK_NORMALIZE_GROUP, .eps = 1e-4, .tolerance = 1e-9};
    run_ablation(*state, &o, &a);
    const pk_ablation_episode *A = &a.episodes[0], *B = &a.episodes[1];
    /* A: scores (0.3 + log2 1 = 0.3, 0) -> max returns (0.3, 0). */
    assert_near(A->turns[0].score, 0.3, EPS);
    assert_near(A->turns[0].ret, 0.3, EPS);
    /* B: scores (-0.5, 0.3 + log2 1.7) -> returns (max(-0.5, 0.5 * s1), s1). */
    double s1 = 0.3 + log2(1.7);
    assert_near(B->turns[0].score, -0.5, EPS);
    assert_near(B->turns[0].ret, 0.5 * s1, EPS);
    assert_near(B->turns[1].ret, s1, EPS);
    /* The online values came from the defaults: every turn but A's compile error differs. */
    assert_int_equal(a.n_mismatches, 3);
    /* Per group: A alone in g0, returns (0.3, 0): mean 0.15, std 0.15. */
    assert_int_equal(a.n_sets, 2);
    assert_string_equal(a.sets[0].key, "g0");
    assert_near(A->turns[0].advantage, 0.15 / (0.15 + 1e-4), EPS);
    assert_near(A->turns[1].advantage, -0.15 / (0.15 + 1e-4), EPS);
    pk_ablation_free(&a);
}

static void tampered_online_values_are_caught(void **state) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(*state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE episodes SET returns_json='[0.8,2.0001]' WHERE id='B'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "UPDATE episodes SET returns_json='[1]' WHERE id='A'", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    pk_ablation a;
    pk_ablation_opts o = {.eps = 1e-4, .tolerance = 1e-9};
    run_ablation(*state, &o, &a);
    /* A's returns are malformed (both turns flagged); B's second return differs. */
    assert_true(a.episodes[0].returns_malformed);
    assert_true(a.episodes[0].turns[0].mismatch && a.episodes[0].turns[1].mismatch);
    assert_false(a.episodes[1].turns[0].mismatch);
    assert_true(a.episodes[1].turns[1].mismatch);
    assert_int_equal(a.n_mismatches, 3);
    pk_ablation_free(&a);
}

static void bad_stored_config_is_an_error(void **state) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(*state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE episodes SET config_json='{\"reward\":{\"gama\":1}}'"
                                  " WHERE id='B'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    pk_store *s = NULL;
    pk_error err = {0};
    pk_ablation a;
    pk_ablation_opts o = {.eps = 1e-4, .tolerance = 1e-9};
    assert_int_equal(pk_store_open_readonly(*state, &s, &err), PK_OK);
    assert_int_equal(pk_ablation_run(s, &o, &a, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "episode 'B'"));
    assert_non_null(strstr(err.message, "gama"));
    pk_store_close(s);
}

/* Group normalization never merges episodes that have no group: each is its own set, and the
 * result says how many there were. */
static void ungrouped_episodes_are_their_own_sets(void **state) {
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open(*state, &s, &err), PK_OK);
    const pk_status sc[] = {PK_STATUS_CORRECT, PK_STATUS_CORRECT};
    const char *rc[] = {correct_17x, correct_1x};
    const pk_status sd[] = {PK_STATUS_COMPILE_ERROR, PK_STATUS_CORRECT};
    const char *rd[] = {compile_error, correct_1x};
    write_episode(s, "C", NULL, NULL, sc, rc, 2, 1);
    write_episode(s, "D", NULL, NULL, sd, rd, 2, 1);
    pk_store_close(s);
    pk_ablation a;
    pk_ablation_opts o = {.normalize = PK_NORMALIZE_GROUP, .eps = 0, .tolerance = 1e-9};
    run_ablation(*state, &o, &a);
    assert_int_equal(a.n_episodes, 4);
    assert_int_equal(a.n_ungrouped, 2);
    assert_int_equal(a.n_sets, 4); /* g0, g1, C alone, D alone */
    int seen = 0;
    for (int k = 0; k < a.n_sets; k++) {
        if (!a.sets[k].ungrouped)
            continue;
        seen++;
        assert_int_equal(a.sets[k].n_trajectories, 1);
        assert_int_equal(a.sets[k].n_turns, 2);
        assert_true(strcmp(a.sets[k].key, "(ungrouped) C") == 0 ||
                    strcmp(a.sets[k].key, "(ungrouped) D") == 0);
    }
    assert_int_equal(seen, 2);
    /* D over its own returns (0.52, 1.3): two values, so advantages -1 and 1 (eps 0). */
    const pk_ablation_episode *D = &a.episodes[3];
    assert_string_equal(D->id, "D");
    assert_near(D->turns[0].ret, 0.52, EPS);
    assert_near(D->turns[0].advantage, -1.0, 1e-12);
    assert_near(D->turns[1].advantage, 1.0, 1e-12);
    pk_ablation_free(&a);
    /* Problem normalization still puts all four in the problem's set. */
    o.normalize = PK_NORMALIZE_PROBLEM;
    run_ablation(*state, &o, &a);
    assert_int_equal(a.n_sets, 1);
    assert_int_equal(a.n_ungrouped, 0);
    assert_int_equal(a.sets[0].n_trajectories, 4);
    pk_ablation_free(&a);
}

static void filters_select_episodes(void **state) {
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open(*state, &s, &err), PK_OK);
    const pk_status st[] = {PK_STATUS_CORRECT};
    const char *r[] = {correct_1x};
    write_episode(s, "E", "g1", NULL, st, r, 1, 1);
    pk_store_close(s);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(*state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE episodes SET created_at = 100 WHERE id IN ('A','B');"
                                  "UPDATE episodes SET created_at = 5000, problem_id = 'allgather'"
                                  " WHERE id = 'E'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    pk_store_filter f;
    pk_ablation_opts o = {.eps = 1e-4, .tolerance = 1e-9, .filter = &f};
    pk_ablation a;
    struct {
        pk_store_filter f;
        const char *want;
    } cases[] = {
        {{.problems = {"allgather"}, .n_problems = 1}, "E"},
        {{.problems = {"allgather", "allreduce"}, .n_problems = 2}, "ABE"},
        {{.groups = {"g1"}, .n_groups = 1}, "BE"},
        {{.groups = {"g1"}, .n_groups = 1, .problems = {"allreduce"}, .n_problems = 1}, "B"},
        {{.episodes = {"A", "E"}, .n_episodes = 2}, "AE"},
        {{.since = 1000}, "E"},
        {{.since = 1000, .groups = {"g0"}, .n_groups = 1}, ""},
        {{.problems = {"nope"}, .n_problems = 1}, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        f = cases[i].f;
        run_ablation(*state, &o, &a);
        char got[8] = "";
        for (int e = 0; e < a.n_episodes && e < 7; e++)
            strncat(got, a.episodes[e].id, 1);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("filter case %zu: got '%s', want '%s'", i, got, cases[i].want);
        pk_ablation_free(&a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(stored_config_reproduces_online, setup, teardown),
        cmocka_unit_test_setup_teardown(other_config_and_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(tampered_online_values_are_caught, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_stored_config_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(ungrouped_episodes_are_their_own_sets, setup, teardown),
        cmocka_unit_test_setup_teardown(filters_select_episodes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
