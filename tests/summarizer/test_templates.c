/* The editable templates: a changed file changes the text; typos and missing files are errors
 * that name the file. */
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

static char dir[256];

/* A copy of the shipped templates in a temporary directory. */
static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/pkgym-test-templates-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    char cmd[768];
    snprintf(cmd, sizeof cmd, "cp '%s'/*.txt '%s'/", pk_summarizer_default_templates_dir(), dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    pk_rm_rf(dir);
    return 0;
}

static void write_template(const char *name, const char *text) {
    char *path = pk_path_join(dir, name);
    assert_int_equal(pk_write_file(path, text, strlen(text), NULL), PK_OK);
    free(path);
}

static void test_edited_template_changes_text(void **state) {
    (void)state;
    write_template("continue.txt", "Try again, faster.\n");
    write_template("feedback_correct.txt", "OK in {{time_us}} us ({{speedup}}x).\n");
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create(NULL, dir, &s, &err), PK_OK);
    pk_turn v = {.turn = 1, .code = "int x;", .summary = "sum", .feedback = "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_string_equal(p + strlen(p) - strlen("Try again, faster."), "Try again, faster.");
    free(p);
    pk_eval_result r;
    memset(&r, 0, sizeof r);
    r.status = PK_STATUS_CORRECT;
    r.has_timing = 1;
    r.candidate.median_us = 50.0;
    r.reference.median_us = 100.0;
    r.speedup = 2.0;
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    assert_string_equal(fb, "OK in 50.0 us (2.00x).");
    free(fb);
    pk_summarizer_free(s);
}

static void test_unknown_placeholder_is_an_error(void **state) {
    (void)state;
    write_template("feedback_timeout.txt", "Ranks {{hung}} hung.\n");
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create(NULL, dir, &s, &err), PK_ERR_INVALID);
    assert_null(s);
    assert_non_null(strstr(err.message, "feedback_timeout.txt"));
    assert_non_null(strstr(err.message, "{{hung}}"));
}

static void test_missing_template_is_an_error(void **state) {
    (void)state;
    char *path = pk_path_join(dir, "turn.txt");
    assert_int_equal(unlink(path), 0);
    free(path);
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create(NULL, dir, &s, &err), PK_ERR_NOT_FOUND);
    assert_non_null(strstr(err.message, "turn.txt"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_edited_template_changes_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_placeholder_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_template_is_an_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
