#include "sample_results.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sample_names[SAMPLE_COUNT] = {
    "format_error", "rejected",  "compile_error", "runtime_error",
    "timeout",      "incorrect", "correct",       "correct_roofline",
};

/* Written as nvcc 13 prints it for a job directory of the sandbox, with a repeated error, a
 * second error on an already reported line, and a warning. */
static const char sample_compile_log[] =
    "/tmp/pkgym-jobs/3f9a1c/src/candidate.cu(14): error: identifier \"tile\" is undefined\n"
    "      tile[threadIdx.x] = in[i];\n"
    "      ^\n"
    "\n"
    "/tmp/pkgym-jobs/3f9a1c/src/candidate.cu(14): error: expression must be a modifiable lvalue\n"
    "      tile[threadIdx.x] = in[i];\n"
    "      ^\n"
    "\n"
    "/tmp/pkgym-jobs/3f9a1c/src/candidate.cu(19): error: identifier \"tile\" is undefined\n"
    "      out[i] = tile[threadIdx.x] * 2.0f;\n"
    "               ^\n"
    "\n"
    "/tmp/pkgym-jobs/3f9a1c/src/candidate.cu(22): warning #177-D: variable \"unused\" was "
    "declared but never referenced\n"
    "      int unused;\n"
    "          ^\n"
    "\n"
    "Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n"
    "\n"
    "/tmp/pkgym-jobs/3f9a1c/src/candidate.cu(31): error: argument of type \"float *\" is "
    "incompatible with parameter of type \"const int *\"\n"
    "      ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, ctx->comm, ctx->stream);\n"
    "                    ^\n"
    "\n"
    "4 errors detected in the compilation of \"/tmp/pkgym-jobs/3f9a1c/src/candidate.cu\".\n";

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* As the harness reports it: 5 trials configured, the first passed, the second failed, and
 * the run stopped there (the rest were not run). */
static void fill_incorrect(pk_eval_result *r) {
    r->world_size = 4;
    r->trials_planned = 5;
    r->n_trials = 2;
    r->trials[0].passed = 1;
    pk_trial_verdict *t = &r->trials[1];
    t->passed = 0;
    t->max_abs_err = 0.75;
    t->max_rel_err = 0.5;
    t->n_mismatch = 2;
    t->mismatch[0] = (pk_rank_mismatch){2, "out", 4097, 1.5, 0.75};
    t->mismatch[1] = (pk_rank_mismatch){3, "out", 12, -2.0, 0.0};
    snprintf(r->reason, sizeof r->reason,
             "trial 1: 2 rank(s) wrong; rank 2 out[4097]: expected 1.5, got 0.75 (max abs err "
             "0.75)");
}

static void fill_correct(pk_eval_result *r, double no_overlap_us, double floor_us) {
    r->world_size = 4;
    r->has_timing = 1;
    r->candidate.median_us = 812.4;
    r->candidate.cv = 0.021;
    r->reference.median_us = 1000.2;
    r->reference.cv = 0.013;
    r->baseline = (pk_baseline_used){.us = 1000.2, .cv = 0.013, .iters = 100};
    r->speedup = 1000.2 / 812.4;
    r->roofline_no_overlap_us = no_overlap_us;
    r->roofline_floor_us = floor_us;
    r->n_trials = 5;
    r->trials_planned = 5;
    for (int i = 0; i < 5; i++) {
        r->trials[i].passed = 1;
        r->trials[i].max_abs_err = 0.001 * (i + 1);
    }
    r->n_checks = 1;
    snprintf(r->checks[0].name, sizeof r->checks[0].name, "inputs_unchanged");
    r->checks[0].passed = 1;
}

void sample_fill(pk_eval_result *r, sample_kind kind) {
    memset(r, 0, sizeof *r);
    r->status = (pk_status)kind;
    switch (kind) {
    case SAMPLE_FORMAT_ERROR:
        snprintf(r->reason, sizeof r->reason,
                 "no code block: expected the complete code in ```cuda ... ```");
        break;
    case SAMPLE_REJECTED:
        snprintf(r->rule, sizeof r->rule, "symbols.forbidden_call");
        snprintf(r->reason, sizeof r->reason,
                 "the compiled kernel calls ncclAllReduce, which this problem forbids.");
        break;
    case SAMPLE_COMPILE_ERROR:
        r->compile_log = dup(sample_compile_log);
        snprintf(r->reason, sizeof r->reason, "nvcc exited with status 2");
        break;
    case SAMPLE_RUNTIME_ERROR:
        r->world_size = 4;
        r->exit_code = 1;
        snprintf(r->reason, sizeof r->reason,
                 "rank 2: CUDA error: an illegal memory access was encountered");
        r->stderr_tail = dup("rank 2: launching allreduce_kernel<<<132, 256>>>\n"
                             "/tmp/pkgym-jobs/3f9a1c/run/runner.cu:88: CUDA error 700: an "
                             "illegal memory access was encountered\n");
        break;
    case SAMPLE_TIMEOUT:
        r->world_size = 4;
        r->n_hung = 2;
        r->hung_ranks[0] = 1;
        r->hung_ranks[1] = 3;
        r->signal = 9;
        /* The reason as problems/src/run_classify.c writes it. */
        snprintf(r->reason, sizeof r->reason,
                 "ranks 1, 3 of 4 did not finish within the 60000 ms run limit (stopped after "
                 "60012 ms; rank 0: done; rank 1: candidate, trial 1; rank 2: done; rank 3: "
                 "candidate, trial 1)");
        break;
    case SAMPLE_INCORRECT:
        fill_incorrect(r);
        break;
    case SAMPLE_CORRECT:
        fill_correct(r, 0.0, 0.0);
        break;
    case SAMPLE_CORRECT_ROOFLINE:
        r->status = PK_STATUS_CORRECT;
        fill_correct(r, 406.2, 300.0); /* two phases that can overlap */
        break;
    default:
        break;
    }
}

void sample_free(pk_eval_result *r) {
    free(r->compile_log);
    free(r->stdout_tail);
    free(r->stderr_tail);
    r->compile_log = r->stdout_tail = r->stderr_tail = NULL;
}
