/* Compiler-log condensing on the formats other than nvcc's front end (host gcc, ptxas), on
 * unrecognised text, and with budgets too small for one diagnostic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_summarizer.h"

static void test_host_compiler_format(void **state) {
    (void)state;
    const char *log =
        "/tmp/pkgym-jobs/ab12/src/candidate.cu: In function 'int solution(pk_ctx*)':\n"
        "/tmp/pkgym-jobs/ab12/src/candidate.cu:12:5: error: 'foo' was not declared in this scope\n"
        "   12 |     foo(3);\n"
        "      |     ^~~\n"
        "/tmp/pkgym-jobs/ab12/src/candidate.cu:7:6: note: 'bar' declared here\n"
        "/tmp/pkgym-jobs/ab12/src/candidate.cu:12:12: error: expected ';' before '}' token\n"
        "/tmp/pkgym-jobs/ab12/src/candidate.cu:20:1: warning: no return statement\n";
    char *c = pk_condense_compile_log(log, 1000);
    assert_null(strstr(c, "/tmp"));
    assert_non_null(strstr(c, "candidate.cu:12:5: error: 'foo' was not declared in this scope"));
    assert_non_null(strstr(c, "   12 |     foo(3);"));
    assert_non_null(strstr(c, "note: 'bar' declared here")); /* a note stays with its error */
    assert_null(strstr(c, "expected ';'"));                  /* follow-on error on line 12 */
    assert_null(strstr(c, "no return statement"));
    assert_non_null(strstr(c, "1 follow-on error on reported lines folded, 1 warning omitted"));
    free(c);
}

static void test_ptxas_and_warnings_only(void **state) {
    (void)state;
    char *c = pk_condense_compile_log(
        "ptxas error   : Entry function 'k' uses too much shared data (0x20000 bytes, 0xc000 "
        "max)\nptxas info    : 0 bytes gmem\n",
        500);
    assert_non_null(strstr(c, "uses too much shared data"));
    assert_null(strstr(c, "ptxas info"));
    free(c);
    /* Only warnings (e.g. a link failure reported elsewhere): the warnings are the message. */
    c = pk_condense_compile_log("k.cu(3): warning #177-D: variable \"u\" was declared but never "
                                "referenced\n    int u;\n        ^\n",
                                500);
    assert_non_null(strstr(c, "warning #177-D"));
    free(c);
}

static void test_unrecognised_text(void **state) {
    (void)state;
    char *c = pk_condense_compile_log("\n\nnvcc fatal   : Unsupported gpu architecture "
                                      "'compute_12'\n\n",
                                      500);
    assert_string_equal(c, "nvcc fatal   : Unsupported gpu architecture 'compute_12'");
    free(c);
}

static void test_tiny_budgets(void **state) {
    (void)state;
    const char *log = "/tmp/j/src/a.cu(1): error: this declaration has no storage class or type "
                      "specifier\n  xx;\n  ^\n\n/tmp/j/src/a.cu(2): error: expected a \";\"\n";
    for (size_t budget = 0; budget <= 200; budget += 8) {
        char *c = pk_condense_compile_log(log, budget);
        assert_non_null(c);
        assert_true(strlen(c) <= budget);
        free(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_compiler_format),
        cmocka_unit_test(test_ptxas_and_warnings_only),
        cmocka_unit_test(test_unrecognised_text),
        cmocka_unit_test(test_tiny_budgets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
