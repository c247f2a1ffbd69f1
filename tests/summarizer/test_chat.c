/* The conversation as chat messages: roles and order, contents, the budgets (earliest turns
 * dropped first with a note, the latest turn's code cut in the middle, never the task), and bad
 * arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_summarizer.h"
#include "sample_turns.h"

static pk_summarizer *make(const char *options) {
    return sample_summarizer(options);
}

/* Three turns of about 1.5 KB of code each, told apart by their markers. */
typedef sample_turns turns3;

static void make_turns(turns3 *t) {
    sample_turns_fill(t, 3, 1500, 1);
}

static size_t total_chars(const pk_chat_message *m, int n) {
    size_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += strlen(m[i].content);
    return sum;
}

static void test_roles_and_contents(void **state) {
    (void)state;
    pk_summarizer *s = make("{\"budget_tokens\": 0}");
    turns3 t;
    make_turns(&t);
    pk_chat_message *m = NULL;
    int n = 0;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_messages(s, TASK, t.v, 3, &m, &n, &err), PK_OK);
    assert_int_equal(n, 8);
    const char *want[] = {"system",    "user", "assistant", "user",
                          "assistant", "user", "assistant", "user"};
    for (int i = 0; i < n; i++)
        assert_string_equal(m[i].role, want[i]);
    char *first = pk_summarizer_first_prompt(s, TASK);
    assert_string_equal(m[1].content, first);
    free(first);
    for (int i = 0; i < 3; i++) {
        const char *a = m[2 + 2 * i].content, *u = m[3 + 2 * i].content;
        char head[64];
        snprintf(head, sizeof head, "```cuda\n// CODE-%d\n", i + 1);
        assert_true(strncmp(a, head, strlen(head)) == 0);
        assert_non_null(strstr(a, t.summary[i]));
        assert_null(strstr(a, t.feedback[i]));
        snprintf(head, sizeof head, "Result of attempt %d:\n", i + 1);
        assert_true(strncmp(u, head, strlen(head)) == 0);
        assert_non_null(strstr(u, t.feedback[i]));
        assert_string_equal(u + strlen(u) - strlen(CONTINUE), CONTINUE);
    }
    pk_chat_messages_free(m, n);
    /* No turns: system and the first prompt. */
    assert_int_equal(pk_summarizer_messages(s, TASK, NULL, 0, &m, &n, &err), PK_OK);
    assert_int_equal(n, 2);
    assert_string_equal(m[0].role, "system");
    pk_chat_messages_free(m, n);
    pk_summarizer_free(s);
}

/* Every character budget from "all fits" down to "nothing fits": the earliest turns go first,
 * the result fits whenever the system and first messages do, and a note counts the dropped. */
static void test_budget_sweep(void **state) {
    (void)state;
    turns3 t;
    make_turns(&t);
    pk_summarizer *all = make("{\"budget_tokens\": 0}");
    pk_chat_message *m = NULL;
    int n = 0;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_messages(all, TASK, t.v, 3, &m, &n, &err), PK_OK);
    size_t full = total_chars(m, n), floor = strlen(m[0].content) + strlen(m[1].content);
    pk_chat_messages_free(m, n);
    pk_summarizer_free(all);
    int saw_cut = 0, saw_drop[4] = {0};
    for (size_t budget = full + 10; budget > 200; budget -= 97) {
        char opt[96];
        snprintf(opt, sizeof opt, "{\"budget_tokens\": 0, \"budget_chars\": %zu}", budget);
        pk_summarizer *s = make(opt);
        assert_int_equal(pk_summarizer_messages(s, TASK, t.v, 3, &m, &n, &err), PK_OK);
        assert_true(n >= 2 && n % 2 == 0);
        int kept = (n - 2) / 2, dropped = 3 - kept;
        saw_drop[dropped] = 1;
        if (budget >= floor + 64)
            assert_true(total_chars(m, n) <= budget);
        char note[64];
        snprintf(note, sizeof note, "(%d earlier attempts omitted", dropped);
        if (dropped > 0 && kept > 0)
            assert_non_null(strstr(m[1].content, note));
        else if (dropped == 0)
            assert_null(strstr(m[1].content, "omitted"));
        /* The kept turns are the latest ones, in order. */
        for (int k = 0; k < kept; k++) {
            char marker[32];
            snprintf(marker, sizeof marker, "CODE-%d", dropped + k + 1);
            assert_non_null(strstr(m[2 + 2 * k].content, marker));
        }
        if (kept == 1 && strstr(m[2].content, "characters omitted to fit the context")) {
            saw_cut = 1;
            assert_non_null(strstr(m[2].content, "CODE-3"));
            assert_non_null(strstr(m[2].content, "END-3"));
            assert_non_null(strstr(m[3].content, "FEEDBACK-3"));
        }
        pk_chat_messages_free(m, n);
        pk_summarizer_free(s);
    }
    assert_true(saw_drop[0] && saw_drop[1] && saw_drop[2] && saw_drop[3]);
    assert_true(saw_cut);
}

static void test_token_budget(void **state) {
    (void)state;
    turns3 t;
    make_turns(&t);
    pk_summarizer *s = make("{\"budget_tokens\": 900}");
    pk_chat_message *m = NULL;
    int n = 0;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_messages(s, TASK, t.v, 3, &m, &n, &err), PK_OK);
    size_t tokens = 0;
    for (int i = 0; i < n; i++)
        tokens += pk_approx_tokens(m[i].content);
    assert_true(tokens <= 900);
    assert_true(n < 8);
    pk_chat_messages_free(m, n);
    pk_summarizer_free(s);
}

static void test_bad_arguments(void **state) {
    (void)state;
    pk_summarizer *s = make(NULL);
    pk_chat_message *m = NULL;
    int n = 0;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_messages(s, NULL, NULL, 0, &m, &n, &err), PK_ERR_INVALID);
    assert_int_equal(pk_summarizer_messages(s, TASK, NULL, 2, &m, &n, &err), PK_ERR_INVALID);
    assert_int_equal(pk_summarizer_messages(s, TASK, NULL, -1, &m, &n, &err), PK_ERR_INVALID);
    assert_null(m);
    pk_chat_messages_free(NULL, 0);
    pk_summarizer_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles_and_contents),
        cmocka_unit_test(test_budget_sweep),
        cmocka_unit_test(test_token_budget),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
