/* Reasoning removal, code extraction and summary choice (pk_summarizer_parse_action). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_summarizer.h"

static int setup(void **state) {
    pk_summarizer *s = NULL;
    if (pk_summarizer_create("{\"summary_chars\": 200}", NULL, &s, NULL) != PK_OK)
        return -1;
    *state = s;
    return 0;
}

static int teardown(void **state) {
    pk_summarizer_free(*state);
    return 0;
}

static void parse(void **state, const char *action, const char *field, pk_parsed_action *a) {
    pk_error err = {0};
    assert_int_equal(pk_summarizer_parse_action(*state, action, field, a, &err), PK_OK);
}

static void test_think_block_removed(void **state) {
    pk_parsed_action a;
    parse(state,
          "<think>try ```cuda\nint draft;\n```</think>\nFinal:\n```cuda\nint solution;\n```\n"
          "Used one kernel.",
          NULL, &a);
    assert_true(a.format_ok);
    assert_string_equal(a.code, "int solution;");
    assert_string_equal(a.summary, "Used one kernel.");
    pk_parsed_action_free(&a);
}

static void test_unterminated_think(void **state) {
    pk_parsed_action a;
    parse(state, "<think>I will write ```cuda\nint solution;\n``` and then", NULL, &a);
    assert_false(a.format_ok);
    assert_null(a.code);
    assert_non_null(strstr(a.format_error, "<think>"));
    assert_non_null(a.summary); /* the history shows format errors too, without the reasoning */
    assert_null(strstr(a.summary, "I will write"));
    pk_parsed_action_free(&a);
    parse(state, "<think>still thinking", "Ran out of tokens.", &a);
    assert_false(a.format_ok);
    assert_string_equal(a.summary, "Ran out of tokens.");
    pk_parsed_action_free(&a);
}

static void test_close_without_open(void **state) {
    /* The chat template opened <think> in the prompt: all before </think> is reasoning. */
    pk_parsed_action a;
    parse(state, "plan ```cuda\nint old;\n```</think>```cuda\nint solution;\n```", NULL, &a);
    assert_true(a.format_ok);
    assert_string_equal(a.code, "int solution;");
    pk_parsed_action_free(&a);
}

static void test_several_blocks_last_code_block_wins(void **state) {
    pk_parsed_action a;
    parse(state,
          "First:\n```cuda\nint v1;\n```\nBetter:\n```cpp\nint v2;\n```\nA test:\n```python\n"
          "print(1)\n```\n",
          NULL, &a);
    assert_true(a.format_ok);
    assert_string_equal(a.code, "int v2;");
    pk_parsed_action_free(&a);
}

static void test_every_accepted_fence(void **state) {
    static const char *const fences[] = {"cuda", "cpp", "c++", "cu", "c", "", "CUDA"};
    for (size_t i = 0; i < sizeof fences / sizeof fences[0]; i++) {
        char action[128];
        snprintf(action, sizeof action, "```%s\nint solution;\n```", fences[i]);
        pk_parsed_action a;
        parse(state, action, NULL, &a);
        assert_true(a.format_ok);
        assert_string_equal(a.code, "int solution;");
        pk_parsed_action_free(&a);
    }
}

static void test_no_code_block(void **state) {
    pk_parsed_action a;
    parse(state, "I think the answer is to use NCCL.", NULL, &a);
    assert_false(a.format_ok);
    assert_non_null(strstr(a.format_error, "no code block"));
    pk_parsed_action_free(&a);
    parse(state, "```python\nimport torch\n```", NULL, &a);
    assert_false(a.format_ok);
    assert_non_null(strstr(a.format_error, "```python"));
    pk_parsed_action_free(&a);
}

static void test_empty_and_unclosed_blocks(void **state) {
    pk_parsed_action a;
    parse(state, "```cuda\n  \n```\n", NULL, &a);
    assert_false(a.format_ok);
    assert_non_null(strstr(a.format_error, "empty"));
    pk_parsed_action_free(&a);
    parse(state, "```cuda\nint solution() {\n  return", NULL, &a);
    assert_false(a.format_ok);
    assert_non_null(strstr(a.format_error, "not closed"));
    pk_parsed_action_free(&a);
}

static void test_entry_point_required(void **state) {
    pk_parsed_action a;
    assert_int_equal(pk_summarizer_set_problem(*state, "collectives/allreduce", "solution", NULL),
                     PK_OK);
    parse(state, "```cuda\nint solution_v2(void);\n```", NULL, &a);
    assert_false(a.format_ok);
    assert_non_null(strstr(a.format_error, "`solution`"));
    pk_parsed_action_free(&a);
    parse(state, "```cuda\nextern \"C\" int solution(void);\n```", NULL, &a);
    assert_true(a.format_ok);
    pk_parsed_action_free(&a);
}

static void test_summary_preference(void **state) {
    const char *action = "Reasoning: the tile trick.\n```cuda\n// ring allreduce in one kernel\n"
                         "__global__ void ring_kernel(float *x) {}\nvoid solution() { "
                         "ncclAllReduce(0, 0, 0, 0, 0, 0, 0); }\n```\n  After text.  \n";
    pk_parsed_action a;
    parse(state, action, "  The field summary. ", &a);
    assert_string_equal(a.summary, "The field summary.");
    pk_parsed_action_free(&a);
    parse(state, action, "   ", &a);
    assert_string_equal(a.summary, "After text.");
    pk_parsed_action_free(&a);

    const char *bare = "Reasoning: the tile trick.\n```cuda\n// ring allreduce in one kernel\n"
                       "__global__ void ring_kernel(float *x) {}\nvoid solution() { "
                       "ncclAllReduce(0, 0, 0, 0, 0, 0, 0); }\n```\n";
    parse(state, bare, NULL, &a);
    assert_non_null(strstr(a.summary, "ring_kernel"));
    assert_non_null(strstr(a.summary, "ncclAllReduce"));
    assert_non_null(strstr(a.summary, "ring allreduce in one kernel"));
    assert_null(strstr(a.summary, "tile trick")); /* never the reasoning */
    pk_parsed_action_free(&a);
}

static void test_summary_capped(void **state) {
    char field[1000];
    memset(field, 'x', sizeof field - 1);
    field[sizeof field - 1] = '\0';
    pk_parsed_action a;
    parse(state, "```cuda\nint solution;\n```", field, &a);
    assert_int_equal(strlen(a.summary), 200);
    assert_string_equal(a.summary + 197, "...");
    pk_parsed_action_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_think_block_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unterminated_think, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_without_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_several_blocks_last_code_block_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_accepted_fence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_code_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_and_unclosed_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_entry_point_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary_preference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary_capped, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
