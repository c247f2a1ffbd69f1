/* The built-in feedback for each outcome, compared with tests/summarizer/golden/<outcome>.txt.
 * PK_UPDATE_GOLDEN=1 rewrites the files (review the diff before committing). */
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

static void check_golden(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s.txt", PK_TEST_GOLDEN_DIR, name);
    const char *update = getenv("PK_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        pk_strbuf sb = {0};
        pk_strbuf_printf(&sb, "%s\n", text);
        assert_int_equal(pk_write_file(path, sb.data, sb.len, NULL), PK_OK);
        pk_strbuf_free(&sb);
        return;
    }
    char *want = NULL;
    size_t len = 0;
    pk_error err = {0};
    if (pk_read_file(path, &want, &len, &err) != PK_OK) {
        fail_msg("%s", err.message);
    }
    if (len > 0 && want[len - 1] == '\n') {
        want[len - 1] = '\0';
    }
    if (strcmp(want, text) != 0) {
        fail_msg("feedback for %s differs from %s:\n--- got ---\n%s\n--- want ---\n%s", name, path,
                 text, want);
    }
    free(want);
}

static void test_each_outcome_matches_golden(void **state) {
    (void)state;
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create("{\"compile_log_chars\": 2000}", NULL, &s, &err), PK_OK);
    for (int k = 0; k < SAMPLE_COUNT; k++) {
        pk_eval_result r;
        sample_fill(&r, (sample_kind)k);
        char *fb = pk_summarizer_feedback(s, &r, NULL);
        assert_non_null(fb);
        check_golden(sample_names[k], fb);
        free(fb);
        sample_free(&r);
    }
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 0);
    pk_summarizer_free(s);
}

/* Properties the issue asks of each message, checked apart from the exact wording. */
static void test_outcome_details(void **state) {
    (void)state;
    pk_summarizer *s = NULL;
    assert_int_equal(pk_summarizer_create(NULL, NULL, &s, NULL), PK_OK);
    pk_eval_result r;
    char *fb;

    sample_fill(&r, SAMPLE_REJECTED);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "symbols.forbidden_call"));
    free(fb);

    sample_fill(&r, SAMPLE_TIMEOUT);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "rank(s) 1, 3 of 4"));
    free(fb);

    memset(&r, 0, sizeof(r)); /* a timeout before any rank was known */
    r.status = PK_STATUS_TIMEOUT;
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(
        strstr(fb, "rank(s) (not recorded) of ? did not finish. The run hit its time limit."));
    free(fb);

    sample_fill(&r, SAMPLE_INCORRECT);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "Trial 2 of 5"));
    assert_non_null(strstr(fb, "rank 2, output out[4097]: expected 1.5, got 0.75"));
    assert_non_null(strstr(fb, "max abs error 0.75, max rel error 0.5"));
    free(fb);

    sample_fill(&r, SAMPLE_CORRECT_ROOFLINE);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "speedup 1.23x"));
    assert_non_null(strstr(fb, "50.0% of the no-overlap roofline (406.2 us"));
    assert_non_null(strstr(fb, "roofline floor, which even perfect overlap"));
    assert_non_null(strstr(fb, "is 300.0 us"));
    free(fb);

    sample_fill(&r, SAMPLE_CORRECT);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_null(strstr(fb, "roofline"));
    free(fb);

    sample_fill(&r, SAMPLE_RUNTIME_ERROR);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_null(strstr(fb, "/tmp/pkgym-jobs"));
    assert_non_null(strstr(fb, "runner.cu:88"));
    sample_free(&r);
    free(fb);

    sample_fill(&r, SAMPLE_COMPILE_ERROR);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_null(strstr(fb, "/tmp/"));
    assert_null(strstr(fb, "warning #177"));
    sample_free(&r);
    free(fb);
    pk_summarizer_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_outcome_matches_golden),
        cmocka_unit_test(test_outcome_details),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
