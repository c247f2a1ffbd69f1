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
    snprintf(path, sizeof path, "%s/%s.txt", PK_TEST_GOLDEN_DIR, name);
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
    if (pk_read_file(path, &want, &len, &err) != PK_OK)
        fail_msg("%s", err.message);
    if (len > 0 && want[len - 1] == '\n')
        want[len - 1] = '\0';
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
    /* One sentence: who hung, of how many, the limit; then the advice. */
    assert_non_null(strstr(fb, "Your previous answer timed out: ranks 1, 3 of 4 did not finish "
                               "within the 60000 ms run limit (stopped after 60012 ms; "));
    assert_non_null(strstr(fb, "rank 3: candidate, trial 1). Look for a deadlock"));
    assert_null(strstr(fb, ". the"));
    assert_null(strstr(fb, ".."));
    free(fb);

    memset(&r, 0, sizeof r); /* a timeout with hung ranks but no reason */
    r.status = PK_STATUS_TIMEOUT;
    r.world_size = 2;
    r.n_hung = 1;
    r.hung_ranks[0] = 1;
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "timed out: rank 1 of 2 did not finish within the run's time "
                               "limit. Look for"));
    free(fb);

    memset(&r, 0, sizeof r); /* a timeout before any rank was known */
    r.status = PK_STATUS_TIMEOUT;
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(
        strstr(fb, "timed out: the run did not finish within its time limit. Look for"));
    free(fb);

    sample_fill(&r, SAMPLE_INCORRECT);
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "Trial 2 of 5 failed"));
    assert_non_null(strstr(fb, "trial 1 passed, the rest were not run."));
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

/* The trial sentence names the trials configured and what happened to the others; it never
 * shows a case the harness cannot produce ("Trial 1 of 1" when 5 were configured). */
static void test_trial_counts(void **state) {
    (void)state;
    pk_summarizer *s = NULL;
    assert_int_equal(pk_summarizer_create(NULL, NULL, &s, NULL), PK_OK);
    struct {
        int planned, run, failing; /* failing: 1-based; trials before it passed */
        const char *want;
    } cases[] = {
        {5, 1, 1,
         "Trial 1 of 5 failed: max abs error 1, max rel error 0.5; the rest were not run."},
        {5, 2, 2,
         "Trial 2 of 5 failed: max abs error 1, max rel error 0.5; trial 1 passed, the "
         "rest were not run."},
        {5, 3, 3,
         "Trial 3 of 5 failed: max abs error 1, max rel error 0.5; trials 1 and 2 "
         "passed, the rest were not run."},
        {5, 5, 5,
         "Trial 5 of 5 failed: max abs error 1, max rel error 0.5; trials 1 to 4 "
         "passed."},
        {1, 1, 1, "Trial 1 of 1 failed: max abs error 1, max rel error 0.5."},
        {0, 1, 1, "Trial 1 of 1 failed: max abs error 1, max rel error 0.5."}, /* older result */
        {4, 4, 2,
         "Trial 2 of 4 failed: max abs error 1, max rel error 0.5; trial 1 passed, the "
         "later ones passed."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pk_eval_result r;
        memset(&r, 0, sizeof r);
        r.status = PK_STATUS_INCORRECT;
        r.trials_planned = cases[i].planned;
        r.n_trials = cases[i].run;
        for (int k = 0; k < r.n_trials; k++)
            r.trials[k].passed = k + 1 != cases[i].failing;
        r.trials[cases[i].failing - 1].max_abs_err = 1;
        r.trials[cases[i].failing - 1].max_rel_err = 0.5;
        char *fb = pk_summarizer_feedback(s, &r, NULL);
        if (!strstr(fb, cases[i].want))
            fail_msg("case %zu: got '%s', want '%s'", i, fb, cases[i].want);
        assert_null(strstr(fb, "failed in all"));
        free(fb);
    }
    /* Trials run to the end with two failures (not what the harness does, but a plugin or an
     * older result may say so): the count is of the trials run. */
    pk_eval_result r;
    memset(&r, 0, sizeof r);
    r.status = PK_STATUS_INCORRECT;
    r.trials_planned = 5;
    r.n_trials = 5;
    for (int k = 0; k < 5; k++)
        r.trials[k].passed = k != 1 && k != 3;
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "Trial 2 of 5 failed: max abs error 0, max rel error 0; 2 of the 5 "
                               "trials failed."));
    free(fb);
    pk_summarizer_free(s);
}

/* A trial that failed only the norm-wise check names no element: the feedback gives the
 * harness's reason, which says the output as a whole is off (issue #26). */
static void test_norm_wise_failure(void **state) {
    (void)state;
    pk_summarizer *s = NULL;
    assert_int_equal(pk_summarizer_create(NULL, NULL, &s, NULL), PK_OK);
    pk_eval_result r;
    memset(&r, 0, sizeof r);
    r.status = PK_STATUS_INCORRECT;
    r.trials_planned = 5;
    r.n_trials = 1;
    r.trials[0].n_mismatch = 1;
    r.trials[0].mismatch[0] = (pk_rank_mismatch){0, "out", -1, 0.025, 0.0301};
    snprintf(r.reason, sizeof r.reason,
             "trial 0: 1 rank(s) wrong; rank 0 out[norm]: the whole output is off by 0.0301 of "
             "its norm (tolerance 0.025), though each element is within its tolerance");
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "out[norm]: the whole output is off by 0.0301 of its norm"));
    assert_null(strstr(fb, "[-1]"));
    free(fb);
    pk_summarizer_free(s);
}

/* A cached baseline leaves the reference untimed (0): the feedback shows the baseline used. */
static void test_cached_baseline(void **state) {
    (void)state;
    pk_summarizer *s = NULL;
    assert_int_equal(pk_summarizer_create(NULL, NULL, &s, NULL), PK_OK);
    pk_eval_result r;
    sample_fill(&r, SAMPLE_CORRECT);
    memset(&r.reference, 0, sizeof r.reference);
    r.baseline = (pk_baseline_used){.us = 49.25, .cv = 0.02, .iters = 100, .cached = 1};
    r.candidate.median_us = 15.3;
    r.speedup = 49.25 / 15.3;
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "Time 15.3 us, baseline 49.2 us, speedup 3.22x."));
    assert_null(strstr(fb, "baseline 0.0"));
    free(fb);
    pk_summarizer_free(s);
}

/* A correct turn's profile (docs/feedback.md, "Profiles"): its text after the verdict; a
 * profiler failure said to be ours; a budget skip in one line; nothing when none was asked. */
static void test_profile_lines(void **state) {
    (void)state;
    pk_summarizer *s = NULL;
    assert_int_equal(pk_summarizer_create(NULL, NULL, &s, NULL), PK_OK);
    pk_eval_result r;
    sample_fill(&r, SAMPLE_CORRECT);
    char *plain = pk_summarizer_feedback(s, &r, NULL);
    r.profile.level = 2;
    snprintf(r.profile.status, sizeof r.profile.status, "ok");
    r.profile.text = strdup("Profile (full, 2 ranks, one call):\n- slowest rank: 1, 75.0 us\n");
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    assert_true(strncmp(fb, plain, strlen(plain)) == 0); /* the verdict's text comes first */
    assert_non_null(strstr(fb, "\n\nProfile (full, 2 ranks, one call):\n- slowest rank: 1"));
    assert_null(strstr(fb, "Profiler trouble"));
    free(fb);
    snprintf(r.profile.status, sizeof r.profile.status, "partial");
    snprintf(r.profile.reason, sizeof r.profile.reason, "metrics: timed out after 45 s");
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "- slowest rank: 1"));
    assert_non_null(strstr(fb, "(Profiler trouble, on our side, not your kernel's: metrics: "
                               "timed out after 45 s)"));
    free(fb);
    free(r.profile.text);
    r.profile.text = NULL;
    snprintf(r.profile.status, sizeof r.profile.status, "skipped");
    snprintf(r.profile.reason, sizeof r.profile.reason, "budget (2 profiles per minute)");
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_non_null(strstr(fb, "Profile: skipped this turn (the server's profile budget)."));
    free(fb);
    r.profile.level = 0; /* no profile asked: the plain text */
    fb = pk_summarizer_feedback(s, &r, NULL);
    assert_string_equal(fb, plain);
    free(fb);
    free(plain);
    pk_summarizer_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_outcome_matches_golden),
        cmocka_unit_test(test_norm_wise_failure),
        cmocka_unit_test(test_outcome_details),
        cmocka_unit_test(test_trial_counts),
        cmocka_unit_test(test_cached_baseline),
        cmocka_unit_test(test_profile_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
