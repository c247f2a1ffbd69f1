/* Hand-filled evaluation results, one per outcome, shared by the summarizer tests. */
#ifndef PK_TEST_SAMPLE_RESULTS_H
#define PK_TEST_SAMPLE_RESULTS_H

#include "pk_harness.h"

typedef enum sample_kind {
    SAMPLE_FORMAT_ERROR,
    SAMPLE_REJECTED,
    SAMPLE_COMPILE_ERROR,
    SAMPLE_RUNTIME_ERROR,
    SAMPLE_TIMEOUT,
    SAMPLE_INCORRECT,
    SAMPLE_CORRECT,
    SAMPLE_CORRECT_ROOFLINE,
    SAMPLE_COUNT
} sample_kind;

extern const char *const sample_names[SAMPLE_COUNT];

/* Fills r (zeroed first); owned strings are malloc'd: free with sample_free. */
void sample_fill(pk_eval_result *r, sample_kind kind);
void sample_free(pk_eval_result *r);

#endif
