/* Compiler output condensing on real nvcc logs: broken CUDA files are compiled in a directory
 * shaped like a sandbox job, and the condensed text is checked against the raw log. nvcc is
 * part of the build (CMake found it): without it the test fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_summarizer.h"

static char job_dir[256];

/* Writes source to <job>/src/candidate.cu, compiles it and returns nvcc's output. */
static char *nvcc_log(const char *source) {
    char dir[320], path[400], cmd[1024];
    snprintf(dir, sizeof dir, "%s/src", job_dir);
    assert_int_equal(pk_mkdir_p(dir, NULL), PK_OK);
    snprintf(path, sizeof path, "%s/candidate.cu", dir);
    assert_int_equal(pk_write_file(path, source, strlen(source), NULL), PK_OK);
    snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90a -c '%s' -o /dev/null 2>&1", PK_TEST_NVCC, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    pk_strbuf sb = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        pk_strbuf_append(&sb, buf, n);
    assert_int_not_equal(pclose(p), 0); /* the source is broken on purpose */
    return pk_strbuf_take(&sb);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* nvcc reports one undefined identifier at most twice, so the repeats are assignments to a
 * constant, each its own error with the same message. */
static const char repeated_errors[] = "#include <cuda_runtime.h>\n"
                                      "__global__ void scale(float *x, int n) {\n"
                                      "    const int c = 1;\n"
                                      "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                                      "    if (i < n) x[i] = factor * x[i];\n"
                                      "    c = 2;\n"
                                      "    c = 3;\n"
                                      "    c = 4;\n"
                                      "    float y = x[3]\n"
                                      "    x[4] = y;\n"
                                      "}\n"
                                      "extern \"C\" int solution(float *x, int n) {\n"
                                      "    scale<<<1, 32>>>(x, n);\n"
                                      "    return launch_count(x);\n"
                                      "}\n";

static void test_repeated_and_distinct_errors(void **state) {
    (void)state;
    char *raw = nvcc_log(repeated_errors);
    assert_non_null(strstr(raw, job_dir)); /* nvcc names the file by its full path */
    assert_int_equal(count(raw, "expression must be a modifiable lvalue"), 3);

    char *c = pk_condense_compile_log(raw, 2000);
    assert_true(strlen(c) <= 2000);
    assert_null(strstr(c, job_dir));
    assert_null(strstr(c, "/tmp"));
    assert_non_null(strstr(c, "candidate.cu(5): error: identifier \"factor\" is undefined"));
    assert_non_null(strstr(c, "if (i < n) x[i] = factor * x[i];")); /* the source line */
    assert_non_null(strstr(c, "candidate.cu(6): error: expression must be a modifiable lvalue"));
    assert_int_equal(count(c, "modifiable lvalue"), 1); /* repeats folded */
    assert_non_null(strstr(c, "(the same error 2 more times, at line 7, 8)"));
    assert_non_null(strstr(c, "expected a \";\""));
    assert_non_null(strstr(c, "identifier \"launch_count\" is undefined"));
    assert_null(strstr(c, "errors detected in the compilation"));
    free(c);
    free(raw);
}

/* Many distinct errors: the first ones are kept whole and the rest counted, within budget. */
static void test_budget_keeps_first_errors(void **state) {
    (void)state;
    pk_strbuf src = {0};
    pk_strbuf_puts(&src, "__global__ void k(float *x) {\n");
    for (int i = 0; i < 40; i++)
        pk_strbuf_printf(&src, "    x[%d] = undefined_value_%02d;\n", i, i);
    pk_strbuf_puts(&src, "}\n");
    char *raw = nvcc_log(src.data);
    pk_strbuf_free(&src);
    assert_true(strlen(raw) > 3000);
    for (size_t budget = 300; budget <= 1200; budget += 450) {
        char *c = pk_condense_compile_log(raw, budget);
        assert_true(strlen(c) <= budget);
        assert_non_null(strstr(c, "identifier \"undefined_value_00\" is undefined"));
        assert_non_null(strstr(c, "x[0] = undefined_value_00;"));
        assert_null(strstr(c, "undefined_value_39"));
        assert_non_null(strstr(c, "more not shown]"));
        free(c);
    }
    free(raw);
}

/* Through the feedback path, with the budget from the options. */
static void test_feedback_uses_budget(void **state) {
    (void)state;
    char *raw = nvcc_log(repeated_errors);
    pk_summarizer *s = NULL;
    assert_int_equal(pk_summarizer_create("{\"compile_log_chars\": 400}", NULL, &s, NULL), PK_OK);
    pk_eval_result r;
    memset(&r, 0, sizeof r);
    r.status = PK_STATUS_COMPILE_ERROR;
    r.compile_log = raw;
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "failed to compile"));
    assert_non_null(strstr(fb, "identifier \"factor\" is undefined"));
    assert_true(strlen(fb) <= 400 + 100); /* the log's budget plus the template's sentence */
    free(fb);
    free(raw);
    pk_summarizer_free(s);
}

static int setup(void **state) {
    (void)state;
    snprintf(job_dir, sizeof job_dir, "/tmp/pkgym-test-jobs-XXXXXX");
    return mkdtemp(job_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    pk_rm_rf(job_dir);
    return 0;
}

int main(void) {
    if (access(PK_TEST_NVCC, X_OK) != 0) {
        fprintf(stderr, "no nvcc at %s (the build found it there)\n", PK_TEST_NVCC);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeated_and_distinct_errors),
        cmocka_unit_test(test_budget_keeps_first_errors),
        cmocka_unit_test(test_feedback_uses_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
