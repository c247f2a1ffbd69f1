/* Turns the run stage's outcome into the verdict. The candidate's output is only copied as
 * feedback; the verdict comes from the runner's result file and the harness's own markers. */
#define _GNU_SOURCE
#include "pk_job.h"
#include "pk_runner_exit.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Markers live in the job's work dir, which the candidate can write: never follow a link it
 * left there (it would show a host file's contents in the feedback), never block on a FIFO. */
static int read_marker(const pk_job *job, int rank, const char *ext, char *buf, size_t cap) {
    char path[700];
    snprintf(path, sizeof path, "%s/rank%d.%s", job->dir, rank, ext);
    char *data = NULL;
    size_t n = 0;
    if (pk_read_file_untrusted(path, 4096, &data, &n, NULL) != PK_OK)
        return -1;
    snprintf(buf, cap, "%.*s", (int)n, data);
    free(data);
    return 0;
}

/* Ranks still inside the candidate; if none is, every rank that had not finished. `where`
 * gets each rank's last state ("rank 1: candidate trial 0"), to tell a hung candidate from a
 * hung reference or harness. */
static void find_hung(const pk_job *job, pk_eval_result *res, pk_strbuf *where) {
    int in_candidate[PK_MAX_RANKS] = {0}, unfinished[PK_MAX_RANKS] = {0}, n_cand = 0;
    for (int r = 0; r < job->world; r++) {
        char buf[64] = "";
        int have = read_marker(job, r, "progress", buf, sizeof buf) == 0;
        in_candidate[r] = have && strncmp(buf, "candidate", 9) == 0;
        unfinished[r] = !have || strncmp(buf, "done", 4) != 0;
        n_cand += in_candidate[r];
        char state[32] = "not started";
        int trial = -1;
        if (have && sscanf(buf, "%31s %d", state, &trial) < 1)
            snprintf(state, sizeof state, "unknown");
        pk_strbuf_printf(where, "; rank %d: %s", r, state);
        if (trial >= 0) /* 1-based, as the feedback counts trials */
            pk_strbuf_printf(where, ", trial %d", trial + 1);
    }
    res->n_hung = 0;
    for (int r = 0; r < job->world; r++)
        if (n_cand ? in_candidate[r] : unfinished[r])
            res->hung_ranks[res->n_hung++] = r;
}

static char *tail(const char *s, size_t len, size_t keep) {
    if (!s)
        return NULL;
    return strndup(len > keep ? s + len - keep : s, keep);
}

static void classify_trials(pk_eval_result *res) {
    for (int i = 0; i < res->n_trials; i++) {
        const pk_trial_verdict *v = &res->trials[i];
        if (v->passed)
            continue;
        res->status = PK_STATUS_INCORRECT;
        if (v->inputs_modified) {
            snprintf(res->reason, sizeof res->reason, "trial %d: the solution modified its inputs",
                     i);
        } else if (v->n_mismatch && v->mismatch[0].index < 0) { /* only the norm-wise check */
            const pk_rank_mismatch *m = &v->mismatch[0];
            snprintf(res->reason, sizeof res->reason,
                     "trial %d: %d rank(s) wrong; rank %d %s[norm]: the whole output is off by %g "
                     "of its norm (tolerance %g), though each element is within its tolerance",
                     i, v->n_mismatch, m->rank, m->arg, m->got, m->expected);
        } else if (v->n_mismatch) {
            const pk_rank_mismatch *m = &v->mismatch[0];
            snprintf(res->reason, sizeof res->reason,
                     "trial %d: %d rank(s) wrong; rank %d %s[%lld]: expected %g, got %g "
                     "(max abs err %g)",
                     i, v->n_mismatch, m->rank, m->arg, m->index, m->expected, m->got,
                     v->max_abs_err);
        }
        return;
    }
    res->status = PK_STATUS_CORRECT;
}

/* A write outside an argument (a guard zone changed) makes the step incorrect; returns 1 then. */
static int classify_guards(const pk_run_report *rep, pk_eval_result *res) {
    pk_eval_result_add_check(res, "memory.guard_zones", !rep->guard_violation, "%s",
                             rep->guard_violation ? rep->guard_detail : "untouched");
    if (!rep->guard_violation)
        return 0;
    if (res->status == PK_STATUS_CORRECT) {
        res->status = PK_STATUS_INCORRECT;
        snprintf(res->reason, sizeof res->reason, "wrote outside its arguments: %s",
                 rep->guard_detail);
    }
    return 1;
}

/* Outputs of timed calls are verified too (problems/runner/timing.c). The feedback says only
 * that a timed call was wrong: which calls are verified stays secret. Returns 1 when wrong. */
static int classify_timed_calls(const pk_run_report *rep, pk_eval_result *res) {
    const char *what = rep->timed_wrong             ? "a timed call's output was wrong"
                       : rep->timed_inputs_modified ? "a timed call modified its inputs"
                                                    : NULL;
    pk_eval_result_add_check(res, "timing.outputs_verified", what == NULL, "%s",
                             what ? what : "ok");
    if (!what)
        return 0;
    res->status = PK_STATUS_INCORRECT;
    snprintf(res->reason, sizeof res->reason, "%s", what);
    return 1;
}

/* The baseline the speedup divides: the cached one given in the options (the runner did not
 * time the reference), else the reference timed in this run. */
static void set_baseline(const pk_job *job, pk_eval_result *res) {
    pk_baseline_used *b = &res->baseline;
    if (job->opts.baseline_us > 0) {
        *b = (pk_baseline_used){.us = job->opts.baseline_us,
                                .cv = job->opts.baseline_cv,
                                .iters = job->opts.baseline_iters,
                                .measured_at = job->opts.baseline_measured_at,
                                .cached = 1};
    } else {
        *b = (pk_baseline_used){.us = res->reference.median_us,
                                .cv = res->reference.cv,
                                .iters = res->reference.iters,
                                .measured_at = pk_wall_time_s()};
    }
}

static void check_timing(const pk_job *job, const pk_run_report *rep, pk_eval_result *res) {
    res->has_timing = 1;
    set_baseline(job, res);
    double base = res->baseline.us;
    res->speedup = res->candidate.median_us > 0 ? base / res->candidate.median_us : 0;
    pk_eval_result_add_check(res, "timing.stream_synchronized", !rep->unsynchronized, "%s",
                             rep->unsynchronized ? rep->unsync_detail : "ok");
    if (rep->unsynchronized) {
        res->status = PK_STATUS_REJECTED;
        snprintf(res->rule, sizeof res->rule, "unsynchronized_stream");
        snprintf(res->reason, sizeof res->reason, "work ran outside ctx->stream during timing (%s)",
                 rep->unsync_detail);
        return;
    }
    if (!job->p->device_gpu || !job->p->n_phases)
        return;
    pk_hw_peaks hw;
    pk_problem_sizes sz;
    pk_error e;
    if (pk_hw_peaks_find(job->paths.hardware_json, res->gpu_name, &hw, &e) ||
        pk_problem_sizes_at(job->p, job->world, &sz, &e)) {
        pk_eval_result_add_check(res, "roofline_floor", 1, "not checked: %s", e.message);
        return;
    }
    pk_roofline rl;
    pk_roofline_compute(job->p, &sz, &hw, &rl);
    pk_roofline_judge(&rl, hw.name, res);
}

/* Did this run fail before any candidate code was loaded? Only channels the candidate cannot
 * take back decide (pk_runner_exit.h): the set-up marker in the captured stderr (any rank
 * writes it before its own dlopen, so a run that loaded candidate code has it) and, under
 * mpirun, whose forwarding of that stderr a candidate could cut by killing mpirun, also the
 * runner's own exit status (mpirun exits with it only when it ran to its end). The result
 * file and the progress markers are never read for this: the candidate can write them. */
static int failed_before_candidate(const pk_job *job, const pk_sandbox_result *sr,
                                   const pk_eval_result *res) {
    int marker = sr->err && memmem(sr->err, sr->err_len, PK_RUNNER_SETUP_DONE,
                                   sizeof PK_RUNNER_SETUP_DONE - 1) != NULL;
    if (marker && !job->opts.reference_as_candidate)
        return 0;
    if (job->opts.reference_as_candidate) /* no candidate at all: every failure is ours */
        return 1;
    if (strcmp(res->launcher, "mpi") == 0)
        return sr->status == PK_SB_EXIT && sr->exit_code == PK_RUNNER_EXIT_INFRA;
    return 1;
}

static void set_infra(const pk_job *job, const pk_sandbox_result *sr, pk_eval_result *res,
                      const char *what) {
    res->status = PK_STATUS_INFRA_ERROR;
    res->n_hung = 0;
    snprintf(res->reason, sizeof res->reason, "%s before the candidate was loaded%s: %.400s",
             job->opts.reference_as_candidate ? "the reference's own run failed" : "the run failed",
             sr->status == PK_SB_TIMEOUT ? " (it hung)" : "", what);
}

int pk_job_classify_run(pk_job *job, const pk_sandbox_result *sr, pk_eval_result *res,
                        pk_error *err) {
    free(res->stdout_tail);
    free(res->stderr_tail);
    res->stdout_tail = tail(sr->out, sr->out_len, 4096);
    res->stderr_tail = tail(sr->err, sr->err_len, 4096);
    res->exit_code = sr->exit_code;
    res->signal = sr->signal;
    (void)err;
    if (sr->status == PK_SB_SETUP_ERROR) { /* the command never ran */
        char what[300];
        snprintf(what, sizeof what, "sandbox set-up: %s", sr->detail);
        set_infra(job, sr, res, what);
        return PK_OK;
    }
    if (sr->status == PK_SB_TIMEOUT && failed_before_candidate(job, sr, res)) {
        set_infra(job, sr, res, "the set-up did not finish within the run limit");
        return PK_OK;
    }
    if (sr->status == PK_SB_TIMEOUT) {
        pk_strbuf where = {0}, hung = {0};
        find_hung(job, res, &where);
        res->status = PK_STATUS_TIMEOUT;
        for (int i = 0; i < res->n_hung; i++)
            pk_strbuf_printf(&hung, "%s%d", i ? ", " : "", res->hung_ranks[i]);
        /* One clause the feedback can quote as it is: who hung, the limit, each rank's state. */
        int limit_ms = pk_run_timeout_ms(&job->opts);
        char bound[240];
        if (job->timeout_bound == PK_BOUND_EXCLUSIVE && job->timeout_expect_ms > 0) {
            /* The budget came from the runner's own estimate (its trials' pace): say so, and
             * keep the estimate in the result, where a stopped runner's report cannot. */
            res->stages.run_timing_expect_ms = job->timeout_expect_ms;
            snprintf(bound, sizeof bound,
                     "the %d ms budget of timing (%d x the %.0f ms its trials' pace predicts "
                     "+ %d ms, at least %d ms), which holds the GPUs exclusively",
                     job->timeout_budget_ms, PK_EXPECT_FACTOR, job->timeout_expect_ms,
                     PK_EXPECT_SLACK_MS, PK_EXPECT_FLOOR_MS);
        } else if (job->timeout_bound == PK_BOUND_SHARED ||
                   job->timeout_bound == PK_BOUND_EXCLUSIVE)
            snprintf(bound, sizeof bound, "the %d ms budget of %s, which holds the GPUs %s",
                     job->timeout_budget_ms,
                     job->timeout_bound == PK_BOUND_SHARED ? "a correctness check" : "timing",
                     job->timeout_bound == PK_BOUND_SHARED ? "shared with other jobs"
                                                           : "exclusively");
        else if (job->lock_credit_ms >= 1)
            snprintf(bound, sizeof bound,
                     "the %d ms run limit (plus %.0f ms spent waiting for other jobs' GPU locks)",
                     limit_ms, job->lock_credit_ms);
        else
            snprintf(bound, sizeof bound, "the %d ms run limit", limit_ms);
        snprintf(res->reason, sizeof res->reason,
                 "rank%s %s of %d did not finish within %s (stopped after %.0f ms%s)",
                 res->n_hung == 1 ? "" : "s", hung.data ? hung.data : "?", job->world, bound,
                 sr->wall_ms, where.data ? where.data : "");
        pk_strbuf_free(&where);
        pk_strbuf_free(&hung);
        return PK_OK;
    }
    pk_run_report rep;
    pk_error rerr;
    int have = pk_run_result_read(job->result_path, res, &rep, &rerr) == PK_OK;
    if (have) {
        snprintf(res->gpu_name, sizeof res->gpu_name, "%s", rep.gpu_name);
        res->stages.run_check_ms = rep.check_ms;
        res->stages.run_timing_ms = rep.timing_ms;
        res->stages.run_setup_ms = res->stages.run_ms - rep.check_ms - rep.timing_ms;
        res->stages.run_init_ms = rep.init_ms;
        res->stages.run_arena_ms = rep.arena_ms;
        res->stages.run_verify_ms = rep.verify_ms;
        if (rep.trials_planned > 0) /* the secret plan's count, jittered above the base */
            res->trials_planned = rep.trials_planned;
        res->stages.run_teardown_ms = rep.teardown_ms;
        res->stages.run_lock_wait_ms = rep.lock_wait_ms;
        res->stages.run_timing_expect_ms = rep.timing_expect_ms;
        res->stages.run_timing_hold_ms = rep.timing_hold_ms;
    }
    if ((!have || sr->status != PK_SB_OK || !rep.ok) && failed_before_candidate(job, sr, res)) {
        char what[600];
        if (have && !rep.ok)
            snprintf(what, sizeof what, "%s", rep.error);
        else
            snprintf(what, sizeof what, "%s, exit code %d, signal %d",
                     pk_sb_status_name(sr->status), sr->exit_code, sr->signal);
        set_infra(job, sr, res, what);
        return PK_OK;
    }
    if (!have || sr->status != PK_SB_OK || !rep.ok) {
        res->status = PK_STATUS_RUNTIME_ERROR;
        char crash[64];
        for (int r = 0; r < job->world; r++)
            if (read_marker(job, r, "crash", crash, sizeof crash) == 0) {
                int rank = -1, sig = 0;
                if (sscanf(crash, "%d %d", &rank, &sig) == 2) {
                    res->signal = sig;
                    snprintf(res->reason, sizeof res->reason, "rank %d crashed: %s", rank,
                             strsignal(sig));
                    return PK_OK;
                }
            }
        if (have && !rep.ok)
            snprintf(res->reason, sizeof res->reason, "%s", rep.error);
        else if (sr->status == PK_SB_SIGNAL)
            snprintf(res->reason, sizeof res->reason, "the run was killed by %s",
                     strsignal(sr->signal));
        else
            snprintf(res->reason, sizeof res->reason, "the run failed (%s, exit code %d)",
                     sr->status == PK_SB_MEMORY         ? "memory limit"
                     : sr->status == PK_SB_OUTPUT_LIMIT ? "output limit"
                                                        : "no result",
                     sr->exit_code);
        return PK_OK;
    }
    classify_trials(res);
    if (classify_guards(&rep, res) || !rep.timed || res->status != PK_STATUS_CORRECT)
        return PK_OK;
    if (!classify_timed_calls(&rep, res))
        check_timing(job, &rep, res);
    return PK_OK;
}
