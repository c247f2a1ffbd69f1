/* Hooks: plugins and commands selected per summarizer, the example hooks, and the fallback to the
 * built-in when a hook crashes, hangs, prints garbage or breaks the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_summarizer.h"
#include "sample_results.h"

static pk_summarizer *make(const char *options) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    if (pk_summarizer_create(options, NULL, &s, &err) != PK_OK) {
        fail_msg("%s", err.message);
    }
    return s;
}

static char *hook_options(const char *slot, const char *use, int timeout_ms) {
    static char buf[1024];
    snprintf(buf, sizeof(buf), "{\"hooks\": {\"%s\": \"%s\", \"timeout_ms\": %d}}", slot, use,
             timeout_ms);
    return buf;
}

static char *feedback_with(const char *use, int timeout_ms, sample_kind kind, pk_summarizer **out) {
    pk_summarizer *s = make(hook_options("feedback", use, timeout_ms));
    pk_eval_result r;
    sample_fill(&r, kind);
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    sample_free(&r);
    *out = s;
    return fb;
}

static char *builtin_feedback(sample_kind kind) {
    pk_summarizer *s = make(NULL);
    pk_eval_result r;
    sample_fill(&r, kind);
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    sample_free(&r);
    pk_summarizer_free(s);
    return fb;
}

/* Acceptance: two summarizers with different options in one process give different feedback. */
static void test_two_plugins_in_one_process(void **state) {
    (void)state;
    pk_summarizer *terse, *verbose;
    char *t = feedback_with("plugin:" PK_TEST_TERSE, 5000, SAMPLE_COMPILE_ERROR, &terse);
    char *v = feedback_with("plugin:" PK_TEST_VERBOSE, 5000, SAMPLE_COMPILE_ERROR, &verbose);
    char *b = builtin_feedback(SAMPLE_COMPILE_ERROR);
    assert_string_equal(t,
                        "compile_error: candidate.cu(14): error: identifier \"tile\" is undefined");
    assert_int_equal(strncmp(v, b, strlen(b)), 0); /* verbose = built-in + details */
    assert_true(strlen(v) > strlen(b));
    assert_string_not_equal(t, v);
    assert_int_equal(pk_summarizer_hook_fallbacks(terse), 0);
    assert_int_equal(pk_summarizer_hook_fallbacks(verbose), 0);
    free(t);
    free(v);
    free(b);

    pk_eval_result r;
    sample_fill(&r, SAMPLE_INCORRECT);
    v = pk_summarizer_feedback(verbose, &r, NULL);
    t = pk_summarizer_feedback(terse, &r, NULL);
    assert_non_null(strstr(v, "Trials: trial 1 passed"));
    assert_non_null(strstr(v, "trial 2 FAILED (max abs 0.75"));
    assert_string_equal(t, "incorrect: trial 1: 2 rank(s) wrong; rank 2 out[4097]: expected 1.5, "
                           "got 0.75 (max abs err 0.75)");
    free(t);
    free(v);
    sample_fill(&r, SAMPLE_CORRECT);
    t = pk_summarizer_feedback(terse, &r, NULL);
    assert_string_equal(t, "correct: 812.4 us vs baseline 1000.2 us (1.23x)");
    free(t);
    pk_summarizer_free(terse);
    pk_summarizer_free(verbose);
}

static void test_summarize_plugin(void **state) {
    (void)state;
    pk_summarizer *s = make(hook_options("summarize", "plugin:" PK_TEST_TERSE, 5000));
    pk_parsed_action a;
    assert_int_equal(pk_summarizer_parse_action(s, "```cuda\nint x;\n```\nFirst idea. Second idea.",
                                                NULL, &a, NULL),
                     PK_OK);
    assert_string_equal(a.summary, "First idea.");
    pk_parsed_action_free(&a);
    pk_summarizer_free(s);

    s = make(hook_options("summarize", "plugin:" PK_TEST_VERBOSE, 5000));
    assert_int_equal(
        pk_summarizer_parse_action(s, "```cuda\nint x;\nint y;\n```\nIdea.", NULL, &a, NULL),
        PK_OK);
    assert_string_equal(a.summary, "Idea. (code: 2 lines)");
    pk_parsed_action_free(&a);
    pk_summarizer_free(s);
}

/* A plugin without a history hook declines: the built-in is used and nothing failed. */
static void test_declined_hook_is_not_a_failure(void **state) {
    (void)state;
    pk_summarizer *s = make(hook_options("history", "plugin:" PK_TEST_TERSE, 5000));
    pk_turn_view v = {1, "int x;", "sum", "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_non_null(strstr(p, "--- Attempt 1 ---"));
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 0);
    free(p);
    pk_summarizer_free(s);
}

/* Each faulty hook: the built-in text, a recorded failure naming the cause, quickly. */
static void expect_fallback(const char *use, int timeout_ms, const char *cause) {
    char *builtin = builtin_feedback(SAMPLE_RUNTIME_ERROR);
    pk_summarizer *s;
    double t0 = pk_now_ms();
    char *fb = feedback_with(use, timeout_ms, SAMPLE_RUNTIME_ERROR, &s);
    double took = pk_now_ms() - t0;
    assert_string_equal(fb, builtin);
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 1);
    if (!strstr(pk_summarizer_last_hook_error(s), cause)) {
        fail_msg("hook error \"%s\" does not mention \"%s\"", pk_summarizer_last_hook_error(s),
                 cause);
    }
    assert_true(took < timeout_ms + 3000.0);
    free(fb);
    free(builtin);
    pk_summarizer_free(s);
}

static void test_plugin_crash(void **state) {
    (void)state;
    expect_fallback("plugin:" PK_TEST_FAULT_CRASH, 5000, "SIGSEGV");
}

static void test_plugin_hang(void **state) {
    (void)state;
    double t0 = pk_now_ms();
    expect_fallback("plugin:" PK_TEST_FAULT_HANG, 300, "time limit");
    assert_true(pk_now_ms() - t0 >= 300.0);
}

static void test_plugin_bad_utf8(void **state) {
    (void)state;
    expect_fallback("plugin:" PK_TEST_FAULT_BAD_UTF8, 5000, "not valid UTF-8");
}

static void test_plugin_wrong_abi(void **state) {
    (void)state;
    expect_fallback("plugin:" PK_TEST_FAULT_ABI, 5000, "ABI version 2");
}

static void test_plugin_missing(void **state) {
    (void)state;
    expect_fallback("plugin:/nonexistent/plugin.so", 5000, "dlopen");
}

static void test_command_hang_crash_garbage(void **state) {
    (void)state;
    expect_fallback("cmd:" PK_TEST_FIXTURES "/cmd_hang.sh", 300, "time limit");
    expect_fallback("cmd:" PK_TEST_FIXTURES "/cmd_crash.sh", 5000, "SIGSEGV");
    expect_fallback("cmd:" PK_TEST_FIXTURES "/cmd_garbage.sh", 5000, "Feedback: looks fine");
    expect_fallback("cmd:/nonexistent/prog", 5000, "code 127");
}

static void test_command_gets_hook_name(void **state) {
    (void)state;
    pk_summarizer *s;
    char *fb = feedback_with("cmd:" PK_TEST_FIXTURES "/cmd_echo_hook.sh", 5000, SAMPLE_TIMEOUT, &s);
    assert_string_equal(fb, "command ran for feedback");
    free(fb);
    pk_summarizer_free(s);
}

/* A feedback hook gets both rooflines, each by its name. */
static void test_command_gets_both_rooflines(void **state) {
    (void)state;
    pk_summarizer *s;
    char *fb = feedback_with("cmd:" PK_TEST_FIXTURES "/cmd_echo_timing.sh", 5000,
                             SAMPLE_CORRECT_ROOFLINE, &s);
    assert_non_null(strstr(fb, "roofline_floor_us=300 "));
    assert_non_null(strstr(fb, "roofline_no_overlap_us=406.2 "));
    assert_non_null(strstr(fb, "time_us=812.4"));
    free(fb);
    pk_summarizer_free(s);
}

/* A 1 MB request to a command that never reads it: no SIGPIPE kills this process. */
static void test_command_not_reading_large_request(void **state) {
    (void)state;
    pk_summarizer *s =
        make("{\"budget_tokens\": 0, \"hooks\": {\"history\": \"cmd:" PK_TEST_FIXTURES
             "/cmd_no_read.sh\"}}");
    size_t n = 1 << 20;
    char *code = malloc(n + 1);
    memset(code, 'c', n);
    code[n] = '\0';
    pk_turn_view v = {1, code, "sum", "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_non_null(strstr(p, "--- Attempt 1 ---"));
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 1);
    assert_non_null(strstr(pk_summarizer_last_hook_error(s), "(nothing)"));
    free(p);
    free(code);
    pk_summarizer_free(s);
}

static void test_history_hook_over_budget(void **state) {
    (void)state;
    pk_summarizer *s =
        make("{\"budget_chars\": 4000, \"hooks\": {\"history\": \"cmd:" PK_TEST_FIXTURES
             "/cmd_over_budget.sh\"}}");
    pk_turn_view v = {1, "int x;", "sum", "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_true(strlen(p) <= 4000);
    assert_non_null(strstr(p, "--- Attempt 1 ---"));
    assert_non_null(strstr(pk_summarizer_last_hook_error(s), "exceeds the budget"));
    free(p);
    pk_summarizer_free(s);
}

/* The shipped example command: a compact history, within the budget. */
static void test_example_history_command(void **state) {
    (void)state;
    pk_summarizer *s =
        make("{\"budget_chars\": 1500, \"hooks\": {\"history\": \"cmd:" PK_TEST_EXAMPLES
             "/history_cmd.py\", \"timeout_ms\": 10000}}");
    char code[3][700];
    pk_turn_view v[3];
    for (int i = 0; i < 3; i++) {
        memset(code[i], 'a' + i, sizeof(code[i]) - 1);
        code[i][sizeof(code[i]) - 1] = '\0';
        v[i] = (pk_turn_view){i + 1, code[i], "sum", "fb"};
    }
    char *p = pk_summarizer_next_prompt(s, "TASK", v, 3);
    if (pk_summarizer_hook_fallbacks(s) != 0) {
        fail_msg("example command failed: %s", pk_summarizer_last_hook_error(s));
    }
    assert_non_null(strstr(p, "code shown for the latest only"));
    assert_non_null(strstr(p, "Attempt 1: fb"));
    assert_non_null(strstr(p, code[2]));
    assert_null(strstr(p, code[1]));
    assert_true(strlen(p) <= 1500);
    free(p);
    pk_summarizer_free(s);
}

static void expect_invalid(const char *options, const char *needle) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create(options, NULL, &s, &err), PK_ERR_INVALID);
    assert_null(s);
    if (!strstr(err.message, needle)) {
        fail_msg("error \"%s\" does not mention \"%s\"", err.message, needle);
    }
}

static void test_option_errors(void **state) {
    (void)state;
    expect_invalid("{\"budget_chars\": 100, \"verbosity\": 3}", "\"verbosity\"");
    expect_invalid("{\"hooks\": {\"render\": \"builtin\"}}", "\"render\"");
    expect_invalid("{\"hooks\": {\"feedback\": \"python:/x.py\"}}", "python:/x.py");
    expect_invalid("{\"hooks\": {\"feedback\": \"plugin:relative.so\"}}", "absolute");
    expect_invalid("{\"hooks\": {\"feedback\": {\"use\": \"builtin\", \"retries\": 1}}}",
                   "\"retries\"");
    expect_invalid("{\"hooks\": {\"timeout_ms\": 0}}", "timeout_ms");
    expect_invalid("{\"budget_tokens\": -5}", "budget_tokens");
    expect_invalid("[1]", "object");
    expect_invalid("{\"budget_chars\": ", "invalid JSON");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_plugins_in_one_process),
        cmocka_unit_test(test_summarize_plugin),
        cmocka_unit_test(test_declined_hook_is_not_a_failure),
        cmocka_unit_test(test_plugin_crash),
        cmocka_unit_test(test_plugin_hang),
        cmocka_unit_test(test_plugin_bad_utf8),
        cmocka_unit_test(test_plugin_wrong_abi),
        cmocka_unit_test(test_plugin_missing),
        cmocka_unit_test(test_command_hang_crash_garbage),
        cmocka_unit_test(test_command_gets_hook_name),
        cmocka_unit_test(test_command_gets_both_rooflines),
        cmocka_unit_test(test_command_not_reading_large_request),
        cmocka_unit_test(test_history_hook_over_budget),
        cmocka_unit_test(test_example_history_command),
        cmocka_unit_test(test_option_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
