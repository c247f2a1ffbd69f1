/* The next-turn prompt: order, budgets (chars and tokens), earliest turns dropped first, and a
 * 4-turn episode that stays within its budget. */
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
#include "sample_results.h"

static pk_summarizer *make(const char *options) {
    return sample_summarizer(options);
}

/* Four turns of about 1 KB each, told apart by their markers. */
typedef sample_turns turns4;

static void make_turns(turns4 *t) {
    sample_turns_fill(t, 4, 900, 0);
}

/* Which turns appear (bit i for turn i+1), checking each is whole and in order. */
static int shown_turns(const char *prompt) {
    int mask = 0;
    const char *last = prompt;
    for (int i = 0; i < 4; i++) {
        char m[3][32];
        snprintf(m[0], sizeof m[0], "CODE-%d", i + 1);
        snprintf(m[1], sizeof m[1], "SUMMARY-%d", i + 1);
        snprintf(m[2], sizeof m[2], "FEEDBACK-%d", i + 1);
        const char *c = strstr(prompt, m[0]);
        if (!c) {
            assert_null(strstr(prompt, m[1]));
            continue;
        }
        const char *su = strstr(prompt, m[1]);
        const char *fb = strstr(prompt, m[2]);
        assert_non_null(su);
        assert_non_null(fb);
        assert_true(last <= c && c < su && su < fb); /* code, summary, feedback, in turn order */
        last = fb;
        mask |= 1 << i;
    }
    return mask;
}

static void test_order_and_no_format_example(void **state) {
    (void)state;
    pk_summarizer *s = make("{\"budget_tokens\": 0}");
    turns4 t;
    make_turns(&t);
    char *first = pk_summarizer_first_prompt(s, TASK);
    assert_non_null(strstr(first, "Answer format"));
    assert_int_equal(strncmp(first, TASK, strlen(TASK)), 0);
    char *next = pk_summarizer_next_prompt(s, TASK, t.v, 4);
    assert_int_equal(shown_turns(next), 0xF);
    assert_int_equal(strncmp(next, TASK, strlen(TASK)), 0);
    assert_string_equal(next + strlen(next) - strlen(CONTINUE), CONTINUE);
    assert_null(strstr(next, "Answer format")); /* the format example is for turn 1 only */
    assert_null(strstr(next, "omitted"));
    free(first);
    free(next);
    pk_summarizer_free(s);
}

/* Shrinking the budget only ever removes turns from the front. */
static void test_earliest_dropped_first(void **state) {
    (void)state;
    turns4 t;
    make_turns(&t);
    int prev_first_shown = 0;
    int seen_two_last = 0;
    for (int budget = 5200; budget >= 1400; budget -= 100) {
        char opts[96];
        snprintf(opts, sizeof(opts), "{\"budget_chars\": %d, \"budget_tokens\": 0}", budget);
        pk_summarizer *s = make(opts);
        char *p = pk_summarizer_next_prompt(s, TASK, t.v, 4);
        assert_true(strlen(p) <= (size_t)budget);
        int mask = shown_turns(p);
        assert_true(mask & 0x8); /* the latest turn is always there */
        int first_shown = __builtin_ctz(mask);
        assert_int_equal(mask, 0xF & ~((1 << first_shown) - 1)); /* a suffix */
        assert_true(first_shown >= prev_first_shown);
        if (first_shown > 0) {
            char note[64];
            snprintf(note, sizeof note, "(%d earlier attempts omitted", first_shown);
            assert_non_null(strstr(p, note));
        }
        seen_two_last |= mask == 0xC;
        prev_first_shown = first_shown;
        free(p);
        pk_summarizer_free(s);
    }
    assert_true(seen_two_last);
    assert_int_equal(prev_first_shown, 3);
}

static void test_token_budget(void **state) {
    (void)state;
    turns4 t;
    make_turns(&t);
    pk_summarizer *s = make("{\"budget_tokens\": 700}");
    char *p = pk_summarizer_next_prompt(s, TASK, t.v, 4);
    assert_true(pk_approx_tokens(p) <= 700);
    int mask = shown_turns(p);
    assert_true(mask != 0xF && (mask & 0x8));
    free(p);
    pk_summarizer_free(s);
}

static void test_long_last_turn_is_cut_not_dropped(void **state) {
    (void)state;
    turns4 t;
    make_turns(&t);
    pk_summarizer *s = make("{\"budget_chars\": 800, \"budget_tokens\": 0}");
    char *p = pk_summarizer_next_prompt(s, TASK, t.v, 4);
    assert_true(strlen(p) <= 800);
    assert_non_null(strstr(p, "characters omitted to fit the context"));
    assert_non_null(strstr(p, "FEEDBACK-4"));
    assert_null(strstr(p, "FEEDBACK-3"));
    free(p);
    pk_summarizer_free(s);
}

static void test_task_longer_than_budget(void **state) {
    (void)state;
    turns4 t;
    make_turns(&t);
    pk_summarizer *s = make("{\"budget_chars\": 20, \"budget_tokens\": 0}");
    char *p = pk_summarizer_next_prompt(s, TASK, t.v, 4);
    /* The task is never cut: the prompt is the task and the instruction, without turns. */
    assert_int_equal(shown_turns(p), 0);
    assert_non_null(strstr(p, TASK));
    assert_non_null(strstr(p, CONTINUE));
    free(p);
    pk_summarizer_free(s);
}

static void test_approx_tokens(void **state) {
    (void)state;
    assert_int_equal(pk_approx_tokens(""), 0);
    assert_int_equal(pk_approx_tokens("abcd"), 1);
    assert_int_equal(pk_approx_tokens("abcde"), 2);
    assert_int_equal(pk_approx_tokens("a(b);"), 5);
    assert_int_equal(pk_approx_tokens("x y\n"), 3);
}

/* Acceptance: a 4-turn episode, parse -> feedback -> next prompt, within the configured budget. */
static void test_four_turn_episode_within_budget(void **state) {
    (void)state;
    const long budget = 3000;
    pk_summarizer *s = make("{\"budget_chars\": 3000, \"budget_tokens\": 900}");
    static const sample_kind outcomes[4] = {SAMPLE_COMPILE_ERROR, SAMPLE_INCORRECT, SAMPLE_CORRECT,
                                            SAMPLE_CORRECT_ROOFLINE};
    char *codes[4], *summaries[4], *feedbacks[4];
    pk_turn v[4];
    char *prompt = pk_summarizer_first_prompt(s, TASK);
    for (int turn = 0; turn < 4; turn++) {
        assert_true(strlen(prompt) <= (size_t)budget);
        char action[1400];
        int n = snprintf(action, sizeof action,
                         "<think>long reasoning %d</think>```cuda\n__global__ void k%d() {}\n",
                         turn, turn);
        memset(action + n, 'x', 700);
        snprintf(action + n + 700, sizeof action - (size_t)n - 700, "\n```\nTurn %d done.",
                 turn + 1);
        pk_parsed_action a;
        assert_int_equal(pk_summarizer_parse_action(s, action, NULL, &a, NULL), PK_OK);
        assert_true(a.format_ok);
        pk_eval_result r;
        sample_fill(&r, outcomes[turn]);
        codes[turn] = a.code;
        summaries[turn] = a.summary;
        feedbacks[turn] = pk_summarizer_feedback(s, &r, NULL);
        sample_free(&r);
        v[turn] = (pk_turn){.turn = turn + 1,
                            .code = codes[turn],
                            .summary = summaries[turn],
                            .feedback = feedbacks[turn]};
        free(prompt);
        prompt = pk_summarizer_next_prompt(s, TASK, v, turn + 1);
        assert_true(strlen(prompt) <= (size_t)budget);
        assert_true(pk_approx_tokens(prompt) <= 900);
        assert_null(strstr(prompt, "long reasoning"));
        assert_non_null(strstr(prompt, feedbacks[turn])); /* the latest feedback is kept */
    }
    assert_null(strstr(prompt, "Turn 1 done.")); /* the earliest turns went first */
    free(prompt);
    for (int i = 0; i < 4; i++) {
        free(codes[i]);
        free(summaries[i]);
        free(feedbacks[i]);
    }
    pk_summarizer_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_no_format_example),
        cmocka_unit_test(test_earliest_dropped_first),
        cmocka_unit_test(test_token_budget),
        cmocka_unit_test(test_long_last_turn_is_cut_not_dropped),
        cmocka_unit_test(test_task_longer_than_budget),
        cmocka_unit_test(test_approx_tokens),
        cmocka_unit_test(test_four_turn_episode_within_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
