/* Turns and summarizers for the summarizer's tests (include after cmocka.h): n turns of
 * code_chars of code each, told apart by their markers (CODE-i, and END-i after the code when
 * asked; SUMMARY-i; FEEDBACK-i), as the summarizer sees them. */
#ifndef PK_TEST_SAMPLE_TURNS_H
#define PK_TEST_SAMPLE_TURNS_H

#include <stdio.h>
#include <string.h>

#include "pk_summarizer.h"

/* The task, and the built-in instruction to continue that ends every next-turn prompt. */
#define TASK "Write an all-reduce over 4 GPUs."
#define CONTINUE "Restart your reasoning process and generate new, complete code."

#define SAMPLE_TURNS_MAX 4

typedef struct sample_turns {
    char code[SAMPLE_TURNS_MAX][2048];
    char summary[SAMPLE_TURNS_MAX][64];
    char feedback[SAMPLE_TURNS_MAX][64];
    pk_turn v[SAMPLE_TURNS_MAX];
} sample_turns;

static inline void sample_turns_fill(sample_turns *t, int n, int code_chars, int end_marker) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n && i < SAMPLE_TURNS_MAX; i++) {
        int at = snprintf(t->code[i], sizeof t->code[i], "// CODE-%d\n", i + 1);
        memset(t->code[i] + at, 'a' + i, (size_t)code_chars);
        if (end_marker)
            snprintf(t->code[i] + at + code_chars, 32, "\n// END-%d", i + 1);
        snprintf(t->summary[i], sizeof t->summary[i], "SUMMARY-%d", i + 1);
        snprintf(t->feedback[i], sizeof t->feedback[i], "FEEDBACK-%d", i + 1);
        t->v[i] = (pk_turn){.turn = i + 1,
                            .code = t->code[i],
                            .summary = t->summary[i],
                            .feedback = t->feedback[i]};
    }
}

/* A summarizer with these options; fails the test when they are refused. */
static inline pk_summarizer *sample_summarizer(const char *options) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    if (pk_summarizer_create(options, NULL, &s, &err) != PK_OK)
        fail_msg("%s", err.message);
    return s;
}

#endif
