/* The archive (archive/include/pk_archive.h) on a fixed set of problems and entries: storage
 * and deduplication, restart, retrieval (similar by FTS5 BM25, random from a seed, alternate),
 * the scope rule, recorded uses, and the JSONL form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "pk_archive.h"

static const pk_archive_problem problems[] = {
    {"t/allreduce_sum", "All-reduce sum of float32 across ranks", "Collective",
     "collective allreduce f32", "Sum x over all ranks with an all-reduce; every rank gets it."},
    {"t/allgather", "All-gather of bf16 blocks", "Collective", "collective allgather bf16",
     "Gather each rank's block into y on every rank."},
    {"t/gemm", "Dense GEMM tile", "Compute", "gemm matmul f16",
     "Multiply matrices A and B with tensor cores."},
    {"t/layernorm", "LayerNorm forward", "Normalization", "layernorm f32",
     "Normalize each row by its mean and variance."},
};
#define N_PROBLEMS 4

/* A problem like the first, not in the archive. */
static const pk_archive_problem query = {
    "t/allreduce_max", "All-reduce max of float32 across ranks", "Collective",
    "collective allreduce f32", "Max of x over all ranks with an all-reduce."};

typedef struct fixture {
    char dir[64];
    char path[96];
    pk_archive *a;
} fixture;

static long long add(pk_archive *a, int problem, const char *code, double speedup, int *added) {
    pk_archive_entry e = {.problem_id = problems[problem].id,
                          .world_size = 2,
                          .dims_json = "{\"n\":1024}",
                          .code = code,
                          .plan = "a plan",
                          .speedup = speedup,
                          .hardware = "host",
                          .source = "test"};
    long long id = 0;
    pk_error err;
    assert_int_equal(pk_archive_add(a, &problems[problem], &e, &id, added, &err), PK_OK);
    return id;
}

/* P0: A1 (1.5x), A2 (2.5x); P1: B (1.0x); P2: C (0, untimed); P3: D (1.2x). */
static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/pk-archive-test-XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/%s", f->dir, PK_ARCHIVE_FILE);
    pk_error err;
    if (pk_archive_open(f->path, &f->a, &err))
        return -1;
    int added;
    add(f->a, 0, "kernel A1", 1.5, &added);
    add(f->a, 0, "kernel A2", 2.5, &added);
    add(f->a, 1, "kernel B", 1.0, &added);
    add(f->a, 2, "kernel C", 0, &added);
    add(f->a, 3, "kernel D", 1.2, &added);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    pk_archive_close(f->a);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void dedup_by_kernel_hash(void **state) {
    fixture *f = *state;
    assert_int_equal(pk_archive_count(f->a), 5);
    int added = 1;
    /* The same kernel (whitespace aside) with a better speedup: one row, now 3.0x. */
    long long again = add(f->a, 0, "  kernel A1\n", 3.0, &added);
    assert_int_equal(added, 0);
    assert_int_equal(pk_archive_count(f->a), 5);
    pk_archive_list l;
    pk_error err;
    assert_int_equal(pk_archive_get(f->a, again, &l, &err), PK_OK);
    assert_int_equal(l.n, 1);
    assert_true(l.items[0].speedup == 3.0);
    assert_string_equal(l.items[0].code, "  kernel A1\n");
    pk_archive_list_free(&l);
    /* A worse measurement of it changes nothing. */
    add(f->a, 0, "kernel A1", 0.5, &added);
    assert_int_equal(pk_archive_get(f->a, again, &l, &err), PK_OK);
    assert_true(l.items[0].speedup == 3.0);
    pk_archive_list_free(&l);
    /* The same kernel for another problem is another entry. */
    add(f->a, 1, "kernel A1", 1.0, &added);
    assert_int_equal(added, 1);
    assert_int_equal(pk_archive_count(f->a), 6);
}

static void survives_reopen(void **state) {
    fixture *f = *state;
    pk_archive_close(f->a);
    pk_error err;
    pk_archive *ro;
    assert_int_equal(pk_archive_open_readonly(f->path, &ro, &err), PK_OK);
    assert_int_equal(pk_archive_count(ro), 5);
    int added;
    pk_archive_entry e = {.problem_id = "t/gemm", .world_size = 1, .code = "x"};
    assert_int_not_equal(pk_archive_add(ro, NULL, &e, NULL, &added, &err), PK_OK);
    pk_archive_close(ro);
    assert_int_equal(pk_archive_open(f->path, &f->a, &err), PK_OK);
    assert_int_equal(pk_archive_count(f->a), 5);
    pk_archive_list l;
    assert_int_equal(pk_archive_query(f->a, "t/allreduce_sum", 0, &l, &err), PK_OK);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].code, "kernel A2"); /* best first */
    assert_string_equal(l.items[0].dims_json, "{\"n\":1024}");
    assert_string_equal(l.items[0].plan, "a plan");
    pk_archive_list_free(&l);
}

static pk_archive_list retrieve(fixture *f, const pk_archive_problem *p, int k,
                                pk_examples_mode mode, pk_examples_scope scope, int turn,
                                unsigned long long seed) {
    pk_examples_spec spec = {.k = k, .mode = mode, .scope = scope};
    pk_archive_list l;
    pk_error err;
    assert_int_equal(pk_archive_retrieve(f->a, p, &spec, turn, seed, &l, &err), PK_OK);
    return l;
}

static void similar_ranks_by_bm25(void **state) {
    fixture *f = *state;
    pk_archive_list l =
        retrieve(f, &query, 4, PK_EXAMPLES_SIMILAR, PK_EXAMPLES_OTHER_PROBLEMS, 1, 0);
    assert_int_equal(l.n, 4);
    /* The other all-reduce first (its best kernel), then the other collective. */
    assert_string_equal(l.items[0].problem_id, "t/allreduce_sum");
    assert_string_equal(l.items[0].code, "kernel A2");
    assert_string_equal(l.items[1].problem_id, "t/allgather");
    pk_archive_list_free(&l);
    l = retrieve(f, &query, 1, PK_EXAMPLES_SIMILAR, PK_EXAMPLES_OTHER_PROBLEMS, 1, 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].problem_id, "t/allreduce_sum");
    pk_archive_list_free(&l);
    /* Alternate: similar on odd turns. */
    l = retrieve(f, &query, 2, PK_EXAMPLES_ALTERNATE, PK_EXAMPLES_OTHER_PROBLEMS, 3, 0);
    assert_string_equal(l.items[0].problem_id, "t/allreduce_sum");
    assert_string_equal(l.items[1].problem_id, "t/allgather");
    pk_archive_list_free(&l);
    assert_int_equal(pk_examples_mode_at(PK_EXAMPLES_ALTERNATE, 1), PK_EXAMPLES_SIMILAR);
    assert_int_equal(pk_examples_mode_at(PK_EXAMPLES_ALTERNATE, 2), PK_EXAMPLES_RANDOM);
    assert_int_equal(pk_examples_mode_at(PK_EXAMPLES_SIMILAR, 2), PK_EXAMPLES_SIMILAR);
}

/* An episode of a problem that is in the archive asks for its own problem's kernels. */
static void scope_leaves_own_problem_out(void **state) {
    fixture *f = *state;
    const pk_archive_problem *own = &problems[0];
    for (int mode = 0; mode < 3; mode++)
        for (int turn = 1; turn <= 4; turn++)
            for (unsigned long long seed = 0; seed < 16; seed++) {
                pk_archive_list l = retrieve(f, own, PK_ARCHIVE_MAX_K, (pk_examples_mode)mode,
                                             PK_EXAMPLES_OTHER_PROBLEMS, turn, seed);
                assert_int_equal(l.n, 3); /* every other problem, once */
                for (int i = 0; i < l.n; i++)
                    assert_string_not_equal(l.items[i].problem_id, own->id);
                pk_archive_list_free(&l);
            }
    pk_archive_list l = retrieve(f, own, 1, PK_EXAMPLES_SIMILAR, PK_EXAMPLES_ANY, 1, 0);
    assert_string_equal(l.items[0].problem_id, own->id);
    pk_archive_list_free(&l);
    l = retrieve(f, own, 16, PK_EXAMPLES_RANDOM, PK_EXAMPLES_ANY, 2, 5);
    assert_int_equal(l.n, 4);
    pk_archive_list_free(&l);
}

static void random_follows_the_seed(void **state) {
    fixture *f = *state;
    int differs = 0;
    for (unsigned long long seed = 0; seed < 32; seed++) {
        pk_archive_list a =
            retrieve(f, &query, 2, PK_EXAMPLES_RANDOM, PK_EXAMPLES_OTHER_PROBLEMS, 2, seed);
        pk_archive_list b =
            retrieve(f, &query, 2, PK_EXAMPLES_RANDOM, PK_EXAMPLES_OTHER_PROBLEMS, 2, seed);
        pk_archive_list c =
            retrieve(f, &query, 2, PK_EXAMPLES_RANDOM, PK_EXAMPLES_OTHER_PROBLEMS, 4, seed);
        assert_int_equal(a.n, 2);
        assert_string_not_equal(a.items[0].problem_id, a.items[1].problem_id);
        for (int i = 0; i < 2; i++)
            assert_int_equal(a.items[i].id, b.items[i].id);
        differs += a.items[0].id != c.items[0].id || a.items[1].id != c.items[1].id;
        pk_archive_list_free(&a);
        pk_archive_list_free(&b);
        pk_archive_list_free(&c);
    }
    /* Another turn draws again: over 32 seeds, 4 problems, some draws differ (fixed seeds). */
    assert_true(differs > 0);
}

static void uses_are_recorded(void **state) {
    fixture *f = *state;
    pk_error err;
    long long ids[] = {3, 1};
    assert_int_equal(pk_archive_record_uses(f->a, "ep1", 1, "similar", ids, 2, &err), PK_OK);
    assert_int_equal(pk_archive_record_uses(f->a, "ep1", 2, "random", ids + 1, 1, &err), PK_OK);
    assert_int_equal(pk_archive_record_uses(f->a, "ep1", 1, "similar", ids + 1, 1, &err), PK_OK);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT turn, rank, entry_id, mode FROM uses"
                                        " WHERE episode_id = 'ep1' ORDER BY turn, rank",
                                        -1, &st, NULL),
                     SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        assert_int_equal(sqlite3_column_int(st, 1), 1);
        assert_int_equal(sqlite3_column_int64(st, 2), 1);
        assert_string_equal((const char *)sqlite3_column_text(st, 3),
                            rows == 0 ? "similar" : "random");
        rows++;
    }
    assert_int_equal(rows, 2); /* turn 1's record replaced */
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void jsonl_round_trip(void **state) {
    fixture *f = *state;
    pk_archive_list l;
    pk_error err;
    assert_int_equal(pk_archive_query(f->a, NULL, 0, &l, &err), PK_OK);
    assert_int_equal(l.n, 5);
    char path[128];
    snprintf(path, sizeof path, "%s/copy.sqlite", f->dir);
    pk_archive *copy;
    assert_int_equal(pk_archive_open(path, &copy, &err), PK_OK);
    for (int i = 0; i < l.n; i++) {
        pk_archive_problem p;
        assert_int_equal(pk_archive_problem_get(f->a, l.items[i].problem_id, &p, &err), PK_OK);
        char *line = pk_archive_entry_to_json(&l.items[i], &p);
        assert_non_null(line);
        int added = 0;
        assert_int_equal(pk_archive_import_json(copy, line, NULL, &added, &err), PK_OK);
        assert_int_equal(added, 1);
        free(line);
        pk_archive_problem_free(&p);
    }
    pk_archive_list_free(&l);
    /* The copy retrieves alike: the problems' text came with the lines. */
    pk_archive *saved = f->a;
    f->a = copy;
    pk_archive_list s =
        retrieve(f, &query, 2, PK_EXAMPLES_SIMILAR, PK_EXAMPLES_OTHER_PROBLEMS, 1, 0);
    f->a = saved;
    assert_string_equal(s.items[0].problem_id, "t/allreduce_sum");
    assert_string_equal(s.items[0].code, "kernel A2");
    assert_true(s.items[0].speedup == 2.5);
    assert_string_equal(s.items[0].dims_json, "{\"n\":1024}");
    pk_archive_list_free(&s);
    /* Bad lines: named errors, nothing added. */
    const char *bad[] = {"not json",
                         "{\"problem_id\": \"t/x\", \"world_size\": 1}",
                         "{\"problem_id\": \"t/unknown\", \"code\": \"k\", \"world_size\": 1}",
                         "{\"problem_id\": \"t/gemm\", \"code\": \"k\", \"world_size\": \"2\"}",
                         "{\"problem_id\": \"t/gemm\", \"code\": \"k\", \"world_size\": 1,"
                         " \"speedup\": -1}",
                         "{\"problem_id\": \"t/gemm\", \"code\": \"k\", \"world_size\": 1,"
                         " \"problem\": {\"tags\": \"x\"}}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(pk_archive_import_json(copy, bad[i], NULL, NULL, &err), PK_ERR_INVALID);
    assert_int_equal(pk_archive_count(copy), 5);
    pk_archive_close(copy);
}

static void examples_text_says_the_scope(void **state) {
    fixture *f = *state;
    pk_archive_list l =
        retrieve(f, &query, 2, PK_EXAMPLES_SIMILAR, PK_EXAMPLES_OTHER_PROBLEMS, 1, 0);
    char *text = pk_archive_examples_text(l.items, l.n, PK_EXAMPLES_OTHER_PROBLEMS);
    assert_non_null(strstr(text, "(2 examples)"));
    assert_non_null(
        strstr(text, "Scope other_problems: this problem's own solutions are left out"));
    assert_non_null(strstr(text, "Example 1: t/allreduce_sum"));
    assert_non_null(strstr(text, "kernel A2"));
    assert_non_null(strstr(text, "Plan: a plan"));
    free(text);
    text = pk_archive_examples_text(l.items, 1, PK_EXAMPLES_ANY);
    assert_non_null(strstr(text, "Scope any"));
    assert_null(strstr(text, "Example 2"));
    free(text);
    pk_archive_list_free(&l);
}

static void bad_arguments(void **state) {
    fixture *f = *state;
    pk_error err;
    pk_archive_list l;
    pk_examples_spec spec = {.k = 0};
    assert_int_equal(pk_archive_retrieve(f->a, &query, &spec, 1, 0, &l, &err), PK_ERR_INVALID);
    spec.k = PK_ARCHIVE_MAX_K + 1;
    assert_int_equal(pk_archive_retrieve(f->a, &query, &spec, 1, 0, &l, &err), PK_ERR_INVALID);
    pk_archive_entry e = {.problem_id = "t/gemm", .world_size = 0, .code = "k"};
    assert_int_equal(pk_archive_add(f->a, NULL, &e, NULL, NULL, &err), PK_ERR_INVALID);
    e.world_size = 1;
    e.problem_id = "t/new"; /* no text for it */
    assert_int_equal(pk_archive_add(f->a, NULL, &e, NULL, NULL, &err), PK_ERR_INVALID);
    assert_int_equal(pk_examples_mode_parse("nearest"), -1);
    assert_int_equal(pk_examples_scope_parse("all"), -1);
    assert_int_equal(pk_examples_scope_parse("other_problems"), PK_EXAMPLES_OTHER_PROBLEMS);
    pk_archive *a;
    assert_int_equal(pk_archive_open_readonly("/nonexistent/archive.sqlite", &a, &err),
                     PK_ERR_NOT_FOUND);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dedup_by_kernel_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(survives_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(similar_ranks_by_bm25, setup, teardown),
        cmocka_unit_test_setup_teardown(scope_leaves_own_problem_out, setup, teardown),
        cmocka_unit_test_setup_teardown(random_follows_the_seed, setup, teardown),
        cmocka_unit_test_setup_teardown(uses_are_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(jsonl_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(examples_text_says_the_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_arguments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
