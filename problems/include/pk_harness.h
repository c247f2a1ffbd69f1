/* pk_harness: evaluates one submission of one problem, in stages, through the sandbox.
 *
 * Stages: prepare (write source) -> compile (sandboxed nvcc, then ELF symbol checks)
 * -> run (all ranks in one sandbox: correctness trials, then timing). The scheduler in
 * rollout/ runs compile on CPU workers and run on GPU slots; pk_harness_evaluate() runs
 * them all in order. The verdict is computed by harness code only.
 */
#ifndef PK_HARNESS_H
#define PK_HARNESS_H

#include <stdint.h>

#include "pk_common.h"
#include "pk_problems.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_EVAL_MAX_RANKS 8
#define PK_EVAL_MAX_TRIALS 32
#define PK_EVAL_MAX_CHECKS 32

typedef struct pk_check_result {
    char name[48]; /* e.g. "symbols.undefined_allowlist", "inputs_unchanged", "roofline_floor" */
    int passed;
    char detail[256];
} pk_check_result;

typedef struct pk_rank_mismatch {
    int rank;
    char arg[32];    /* output argument name */
    long long index; /* first mismatching element, -1 if none */
    double expected;
    double got;
} pk_rank_mismatch;

typedef struct pk_trial_verdict {
    int passed;
    double max_abs_err;
    double max_rel_err;
    int inputs_modified;
    int n_mismatch;                               /* ranks with a mismatch */
    pk_rank_mismatch mismatch[PK_EVAL_MAX_RANKS]; /* first mismatch per failing rank */
} pk_trial_verdict;

typedef struct pk_timing {
    double median_us; /* median over iterations of the max over ranks */
    double cv;        /* coefficient of variation of those iteration times */
    double min_us;
    double mean_us;
    int iters;
    int warmup_iters;
} pk_timing;

typedef struct pk_stage_times {
    double prepare_ms, compile_ms, symbols_ms, run_ms, total_ms;
    double run_setup_ms;  /* process launch, CUDA and NCCL init inside run_ms */
    double run_check_ms;  /* correctness trials inside run_ms */
    double run_timing_ms; /* timing inside run_ms */
    double run_init_ms;   /* inside run_setup_ms: device, CUDA and NCCL init (slowest rank) */
    double run_arena_ms;  /* inside run_setup_ms: arena, window, device communicator, buffers */
    /* Warm runs (pk_job_warm): sandbox, process launch, init and arena ran before go, hidden
     * behind the compile; run_ms and run_setup_ms count from go, run_warm_ms is the time
     * from the warm start to go, and run_init_ms/run_arena_ms lie inside it. 0 when cold. */
    double run_warm_ms;
    /* Inside run_check_ms + run_timing_ms + run_setup_ms: the verification of timed calls
     * (epilogues after every timed call, block checks, the post-timing call, guard checks). */
    double run_verify_ms;
    double run_teardown_ms; /* inside run_setup_ms: freeing buffers and communicators (only
                               with PKGYM_RUNNER_TEARDOWN=1; by default the runner exits at once) */
    /* Inside run_check_ms + run_timing_ms: waiting for other jobs' hold on the GPU locks. */
    double run_lock_wait_ms;
    double run_timing_expect_ms; /* the runner's estimate of its timing phase (its budget's base) */
    double run_timing_hold_ms;   /* how long timing held the GPU locks exclusively */
} pk_stage_times;

/* The baseline a speedup was computed against: the reference timed in this step, or a cached
 * reference time (pk_eval_opts.baseline_us) with the facts of when and how well it was measured. */
typedef struct pk_baseline_used {
    double us;          /* 0 when there was no timing */
    double cv;          /* its coefficient of variation; 0 when unknown */
    int iters;          /* timed iterations behind it; 0 when unknown */
    double measured_at; /* seconds since the epoch; 0 when unknown */
    int cached;         /* 1: from the baseline cache (the reference was not timed this step) */
} pk_baseline_used;

/* The profile stage's outcome (pk_profile.h, docs/feedback.md "Profiles"). Never part of the
 * verdict or the reward: a profiler failure is ours and is reported here only. */
typedef struct pk_profile_result {
    int level;       /* enum pk_profile_level asked for; 0: no profile was asked */
    char status[12]; /* "ok", "partial" (one profiler failed), "error", "skipped"; "" none */
    char reason[400];
    double cost_s; /* wall time of the stage (both profiler runs) */
    char *text;    /* owned: the lines the feedback shows; NULL when none */
    char *raw;     /* owned: pk_profile_data_to_json, for the store; NULL when none */
} pk_profile_result;

typedef struct pk_eval_result {
    pk_status status;
    char reason[512]; /* one line: why this status (error, rule, mismatch summary) */
    char rule[48];    /* status rejected: the anti-hacking rule that fired */

    int n_checks;
    pk_check_result checks[PK_EVAL_MAX_CHECKS];

    int n_trials; /* trials that ran: the first failing one ends the run */
    /* Trials planned: the base (the problem's, or pk_eval_opts.trials) plus the runner's secret
     * jitter of 0 to 2 once the run has reported. */
    int trials_planned;
    pk_trial_verdict trials[PK_EVAL_MAX_TRIALS];

    int has_timing;
    pk_timing candidate;
    pk_timing reference; /* all 0 when a cached baseline was used (not timed this step) */
    double speedup;      /* baseline.us / candidate.median_us; 0 unless timed */
    pk_baseline_used baseline;
    /* The problem's rooflines on this GPU (0 if none; docs/problems.md, "Roofline").
     * roofline_floor_us: the lower bound that even perfect overlap of compute, memory and
     * communication cannot beat; a median below 0.9 x it is rejected (rule roofline_floor).
     * roofline_no_overlap_us: the phases one after another, each at its own bound; an
     * overlapping kernel can beat it. */
    double roofline_floor_us;
    double roofline_no_overlap_us;

    int world_size;
    int n_hung; /* status timeout: ranks that had not finished */
    int hung_ranks[PK_EVAL_MAX_RANKS];
    int exit_code; /* of the run stage */
    int signal;
    char launcher[16]; /* "fork" or "mpi" */
    char gpu_name[64];

    pk_stage_times stages;
    char *compile_log; /* owned; NULL if not compiled */
    char *stdout_tail; /* owned; candidate output is feedback only, never parsed */
    char *stderr_tail; /* owned */
    pk_profile_result profile;
} pk_eval_result;

void pk_eval_result_init(pk_eval_result *r);
void pk_eval_result_free(pk_eval_result *r); /* frees owned strings; r can be reused after init */
/* Adds a check; returns its index or -1 when full. */
int pk_eval_result_add_check(pk_eval_result *r, const char *name, int passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* JSON form (jansson). Stable keys, documented in docs/problems.md; the trajectory
 * store keeps this text, and rewards are recomputed from it. */
char *pk_eval_result_to_json(const pk_eval_result *r); /* malloc'd */
int pk_eval_result_from_json(const char *json, pk_eval_result *r, pk_error *err);

typedef struct pk_eval_opts {
    int trials;            /* 0: the problem's default (5) */
    uint64_t seed;         /* secret per-step seed; 0: drawn from getrandom() */
    const char *work_root; /* job directories go here; NULL: $TMPDIR/pkgym-jobs */
    int n_gpus;            /* 0: GPUs 0..world_size-1 */
    int gpus[PK_EVAL_MAX_RANKS];
    int compile_timeout_ms;     /* 0: default 120000 */
    int run_timeout_ms;         /* 0: default 60000 */
    int skip_timing;            /* correctness only */
    int reference_as_candidate; /* time the reference against itself (calibration) */
    double baseline_us;         /* > 0: use this cached baseline instead of timing the reference */
    double baseline_cv;         /* with baseline_us: its CV, repetitions and when it was taken */
    int baseline_iters;         /* (copied into pk_eval_result.baseline; 0 when unknown) */
    double baseline_measured_at;
    const char *launcher; /* "fork", "mpi", or NULL for the problem's default */
    int keep_workdir;
    int world_size; /* 0: the problem's default; else one of its world_sizes */
    int no_warm;    /* pk_harness_evaluate: start the run only after the compile (no overlap) */
    /* Absolute directory: each trial's inputs and reference outputs are written there, per
     * rank, with a manifest.json (bench/pkb-crosscheck reads them). NULL: none. */
    const char *dump_dir;
    /* Dims override for this run ("NAME=VALUE,..." or a preset such as "pkb"); the caller
     * applies it to its own copy of the problem too (pk_problem_override_dims). NULL: none. */
    const char *dims;
    /* Input regime forced on every input that allows it ("iid": PKB's own inputs; calibration
     * of tolerances per regime); NULL: each call's regime is drawn secretly (docs/problems.md,
     * "Input regimes"). */
    const char *regime;
    /* Per-GPU timing locks shared by every job on the machine (docs/problems.md, "Sharing
     * GPUs"): timing holds the job's GPUs exclusively, trials shared. NULL: the default
     * directory (pk_gpu_lock_dir_default). GPU problems lock their GPUs; host problems lock
     * the gpus given to the run (none by default). no_locks: take none. */
    const char *lock_dir;
    int no_locks;
    /* The profile stage (docs/feedback.md, "Profiles"): enum pk_profile_level, 0 none. Runs
     * after the timed run for a `correct` verdict only, if profile_budget (shared by every job
     * of the server; NULL: unlimited) allows; profile_timeout_s bounds it (0: the budget's
     * seconds per profile, else 120). */
    int profile;
    struct pk_profile_budget *profile_budget;
    double profile_timeout_s;
    /* Which GPUs each rank process of a GPU job sees (PK_RANK_VISIBILITY_*): all the job's
     * (device = rank) or only its own (device 0). 0: $PKGYM_RANK_VISIBILITY, else all. */
    int rank_visibility;
} pk_eval_opts;

enum { PK_RANK_VISIBILITY_DEFAULT = 0, PK_RANK_VISIBILITY_ALL = 1, PK_RANK_VISIBILITY_OWN = 2 };
/* "all" or "own" -> PK_RANK_VISIBILITY_ALL / _OWN; -1 for anything else. */
int pk_rank_visibility_parse(const char *name);
/* The visibility a job with these options runs with: opts->rank_visibility when set, else
 * $PKGYM_RANK_VISIBILITY ("own" or "all"; anything else counts as "all"), else all. */
int pk_rank_visibility_of(const pk_eval_opts *opts);

void pk_eval_opts_default(pk_eval_opts *o);

/* Device memory one job of p at world_size needs on each of its GPUs, MiB: the runner's
 * arena, reference, pristine and snapshot buffers and flush buffer from the problem's sizes,
 * plus PK_JOB_GPU_OVERHEAD_MB for the process's CUDA context and NCCL communicator. 0 for host
 * problems. For schedulers that put several jobs on one GPU. */
#define PK_JOB_GPU_OVERHEAD_MB 1536
long pk_job_device_mb(const pk_problem *p, int world_size);

/* The machine-wide lock directory: $PKGYM_LOCK_DIR, else /tmp/pkgym-locks-<uid>. */
void pk_gpu_lock_dir_default(char *out, size_t cap);
/* Makes dir (0700, refused when it is a link or not the caller's) and the lock files of GPUs
 * ids[0..n). Every job of the machine must use the same directory for the locks to work. */
int pk_gpu_locks_prepare(const char *dir, const int *ids, int n, pk_error *err);

typedef struct pk_job pk_job;

int pk_job_create(const pk_problem *p, const char *source, const pk_eval_opts *opts, pk_job **out,
                  pk_eval_result *res, pk_error *err);
/* Compile key: SHA-256 hex of source, flags, toolchain and harness versions. */
const char *pk_job_compile_key(const pk_job *job);
/* Sandboxed nvcc + ELF checks. On a compile error or rejection, res->status is set and the
 * call still returns PK_OK; a non-zero return means the harness itself failed. */
int pk_job_compile(pk_job *job, pk_eval_result *res, pk_error *err);
/* Path of the compiled shared object (valid after a successful compile). */
const char *pk_job_object_path(const pk_job *job);
/* Uses an already compiled object (compile cache hit) instead of compiling. */
int pk_job_use_object(pk_job *job, const char *so_path, pk_eval_result *res, pk_error *err);
/* Starts the run stage ahead of the compile: the run sandbox launches and the ranks set up
 * devices, communicators (CUDA, NCCL, MPI) and the arena, then wait. The candidate is loaded
 * only after pk_job_run writes the go marker; pk_job_run on a job that failed to compile,
 * or pk_job_free, writes the abort marker instead and reaps every process. The GPUs must be
 * those later given to pk_job_run. Thread-safe against a concurrent pk_job_compile of the
 * same job (not against another pk_job_warm/run/free). */
int pk_job_warm(pk_job *job, const int *gpus, int n_gpus, pk_error *err);
int pk_job_is_warm(const pk_job *job);
/* Runs all ranks in one sandbox on the given GPUs (n_gpus == world size, or 0 on host problems).
 * On a warm job: checks the object is in place, says go and waits for the warm run. */
int pk_job_run(pk_job *job, const int *gpus, int n_gpus, pk_eval_result *res, pk_error *err);
void pk_job_free(pk_job *job); /* removes the job directory unless keep_workdir */
/* Removes the job directories (model-written code) that processes which have exited left under
 * work_root (NULL: $TMPDIR/pkgym-jobs), as a SIGKILLed server does; a live process's are kept
 * (it holds a lock, job-PID.owner, for its life), and so are those of keep_workdir (they hold a
 * .keep file). Returns how many were removed. */
int pk_job_reap_orphans(const char *work_root);

/* All stages in order; the run is warmed during the compile unless opts->no_warm. Returns
 * non-zero only if the harness itself failed. */
int pk_harness_evaluate(const pk_problem *p, const char *source, const pk_eval_opts *opts,
                        pk_eval_result *res, pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
