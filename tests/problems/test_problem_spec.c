/* Loader, expressions and sizes of meta.json. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_expr.h"
#include "pk_problem_spec.h"

static long long eval(const char *text, int *rc, pk_error *err) {
    const char *names[] = {"n", "world"};
    const long long vals[] = {1000, 4};
    long long v = -12345;
    *rc = pk_expr_eval(text, names, vals, 2, &v, err);
    return v;
}

static void expressions(void **state) {
    (void)state;
    pk_error err;
    int rc;
    assert_int_equal(eval("2*n*(world-1)", &rc, &err), 6000);
    assert_int_equal(rc, PK_OK);
    assert_int_equal(eval("1 + 2 * 3", &rc, &err), 7);
    assert_int_equal(eval("(1 + 2) * 3", &rc, &err), 9);
    assert_int_equal(eval("n / world - -1", &rc, &err), 251);
    assert_int_equal(eval(" 42 ", &rc, &err), 42);
    eval("n * m", &rc, &err);
    assert_int_equal(rc, PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "unknown name 'm'"));
    eval("n / (world - 4)", &rc, &err);
    assert_non_null(strstr(err.message, "division by zero"));
    eval("99999999999 * 99999999999", &rc, &err);
    assert_non_null(strstr(err.message, "overflow"));
    eval("(n + 1", &rc, &err);
    assert_int_equal(rc, PK_ERR_INVALID);
    eval("n 3", &rc, &err);
    assert_non_null(strstr(err.message, "trailing"));
    eval("", &rc, &err);
    assert_int_equal(rc, PK_ERR_INVALID);
}

/* % and one comparison, for constraints such as "K % world == 0". */
static void expressions_modulo_and_comparisons(void **state) {
    (void)state;
    pk_error err;
    int rc;
    assert_int_equal(eval("n % 7", &rc, &err), 1000 % 7);
    assert_int_equal(eval("n % world == 0", &rc, &err), 1);
    assert_int_equal(eval("n % 3 == 0", &rc, &err), 0);
    assert_int_equal(eval("world * 2 <= 8", &rc, &err), 1);
    assert_int_equal(eval("world > 4", &rc, &err), 0);
    assert_int_equal(eval("n != 1000", &rc, &err), 0);
    eval("n % 0", &rc, &err);
    assert_non_null(strstr(err.message, "division by zero"));
}

/* params (numbers and per-call expressions), checkers, scopes, presets and constraints. */
static void loads_the_compute_format(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_error err;
    assert_int_equal(pk_problem_load_dir(PK_PROBLEMS_SRC "/selftest/params_topk", "selftest",
                                         "params_topk", NULL, &p, &err),
                     PK_OK);
    assert_int_equal(p->timing_blocks, 2); /* no timing.blocks: the default */
    assert_int_equal(p->n_params, 2);
    assert_string_equal(p->params[0].name, "scale");
    assert_true(p->params[0].value == 0.5 && !p->params[0].expr[0]);
    assert_string_equal(p->params[1].expr, "1 + trial % 7");
    assert_int_equal(p->args[2].checker, PK_CHECKER_CUSTOM);
    assert_int_equal(p->args[3].checker, PK_CHECKER_BUDGET);
    assert_true(p->args[3].budget == 0.002 && p->args[3].max_ulp == 1);
    assert_true(p->args[1].atol_rms == 1e-6);
    assert_int_equal(p->args[3].dtype, PK_DTYPE_I8);
    pk_problem_sizes sz;
    assert_int_equal(pk_problem_sizes_at(p, 2, &sz, &err), PK_OK);
    double params[PK_MAX_PARAMS];
    assert_int_equal(pk_problem_params_at(p, &sz, 9, params, &err), PK_OK);
    assert_true(params[0] == 0.5 && params[1] == 1 + 9 % 7);
    /* A preset, then a dims override that breaks a constraint at a listed world size. */
    assert_int_equal(pk_problem_override_dims(p, "small", &err), PK_OK);
    assert_int_equal(pk_problem_sizes_at(p, 8, &sz, &err), PK_OK);
    assert_true(sz.dims[0] == 1024 && sz.dims[1] == 8);
    assert_int_equal(pk_problem_override_dims(p, "n=1001", &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "n % world == 0"));
    assert_int_equal(pk_problem_override_dims(p, "bogus=3", &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "NAME=VALUE"));
    pk_problem_free(p);
}

static void gen_scopes_and_errors(void **state) {
    (void)state;
    pk_gen_spec g;
    pk_error err;
    assert_int_equal(pk_gen_parse("index(vocab)", PK_DTYPE_I64, &g, &err), PK_OK);
    assert_true(g.kind == PK_GEN_INDEX && strcmp(g.hi, "vocab") == 0);
    assert_int_equal(pk_gen_parse("int(-3, n - 1)", PK_DTYPE_I8, &g, &err), PK_OK);
    assert_int_equal(pk_gen_parse("normal(0, 1)", PK_DTYPE_I32, &g, &err), PK_ERR_INVALID);
    assert_int_equal(pk_gen_parse("uniform(1, 1)", PK_DTYPE_F32, &g, &err), PK_ERR_INVALID);
    assert_int_equal(pk_gen_parse("normal(0, 1, 2)", PK_DTYPE_F32, &g, &err), PK_ERR_INVALID);
    assert_int_equal(pk_gen_parse("lattice", PK_DTYPE_F8E4M3, &g, &err), PK_OK);
    assert_int_equal(pk_dtype_from_name("f8e4m3"), PK_DTYPE_F8E4M3);
    assert_int_equal(pk_dtype_size(PK_DTYPE_F8E4M3), 1);
}

static void loads_selftest_allgather(void **state) {
    (void)state;
    pk_problem *p = NULL;
    pk_error err;
    int rc = pk_problem_load_dir(PK_PROBLEMS_SRC "/selftest/allgather", "selftest", "allgather",
                                 "/mods", &p, &err);
    assert_int_equal(rc, PK_OK);
    assert_string_equal(pk_problem_id(p), "selftest/allgather");
    assert_string_equal(pk_problem_entry(p), "solution");
    assert_int_equal(pk_problem_needs_gpu(p), 0);
    assert_string_equal(p->launcher, "mpi");
    assert_int_equal(p->timing_blocks, 5); /* timing.blocks */
    assert_int_equal(p->n_args, 2);
    assert_int_equal(p->args[1].dtype, PK_DTYPE_I32);
    assert_int_equal(p->args[1].role, PK_ARG_OUTPUT);
    assert_true(pk_problem_has_tag(p, "selftest"));
    assert_false(pk_problem_has_tag(p, "gpu-only"));
    assert_string_equal(p->module_path, "/mods/pkprob_selftest_allgather.so");
    assert_non_null(strstr(pk_problem_prompt(p), "solution"));
    pk_problem_sizes sz;
    assert_int_equal(pk_problem_sizes_at(p, 4, &sz, &err), PK_OK);
    assert_int_equal(sz.counts[0], 16384);
    assert_int_equal(sz.counts[1], 16384 * 4);
    assert_int_equal(pk_problem_sizes_at(p, 3, &sz, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "world size 3"));
    /* World 1 is not listed: the diagnostic, for the reference only; sizes evaluate there. */
    assert_true(pk_problem_world_is_diagnostic(p, 1));
    assert_false(pk_problem_world_is_diagnostic(p, 2));
    assert_false(pk_problem_world_admitted(p, 1, 0));
    assert_true(pk_problem_world_admitted(p, 1, 1));
    assert_true(pk_problem_world_admitted(p, 4, 0));
    assert_false(pk_problem_world_admitted(p, 3, 1));
    assert_int_equal(pk_problem_sizes_at(p, 1, &sz, &err), PK_OK);
    assert_int_equal(sz.counts[1], 16384);
    pk_problem_free(p);
}

/* Writes meta.json + prompt.md into a fresh dir and loads it. */
static int load_text(const char *meta, pk_error *err, char *dir, size_t cap) {
    snprintf(dir, cap, "/tmp/pk-test-spec-%d/bad", (int)getpid());
    pk_mkdir_p(dir, err);
    char *m = pk_path_join(dir, "meta.json"), *pr = pk_path_join(dir, "prompt.md");
    pk_write_file(m, meta, strlen(meta), err);
    pk_write_file(pr, "prompt", 6, err);
    free(m);
    free(pr);
    pk_problem *p = NULL;
    int rc = pk_problem_load_dir(dir, "t", "bad", NULL, &p, err);
    pk_problem_free(p);
    return rc;
}

#define BASE                                                                                       \
    "\"id\": \"bad\", \"title\": \"t\", \"category\": \"Other\", \"device\": \"host\", "           \
    "\"signature\": \"s\""

static void rejects_malformed_meta(void **state) {
    (void)state;
    pk_error err;
    char dir[256];
    assert_int_equal(load_text("{" BASE ", \"args\": []}", &err, dir, sizeof dir), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "\"args\""));
    assert_non_null(strstr(err.message, "meta.json"));
    assert_int_equal(load_text("{" BASE ", \"args\": [{\"name\": \"x\", \"dtype\": \"f8\", "
                               "\"role\": \"input\", \"count\": \"4\"}]}",
                               &err, dir, sizeof dir),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "dtype"));
    assert_int_equal(load_text("{\"id\": \"bad\", \"title\": \"t\"}", &err, dir, sizeof dir),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "category"));
    /* timing.blocks: 1..16 */
    assert_int_equal(
        load_text("{" BASE ", \"timing\": {\"blocks\": 17}, \"args\": [{\"name\": "
                  "\"x\", \"dtype\": \"f32\", \"role\": \"input\", \"count\": \"4\"}]}",
                  &err, dir, sizeof dir),
        PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "blocks"));
    assert_int_equal(load_text("{" BASE ", \"launcher\": \"fork\", \"args\": [{\"name\": \"x\", "
                               "\"dtype\": \"f32\", \"role\": \"input\", \"count\": 4}]}",
                               &err, dir, sizeof dir),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "launcher"));
    /* "device_api": a boolean, and only where there is NCCL (device "gpu") */
    assert_int_equal(load_text("{" BASE ", \"device_api\": true, \"args\": [{\"name\": \"x\", "
                               "\"dtype\": \"f32\", \"role\": \"input\", \"count\": 4}]}",
                               &err, dir, sizeof dir),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "device_api"));
    assert_int_equal(load_text("{" BASE ", \"device_api\": 1, \"args\": [{\"name\": \"x\", "
                               "\"dtype\": \"f32\", \"role\": \"input\", \"count\": 4}]}",
                               &err, dir, sizeof dir),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "device_api"));
    assert_int_equal(load_text("{ not json", &err, dir, sizeof dir), PK_ERR_INVALID);
    /* "pkb": PKB's number and its reference file, whose name starts with that number */
    static const char *const bad_pkb[] = {
        "\"pkb\": 13",
        "\"pkb\": {\"reference\": \"13_gemm.py\"}",
        "\"pkb\": {\"number\": 0, \"reference\": \"0_x.py\"}",
        "\"pkb\": {\"number\": 13, \"reference\": \"14_gemm.py\"}",
        "\"pkb\": {\"number\": 1, \"reference\": \"13_gemm.py\"}",
        "\"pkb\": {\"number\": 13, \"reference\": \"13_gemm.txt\"}",
        "\"pkb\": {\"number\": 13, \"reference\": \"13_../x.py\"}",
        "\"pkb\": {\"number\": 13}"};
    for (size_t i = 0; i < sizeof bad_pkb / sizeof *bad_pkb; i++) {
        char meta[512];
        snprintf(meta, sizeof meta,
                 "{" BASE ", %s, \"args\": [{\"name\": \"x\", \"dtype\": \"f32\", "
                 "\"role\": \"input\", \"count\": 4}]}",
                 bad_pkb[i]);
        assert_int_equal(load_text(meta, &err, dir, sizeof dir), PK_ERR_INVALID);
        assert_non_null(strstr(err.message, "pkb"));
    }
    assert_int_equal(load_text("{" BASE ", \"args\": [{\"name\": \"x\", \"dtype\": \"f32\", "
                               "\"role\": \"input\", \"count\": 4}]}",
                               &err, dir, sizeof dir),
                     PK_OK);
    char top[256];
    snprintf(top, sizeof top, "/tmp/pk-test-spec-%d", (int)getpid());
    pk_rm_rf(top);
}

/* ParallelKernelBench has 87 problems, all ported. */
enum { PKB_PROBLEMS = 87 };

static void loads_the_suite(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_PROBLEMS_SRC, "/mods", &set, &err), PK_OK);
    assert_non_null(pk_problem_set_find(set, "selftest/allreduce"));
    assert_non_null(pk_problem_set_find(set, "selftest/scale"));
    assert_null(pk_problem_set_find(set, "selftest/nope"));
    for (size_t i = 1; i < pk_problem_set_count(set); i++) /* sorted by id */
        assert_true(strcmp(pk_problem_id(pk_problem_set_at(set, i - 1)),
                           pk_problem_id(pk_problem_set_at(set, i))) < 0);
    /* PKB's problems (suite:pkb): each of its numbers once, wherever the problem lives; the
     * collectives are 1-8 and everything under pkb/ is one of them. */
    const pk_problem *by_number[PKB_PROBLEMS + 1] = {0};
    int in_suite = 0;
    for (size_t i = 0; i < pk_problem_set_count(set); i++) {
        const pk_problem *p = pk_problem_set_at(set, i);
        int n = pk_problem_pkb_number(p);
        assert_int_equal(pk_problem_in_suite(p, "pkb"), n > 0);
        in_suite += pk_problem_in_suite(p, "pkb");
        if (strcmp(pk_problem_suite(p), "pkb") == 0 ||
            strcmp(pk_problem_suite(p), "collectives") == 0)
            assert_true(n > 0);
        if (n == 0)
            continue;
        assert_true(n <= PKB_PROBLEMS);
        if (by_number[n])
            fail_msg("PKB %d is both %s and %s", n, pk_problem_id(by_number[n]), pk_problem_id(p));
        by_number[n] = p;
    }
    for (int n = 1; n <= PKB_PROBLEMS; n++)
        if (!by_number[n])
            fail_msg("PKB %d is not in the suite", n);
    assert_int_equal(in_suite, PKB_PROBLEMS);
    assert_true(pk_problem_in_suite(pk_problem_set_find(set, "collectives/alltoall"), "pkb"));
    assert_false(pk_problem_in_suite(pk_problem_set_find(set, "collectives/alltoall"), "cuco"));
    assert_true(pk_problem_in_suite(pk_problem_set_find(set, "selftest/scale"), "selftest"));
    pk_problem_set_free(set);
}

/* A reference that calls the reference library says so under its listing, with what each
 * header does (its "// Prompt:" paragraph), so the prompt does not pass a partial baseline off
 * as the whole; every library header has that paragraph. */
static void prompt_names_the_reference_library(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_PROBLEMS_SRC, "/mods", &set, &err), PK_OK);
    const char *p39 = pk_problem_prompt(pk_problem_set_find(set, "pkb/39_ulysses_attention_e2e"));
    const char *att = strstr(p39, "- `pk_attention.cuh` (");
    assert_non_null(att);
    assert_non_null(strstr(att, "lines): flash-attention tiles"));
    assert_non_null(strstr(p39, "- `pk_ulysses.cuh` ("));
    /* through another header: pkb/49's problem.cu includes pk_moe_ep_ref.cuh only */
    const char *p49 = pk_problem_prompt(pk_problem_set_find(set, "pkb/49_moe_ep_balanced"));
    assert_non_null(strstr(p49, "- `pk_moe_ep.cuh` ("));
    const char *p13 = pk_problem_prompt(pk_problem_set_find(set, "pkb/13_gemm_allreduce"));
    assert_null(strstr(p13, "reference library"));
    pk_problem_set_free(set);

    /* Where the library is not visible (the runner's sandbox binds only the problem's own
     * directory) the problem still loads: the headers are named without details. */
    char dir[256], *src = NULL;
    snprintf(dir, sizeof dir, "/tmp/pk-test-spec-lib-%d/pkb/39_ulysses_attention_e2e",
             (int)getpid());
    assert_int_equal(pk_mkdir_p(dir, &err), PK_OK);
    static const char *const files[] = {"meta.json", "prompt.md", "problem.cu"};
    for (size_t i = 0; i < 3; i++) {
        char *from = pk_path_join(PK_PROBLEMS_SRC "/pkb/39_ulysses_attention_e2e", files[i]);
        char *to = pk_path_join(dir, files[i]);
        size_t n = 0;
        assert_int_equal(pk_read_file(from, &src, &n, &err), PK_OK);
        assert_int_equal(pk_write_file(to, src, n, &err), PK_OK);
        free(src);
        free(from);
        free(to);
    }
    pk_problem *alone = NULL;
    assert_int_equal(
        pk_problem_load_dir(dir, "pkb", "39_ulysses_attention_e2e", NULL, &alone, &err), PK_OK);
    assert_non_null(strstr(pk_problem_prompt(alone), "- `pk_attention.cuh`\n"));
    pk_problem_free(alone);
    char top[256];
    snprintf(top, sizeof top, "/tmp/pk-test-spec-lib-%d", (int)getpid());
    pk_rm_rf(top);

    DIR *d = opendir(PK_PROBLEMS_SRC "/include");
    assert_non_null(d);
    int headers = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "pk_", 3) != 0 || n < 5 || strcmp(e->d_name + n - 4, ".cuh") != 0)
            continue;
        char *path = pk_path_join(PK_PROBLEMS_SRC "/include", e->d_name), *text = NULL;
        assert_int_equal(pk_read_file(path, &text, NULL, &err), PK_OK);
        if (!strstr(text, "\n// Prompt: "))
            fail_msg("%s has no \"// Prompt:\" paragraph (what models are told it does)",
                     e->d_name);
        headers++;
        free(text);
        free(path);
    }
    closedir(d);
    assert_true(headers >= 13);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(expressions),
        cmocka_unit_test(expressions_modulo_and_comparisons),
        cmocka_unit_test(loads_the_compute_format),
        cmocka_unit_test(gen_scopes_and_errors),
        cmocka_unit_test(loads_selftest_allgather),
        cmocka_unit_test(rejects_malformed_meta),
        cmocka_unit_test(loads_the_suite),
        cmocka_unit_test(prompt_names_the_reference_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
